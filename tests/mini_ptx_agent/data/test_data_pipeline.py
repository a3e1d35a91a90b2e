"""Fixit and KernelGen end to end on a real experiment: the experiment runner against a real FIBServe on
127.0.0.1 (one CPU lane, the float32 CI definitions under the Triton interpreter) and the scripted models on an
OpenAI-compatible server; the repair and reasoning models are scripted too, and every repair is evaluated by the
same FIBServe.

The experiment: vector_add_f32 and softmax_rows_f32 x ``scripted/good`` (a correct kernel every turn) and
``scripted/broken`` (no code, then a kernel that does not compile, then a wrong one) x 3 turns. A copy of one
trajectory flagged as a demo replay is given as a further source and must be skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from mini_ptx_agent.data.mining import mine_failures, mine_kernels
from mini_ptx_agent.data.pairs import make_pairs
from mini_ptx_agent.data.reasoning import write_reasoning
from mini_ptx_agent.data.repair import repair_failures
from mini_ptx_agent.data.sft import build_sft
from mini_ptx_agent.experiments.config import ExperimentConfig
from mini_ptx_agent.experiments.launch import run_experiment
from mini_ptx_agent.environment.embedded import EmbeddedService
from run_cli import CLEARED
from scripted_kernels import BROKEN_MODEL, GOOD, GOOD_MODEL
from scripted_model import ScriptedOpenAIServer
from scripted_teachers import REASONING_MODEL, REASONING_TEXT, REPAIR_MODEL, TEACHERS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
PTXBENCH = Path(sys.executable).parent / "ptxbench"

SECRETS = {"OPENAI_API_KEY": "sk-data-SECRET-0123456789", "TINKER_API_KEY": "tml-data-SECRET-987654"}


@pytest.fixture(scope="module")
def fibserve() -> Iterator[str]:
    with EmbeddedService(devices=["cpu"]) as service:
        yield service.url


@pytest.fixture(scope="module")
def models() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(respond=TEACHERS) as server:
        yield server


@pytest.fixture(scope="module")
def experiment(fibserve: str, models: ScriptedOpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data") / "experiment"
    config = ExperimentConfig.model_validate(
        {
            "name": "data", "definitions": ["vector_add_f32", "softmax_rows_f32"], "workloads": 1,
            "languages": ["triton"], "prompt_tags": ["triton-hopper"], "models": [GOOD_MODEL, BROKEN_MODEL],
            "num_turns": 3, "concurrency": 4, "models_config": {"retry": {"max_attempts": 1}},
        }
    )  # fmt: skip
    result = run_experiment(config, output=root, service_url=fibserve, model_host=models.host_port)
    assert result.finished == 4, result
    return root


def demo_copy(experiment: Path, where: Path) -> Path:
    """One broken trajectory's run directory, copied and flagged as a demo replay in its plan only."""
    run = next((experiment / "runs").glob("softmax_rows_f32.*scripted-broken*"))
    copy = where / "demo-run"
    shutil.copytree(run, copy)
    plan = json.loads((copy / "plan.json").read_text())
    (copy / "plan.json").write_text(json.dumps(plan | {"demo": True}))
    return copy


def test_fixit_end_to_end(
    experiment: Path,
    fibserve: str,
    models: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    work = tmp_path / "fixit"
    selection = mine_failures([experiment, demo_copy(experiment, tmp_path)], work / "failures")
    assert selection["demo_trajectories_skipped"] == 1 and selection["trajectories"] == 5
    assert selection["by_class"] == {"compile": 2, "incorrect": 2}
    assert selection["selected"] == 4
    failures = [json.loads(line) for line in (work / "failures" / "failures.jsonl").read_text().splitlines()]
    for failure in failures:
        provenance = failure["provenance"]
        assert (Path(provenance["source_dir"]) / provenance["evaluation"]).is_file()
        assert provenance["model"] == BROKEN_MODEL and provenance["turn"] in (2, 3)
        assert (
            failure["error_log"].startswith("Evaluation of your kernel") and "VERDICT" in failure["error_log"]
        )

    estimate = repair_failures(work / "failures", work / "repairs", model=REPAIR_MODEL, dry_run=True)
    assert (estimate.calls, estimate.evaluations) == (4, 4) and estimate.prompt_tokens > 4 * 2000
    asked = len(models.answered)
    result = repair_failures(
        work / "failures",
        work / "repairs",
        model=REPAIR_MODEL,
        model_host=models.host_port,
        service_url=fibserve,
    )
    assert (result.called, result.written, result.passed, result.failed) == (4, 4, 3, {})
    assert len(models.answered) - asked == 4
    again = repair_failures(
        work / "failures",
        work / "repairs",
        model=REPAIR_MODEL,
        model_host=models.host_port,
        service_url=fibserve,
    )
    assert again.called == 0 and len(models.answered) - asked == 4  # nothing is asked twice

    summary = make_pairs(work / "repairs", work / "pairs")
    assert summary["pairs"] == 3 and summary["dropped"] == {"not_passed": 1}
    card = build_sft("fixit", work / "pairs", work / "sft")
    assert card["rows"] == 3 and card["by_class"] == {"compile": 1, "incorrect": 2}
    rows = [json.loads(line) for line in (work / "sft" / "sft.jsonl").read_text().splitlines()]
    for row in rows:
        assert row["format"] == "ptxbench.sft/1" and row["recipe"] == "fixit"
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user", "assistant"]
        assert row["loss_mask"] == [0, 0, 0, 0, 1]
        final = row["messages"][-1]["content"]
        assert final.startswith("<think>\n") and "</think>" in final
        assert GOOD[row["provenance"]["definition"]].strip() in final
        assert row["fix"]["status"] == "PASSED" and Path(row["fix"]["repair_record"]).is_file()
        assert row["kernel_hash"] == row["fix"]["kernel_hash"] != row["provenance"]["kernel_hash"]
        assert row["tokens"]["total"] == row["tokens"]["prompt"] + row["tokens"]["completion"]
    table = pq.read_table(work / "sft" / "sft.parquet").to_pylist()
    assert [r["id"] for r in table] == [r["id"] for r in rows]
    assert table[0]["messages"] == rows[0]["messages"] and table[0]["loss_mask"] == rows[0]["loss_mask"]
    assert "README.md" in {p.name for p in (work / "sft").iterdir()}

    small = build_sft("fixit", work / "pairs", tmp_path / "small", max_tokens=100)
    assert small["rows"] == 0 and small["left_out"] == {"over_token_cap": 3}
    for path in work.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            assert not any(secret in text for secret in SECRETS.values()), path


def test_flagged_fixes_are_labelled_and_left_out(experiment: Path, fibserve: str, models: ScriptedOpenAIServer,
                                                 tmp_path: Path) -> None:  # fmt: skip
    """A fix whose evaluation carries the roofline flag (as FIBServe writes it) is kept in pairs.jsonl with its
    flag, and left out of the SFT rows unless --include-flagged."""
    work = tmp_path / "fixit"
    mine_failures([experiment], work / "failures", classes=["incorrect"], limit=1)
    repair_failures(
        work / "failures",
        work / "repairs",
        model=REPAIR_MODEL,
        model_host=models.host_port,
        service_url=fibserve,
    )
    path = work / "repairs" / "repairs.jsonl"
    entry = json.loads(path.read_text())
    evaluation = entry["report"]["traces"][0]["evaluation"]
    evaluation["correctness"]["extra"]["plausibility"] = {
        "device_model": "H200", "floor_ms": 0.01, "latency_ms": 0.001, "flagged": True,
    }  # fmt: skip
    path.write_text(json.dumps(entry) + "\n")
    assert make_pairs(work / "repairs", work / "pairs")["flagged"] == 1
    pair = json.loads((work / "pairs" / "pairs.jsonl").read_text())
    assert [f["kind"] for f in pair["flags"]] == ["implausible"]
    card = build_sft("fixit", work / "pairs", work / "sft")
    assert card["rows"] == 0 and card["left_out"] == {"flagged": 1, "flagged:implausible": 1}
    kept = build_sft("fixit", work / "pairs", work / "sft-all", include_flagged=True)
    assert kept["rows"] == 1
    row = json.loads((work / "sft-all" / "sft.jsonl").read_text())
    assert row["flags"][0]["kind"] == "implausible"


def test_kernelgen_end_to_end(experiment: Path, models: ScriptedOpenAIServer, tmp_path: Path) -> None:
    work = tmp_path / "kernelgen"
    selection = mine_kernels([experiment], work / "kernels")
    assert selection["selected"] == 2 and selection["dropped"] == {"repeated_kernel": 4}
    asked = len(models.answered)
    result = write_reasoning(
        work / "kernels", work / "reasoning", model=REASONING_MODEL, model_host=models.host_port
    )
    assert (result.called, result.written, result.empty) == (2, 2, 0)
    card = build_sft("kernelgen", work / "reasoning", work / "sft")
    assert card["rows"] == 2 and card["by_model"] == {GOOD_MODEL: 2}
    assert card["by_teacher_model"] == {REASONING_MODEL: 2}
    rows = [json.loads(line) for line in (work / "sft" / "sft.jsonl").read_text().splitlines()]
    assert Counter(r["provenance"]["definition"] for r in rows) == {
        "vector_add_f32": 1,
        "softmax_rows_f32": 1,
    }
    for row in rows:
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
        assert row["loss_mask"] == [0, 0, 1]
        final = row["messages"][-1]["content"]
        assert final.startswith(f"<think>\n{REASONING_TEXT}\n</think>\n\n```python\n")
        assert row["provenance"]["status"] == "PASSED" and row["fix"] is None
    assert write_reasoning(work / "kernels", work / "reasoning", model=REASONING_MODEL,
                           model_host=models.host_port).called == 0  # fmt: skip
    assert len(models.answered) - asked == 2
    config = yaml.safe_load((experiment / "plan.json").read_text())
    assert config["config_hash"] == rows[0]["provenance"]["config_hash"]


def script(name: str, *args: str, env: dict[str, str]) -> subprocess.Popen:
    cleared = {k: v for k, v in os.environ.items() if k not in CLEARED}
    return subprocess.Popen(
        ["bash", str(ROOT / "scripts" / name), *args], env=cleared | env | {"PTXBENCH": str(PTXBENCH)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


def test_reproduce_scripts_survive_a_kill_and_repeat_no_model_call(
    experiment: Path, fibserve: str, models: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    """reproduce_fixit.sh killed (SIGKILL to its whole process group) after its first journaled repair, then
    run again: every failure's repair is asked exactly once; reproduce_kernelgen.sh the same way, once."""
    env = {"SERVICE_URL": fibserve, "ACCRL_MODEL_HOST": models.host_port, "REPAIR_MODEL": REPAIR_MODEL,
           "REASONING_MODEL": REASONING_MODEL, "REPAIR_ARGS": "--concurrency 1"}  # fmt: skip
    work = tmp_path / "fixit"
    check = script("reproduce_fixit.sh", "--check", str(work), str(experiment), env=env)
    output = check.communicate(timeout=300)[0]
    assert check.returncode == 0 and "calls: 4" in output, output
    assert not work.exists()

    asked = len(models.answered)
    proc = script("reproduce_fixit.sh", str(work), str(experiment), env=env)
    deadline = time.monotonic() + 300
    while not list((work / "repairs" / "journal").glob("*.json")):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.1)  # polling the journal the script writes: there is nothing to wait on instead
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    again = script("reproduce_fixit.sh", str(work), str(experiment), env=env)
    output = again.communicate(timeout=600)[0]
    assert again.returncode == 0, output
    repairs = [body for model, body in models.answered[asked:] if model == REPAIR_MODEL]
    failing = Counter(
        next(m["content"] for m in reversed(b["messages"]) if m["role"] == "assistant") for b in repairs
    )
    assert len(failing) == 4 and set(failing.values()) == {1}, failing  # each failure asked once
    assert len((work / "sft" / "sft.jsonl").read_text().splitlines()) == 3

    kernelgen = script("reproduce_kernelgen.sh", str(tmp_path / "kernelgen"), str(experiment), env=env)
    output = kernelgen.communicate(timeout=600)[0]
    assert kernelgen.returncode == 0, output
    assert len((tmp_path / "kernelgen" / "sft" / "sft.jsonl").read_text().splitlines()) == 2
