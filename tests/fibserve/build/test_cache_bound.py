"""The build cache stays under its size bound: least recently used builds go first, builds in use stay."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fibserve.build import BuildStatus, build_solution, load_python_entry
from fibserve.build.cache import IN_USE_S, BuildCache
from fibserve.trace import Solution
from filelock import FileLock

KIB = 1024


def _python_solution(tag: str, padding_kib: int = 40) -> Solution:
    """A Python solution whose source holds ``padding_kib`` KiB of comment (its build is about that large)."""
    source = f"# {tag}\n" + ("#" * 1023 + "\n") * padding_kib + "def run(x):\n    return x\n"
    return Solution.model_validate(
        {
            "name": tag,
            "definition": "d",
            "author": "tests",
            "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
            "sources": [{"path": "kernel.py", "content": source}],
        }
    )


def _age(build_dir: str, seconds_ago: float) -> None:
    """Make a build look last used ``seconds_ago`` (its ``result.json`` time is its last use)."""
    then = time.time() - seconds_ago
    os.utime(Path(build_dir) / "result.json", (then, then))


def _cache_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in (root / "builds").rglob("*") if f.is_file())


@pytest.fixture
def bounded(monkeypatch: pytest.MonkeyPatch) -> int:
    """A 100 KiB bound: two 40 KiB builds fit, a third does not."""
    monkeypatch.setenv("FIBSERVE_CACHE_MAX_GB", str(100 * KIB / 1024**3))
    return 100 * KIB


def test_least_recently_used_builds_are_evicted_down_to_the_bound(tmp_path: Path, bounded: int) -> None:
    first, second, third = (build_solution(_python_solution(t), cache_dir=tmp_path) for t in "abc")
    assert all(b.status == BuildStatus.OK for b in (first, second, third))
    _age(first.build_dir, IN_USE_S + 300)
    _age(second.build_dir, IN_USE_S + 100)
    _age(third.build_dir, IN_USE_S + 200)  # used after the first and before the second
    fourth = build_solution(_python_solution("d"), cache_dir=tmp_path)
    assert not Path(first.build_dir).exists() and not Path(third.build_dir).exists()
    assert Path(second.build_dir).exists() and Path(fourth.build_dir).exists()
    assert _cache_bytes(tmp_path) <= bounded
    again = build_solution(_python_solution("a"), cache_dir=tmp_path)  # evicted: built again, and it works
    assert not again.cached and load_python_entry(again)([1]) == [1]


def test_builds_in_use_or_locked_by_a_builder_are_kept_over_the_bound(tmp_path: Path, bounded: int) -> None:
    recent = build_solution(_python_solution("recent"), cache_dir=tmp_path)
    locked = build_solution(_python_solution("locked"), cache_dir=tmp_path)
    old = build_solution(_python_solution("old"), cache_dir=tmp_path)
    _age(locked.build_dir, IN_USE_S + 100)
    _age(old.build_dir, IN_USE_S + 100)
    _age(recent.build_dir, IN_USE_S + 100)
    assert build_solution(_python_solution("recent"), cache_dir=tmp_path).cached  # a hit marks it used
    cache = BuildCache(tmp_path)
    with FileLock(str(cache.lock_path(locked.key))):  # another process is (re)building this key
        assert cache.evict() == [old.key]
    assert Path(recent.build_dir).exists() and Path(locked.build_dir).exists()


def test_a_malformed_bound_is_an_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIBSERVE_CACHE_MAX_GB", "ten")
    with pytest.raises(ValueError, match="FIBSERVE_CACHE_MAX_GB='ten'"):
        BuildCache(tmp_path)
