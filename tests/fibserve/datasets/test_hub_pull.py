"""`fibserve datasets pull` offline: the Hugging Face Hub client (huggingface_hub, with HF_HUB_OFFLINE=1)
reads a Hub cache that this test builds in the Hub's own layout (blobs, snapshots/<commit> of links, refs),
so the real download path runs without a network. The sets: a small one in the current format with a
safetensors blob, and the 2025 public snapshot (from ../shared/data), which arrives migrated."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHARED_SNAPSHOT = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "flashinfer-trace-2025"


def hub_cache(home: Path, repo: str, files: dict[str, bytes], commit: str = COMMIT) -> None:
    """Write ``files`` (path in the repository -> content) as a cached dataset snapshot under
    ``home/hub`` exactly as huggingface_hub lays it out: content-addressed blobs, a snapshot folder of
    relative links to them, and ``refs/main`` naming the commit."""
    folder = home / "hub" / f"datasets--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    for path, content in files.items():
        blob = folder / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        link = folder / "snapshots" / commit / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))


def _tiny_set(tmp: Path) -> dict[str, bytes]:
    definition = {
        "name": "scale_rows",
        "op_type": "elementwise",
        "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 4}},
        "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}, "w": {"shape": ["N"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}},
        "reference": "def run(x, w):\n    return x * w\n",
    }
    blob = tmp / "w.safetensors"
    save_file({"w": torch.arange(4, dtype=torch.float32)}, str(blob))
    workload = {
        "definition": "scale_rows",
        "solution": None,
        "evaluation": None,
        "workload": {
            "uuid": "tiny-1",
            "axes": {"M": 3},
            "inputs": {
                "x": {"type": "random"},
                "w": {"type": "safetensors", "path": "blob/w.safetensors", "tensor_key": "w"},
            },
        },
    }
    return {
        "definitions/elementwise/scale_rows.json": json.dumps(definition).encode(),
        "workloads/elementwise/scale_rows.jsonl": (json.dumps(workload) + "\n").encode(),
        "blob/w.safetensors": blob.read_bytes(),
        "README.md": b"a tiny trace set\n",
    }


def _pull(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fibserve", "datasets", "pull", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def hub_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "DATASET_ROOTS"))}
    env |= {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "PTXBENCH_TRACESETS_ROOT": str(tmp_path / "sets"),
    }
    return env


def test_a_current_set_is_copied_validated_and_named(tmp_path: Path, hub_env: dict[str, str]) -> None:
    hub_cache(tmp_path / "hf", "acme/tiny-trace", _tiny_set(tmp_path))
    done = _pull(hub_env, "acme/tiny-trace")
    assert done.returncode == 0, done.stderr
    target = tmp_path / "sets" / "tiny-trace"
    assert f"DATASET_ROOTS={target}" in done.stdout and COMMIT[:12] in done.stdout
    assert (target / "blob" / "w.safetensors").is_file() and not (
        target / "blob" / "w.safetensors"
    ).is_symlink()
    assert not (target.parent / "tiny-trace.partial").exists()
    check = subprocess.run(
        [sys.executable, "-m", "fibserve", "validate", "--json", str(target)], capture_output=True, text=True
    )
    report = json.loads(check.stdout)
    assert report["ok"] and report["counts"]["definitions"] == 1 and report["counts"]["workloads"] == 1

    again = _pull(hub_env, "acme/tiny-trace")  # nothing already there is lost
    assert again.returncode == 2 and "exists and is not empty: pass --force" in again.stderr
    assert (target / "README.md").is_file()
    forced = _pull(hub_env, "acme/tiny-trace", "--force", "--json", "--into", str(tmp_path / "elsewhere"))
    assert forced.returncode == 0
    result = json.loads(forced.stdout)
    assert result["revision"] == COMMIT and result["format"] == "current" and result["counts"]["errors"] == 0


def test_the_2025_snapshot_arrives_migrated_to_the_current_format(
    tmp_path: Path, hub_env: dict[str, str]
) -> None:
    if not SHARED_SNAPSHOT.is_dir():
        pytest.skip("the 2025 FlashInfer Trace snapshot is not at ../shared/data")
    files = {
        str(p.relative_to(SHARED_SNAPSHOT)): p.read_bytes() for p in SHARED_SNAPSHOT.rglob("*") if p.is_file()
    }
    hub_cache(tmp_path / "hf", "flashinfer-ai/flashinfer-trace", files)
    done = _pull(hub_env, "flashinfer-ai/flashinfer-trace", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["format"] == "legacy" and result["counts"]["definitions"] == 10
    assert any("'type' renamed to 'op_type'" in line for line in result["migrations"])
    target = Path(result["path"])
    definition = json.loads(
        (target / "definitions" / "gqa" / "gqa_paged_decode_h32_kv8_d128_ps1.json").read_text()
    )
    assert definition["op_type"] == "gqa" and "type" not in definition
    assert not (target / "traces" / "workloads").exists()  # workloads moved to workloads/
    plain = subprocess.run(
        [sys.executable, "-m", "fibserve", "validate", "--json", str(target)], capture_output=True, text=True
    )
    assert json.loads(plain.stdout)["ok"]  # read without --legacy


@pytest.mark.parametrize(
    ("repo", "message"),
    [
        ("acme/missing", "is not in the Hugging Face cache"),
        ("no-slash", "give the dataset as owner/name"),
    ],
)
def test_what_cannot_be_pulled_is_one_clear_error(hub_env: dict[str, str], repo: str, message: str) -> None:
    done = _pull(hub_env, repo)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
