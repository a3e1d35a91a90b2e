"""The gate kernel's seed cache (:mod:`fibserve.bench.worker.gate_seed`): what a worker copies from it, and a seed
that cannot be built. Its use on a GPU is tested in test_zygote.py (marked ``gpu``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fibserve.bench.worker import gate_seed


def _triton_like_cache(root: Path) -> None:
    """Files laid out as Triton's FileCacheManager leaves them: one directory per key, a group file naming its
    members by absolute path."""
    kernel = root / "KEY1"
    kernel.mkdir(parents=True)
    (kernel / "fibserve_l2_gate.cubin").write_bytes(b"\x7fELF cubin")
    (kernel / "fibserve_l2_gate.json").write_text('{"name": "fibserve_l2_gate"}')
    children = {name: str(kernel / name) for name in ("fibserve_l2_gate.cubin", "fibserve_l2_gate.json")}
    (kernel / "__grp__fibserve_l2_gate.json").write_text(json.dumps({"child_paths": children}))
    (root / "KEY2").mkdir()
    (root / "KEY2" / "cuda_utils.so").write_bytes(b"\x7fELF library")


def test_a_planted_cache_names_its_own_files_not_the_seeds(tmp_path: Path) -> None:
    seed, cache = tmp_path / "seed", tmp_path / "worker" / "triton"
    _triton_like_cache(seed)
    files = gate_seed.read(str(seed))
    assert gate_seed.plant(files, str(seed), str(cache)) == 4
    assert (cache / "KEY2" / "cuda_utils.so").read_bytes() == b"\x7fELF library"
    group = json.loads((cache / "KEY1" / "__grp__fibserve_l2_gate.json").read_text())["child_paths"]
    assert group == {name: str(cache / "KEY1" / name) for name in group}
    assert all(Path(path).exists() for path in group.values())
    assert (seed / "KEY1" / "__grp__fibserve_l2_gate.json").read_text().count(
        str(seed)
    ) == 2  # the seed unchanged


def test_what_a_worker_does_to_its_copy_never_reaches_the_seed_or_the_next_copy(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    _triton_like_cache(seed)
    files = gate_seed.read(str(seed))
    first, second = tmp_path / "first", tmp_path / "second"
    gate_seed.plant(files, str(seed), str(first))
    for path in first.rglob("*"):
        if path.is_file():
            path.write_bytes(b"planted by a candidate")
    gate_seed.plant(gate_seed.read(str(seed)), str(seed), str(second))
    assert (second / "KEY2" / "cuda_utils.so").read_bytes() == b"\x7fELF library"
    assert not any(b"candidate" in path.read_bytes() for path in seed.rglob("*") if path.is_file())


def test_a_link_in_the_seed_is_not_followed(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    _triton_like_cache(seed)
    secret = tmp_path / "secret"
    secret.write_text("not for a worker")
    (seed / "KEY2" / "link.so").symlink_to(secret)
    assert "KEY2/link.so" not in gate_seed.read(str(seed))


def test_no_seed_plants_nothing(tmp_path: Path) -> None:
    assert gate_seed.read(None) == {}
    assert gate_seed.read(str(tmp_path / "missing")) == {}
    assert gate_seed.make("cpu") is None


def _fails(device: str, cache: str) -> bool:
    return False


def _hangs(device: str, cache: str) -> bool:
    import time

    time.sleep(60)
    return True


@pytest.mark.parametrize("build", [_fails, _hangs], ids=["the build fails", "the build runs past its time"])
def test_a_seed_that_cannot_be_built_leaves_nothing_behind(tmp_path: Path, monkeypatch, build) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(gate_seed, "_build", build)  # the forked child runs it
    children, fork = [], os.fork

    def recorded_fork() -> int:
        pid = fork()
        if pid:
            children.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recorded_fork)
    assert gate_seed.make("cuda:0", timeout_s=1.0) is None
    assert list(tmp_path.iterdir()) == []
    assert len(children) == 1
    with pytest.raises(ChildProcessError):  # the child was reaped, not left a zombie
        os.waitpid(children[0], os.WNOHANG)


def test_a_copy_that_cannot_be_written_whole_is_not_left_half_written(tmp_path: Path) -> None:
    seed, cache = tmp_path / "seed", tmp_path / "worker" / "triton"
    _triton_like_cache(seed)
    files = gate_seed.read(str(seed))
    files["KEY1/fibserve_l2_gate.cubin/blocked"] = b"a file where the cubin must go"  # its parent is a file
    assert gate_seed.plant(files, str(seed), str(cache)) == 0
    assert not cache.exists()
