"""`ptxbench train sft` and `ptxbench train export` up to the Tinker API: without TINKER_API_KEY they stop at once
and create nothing; with a dummy key (from the environment or a .env file) the real Tinker SDK sends its requests
to a local stand-in for the API, which records them and refuses the first that would start work. The key is in
the requests' header and in no file, log or message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mini_ptx_agent.data.records import Provenance
from mini_ptx_agent.data.rows import SFTRow, final_answer, loss_mask, normalise, token_counts
from tinker_standin import TinkerStandIn

DUMMY_KEY = "tml-dummy-SECRET-key-0123456789"


def dataset(where: Path) -> Path:
    """A one-row SFT dataset directory."""
    messages = normalise(
        [
            {"role": "system", "content": "You write Triton kernels."},
            {"role": "user", "content": "Add two vectors."},
            {"role": "assistant", "content": final_answer("Each program adds one block.", "def run(x, y, z):\n    pass\n", "triton")},
        ]
    )  # fmt: skip
    provenance = Provenance(
        source_dir=str(where), experiment="e", run_dir=".", trajectory="t", turn=1, model="m",
        definition="vector_add_f32", language="triton", arch="sm_90a", prompt_tag="triton-hopper", kernel_hash="0" * 64,
        evaluation="exp_000/evaluations/turn_001.json", status="PASSED", failure_class="PASSED",
    )  # fmt: skip
    row = SFTRow(
        id="kernelgen-x", recipe="kernelgen", messages=messages, loss_mask=loss_mask(messages),
        tokens=token_counts(messages), provenance=provenance, kernel_hash="0" * 64, teacher_model="m",
    )  # fmt: skip
    where.mkdir(parents=True, exist_ok=True)
    (where / "sft.jsonl").write_text(row.model_dump_json() + "\n")
    return where


def train(*args: str, cwd: Path, key: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TINKER_API_KEY", "TINKER_BASE_URL")}
    env |= {"COLUMNS": "200", "HF_HUB_OFFLINE": "1"} | ({"TINKER_API_KEY": key} if key else {})
    exe = Path(sys.executable).parent / "ptxbench"
    return subprocess.run(
        [str(exe), "train", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_without_a_key_both_commands_stop_before_any_work(tmp_path: Path) -> None:
    data = dataset(tmp_path / "sft")
    with TinkerStandIn() as standin:
        done = train("sft", str(data), "--log-dir", str(tmp_path / "log"), "--base-url", standin.url,
                     cwd=tmp_path, key=None)  # fmt: skip
        assert done.returncode == 2 and "TINKER_API_KEY is not set" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and not (tmp_path / "log").exists()
        done = train("export", "tinker://run/sampler_weights/final", "--output", str(tmp_path / "out"),
                     "--base-url", standin.url, cwd=tmp_path, key=None)  # fmt: skip
        assert done.returncode == 2 and "TINKER_API_KEY is not set" in done.stderr
        assert standin.requests == [] and not (tmp_path / "out").exists()


def test_with_a_dummy_key_the_sft_run_sends_its_model_request_and_writes_no_key(tmp_path: Path) -> None:
    pytest.importorskip("tinker_cookbook")
    data = dataset(tmp_path / "sft")
    log = tmp_path / "log"
    with TinkerStandIn() as standin:
        done = train("sft", str(data), "--log-dir", str(log), "--base-url", standin.url, "--lora-rank", "8",
                     cwd=tmp_path, key=DUMMY_KEY)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert standin.url in done.stderr and "stand-in for the Tinker API stops here" in done.stderr
    assert "/api/v1/create_session" in standin.paths()
    create = next(r for r in standin.requests if r["path"] == "/api/v1/create_model")
    assert create["json"]["base_model"] == "Qwen/Qwen3-8B" and create["json"]["lora_config"]["rank"] == 8
    assert all(r["headers"].get("x-api-key") == DUMMY_KEY for r in standin.requests)
    assert (log / "conversations.jsonl").is_file() and (log / "ptxbench-run.json").is_file()
    for path in [p for p in log.rglob("*") if p.is_file()]:
        assert DUMMY_KEY not in path.read_text(errors="replace"), path
    assert DUMMY_KEY not in done.stdout + done.stderr


def test_export_reads_the_key_from_dotenv_and_asks_the_api_for_the_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("tinker_cookbook")
    (tmp_path / ".env").write_text(f"TINKER_API_KEY={DUMMY_KEY}\n")
    with TinkerStandIn() as standin:
        done = train("export", "tinker://run-1/weights/final", "--output", str(tmp_path / "out"),
                     "--base-url", standin.url, cwd=tmp_path, key=None)  # fmt: skip
    assert done.returncode == 2 and standin.url in done.stderr, done.stderr
    assert standin.requests and all(r["headers"].get("x-api-key") == DUMMY_KEY for r in standin.requests)
    asked = [r for r in standin.requests if "tinker://run-1/weights/final" in json.dumps(r["json"])]
    assert asked and asked[0]["path"] == "/api/v1/load_weights", standin.paths()
    assert DUMMY_KEY not in done.stdout + done.stderr
