"""The build cache stays under its size bound, also under a burst: least recently used builds go first, however
young; only builds in use (a lease is held) or being built stay. One build's products are bounded too."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fibserve.build import BuildStatus, build_solution, load_python_entry
from fibserve.build.cache import BuildCache
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
    for build in (first, second, third):
        build.release()
    _age(first.build_dir, 300)
    _age(second.build_dir, 100)
    _age(third.build_dir, 200)  # used after the first and before the second
    fourth = build_solution(_python_solution("d"), cache_dir=tmp_path)
    assert not Path(first.build_dir).exists() and not Path(third.build_dir).exists()
    assert Path(second.build_dir).exists() and Path(fourth.build_dir).exists()
    assert _cache_bytes(tmp_path) <= bounded
    again = build_solution(_python_solution("a"), cache_dir=tmp_path)  # evicted: built again, and it works
    assert not again.cached and load_python_entry(again)([1]) == [1]


def test_a_burst_of_young_builds_keeps_the_bound(tmp_path: Path, bounded: int) -> None:
    """Builds used seconds ago used to be kept whatever the bound (a burst of large builds grew the cache without
    limit); now only builds someone still uses are kept."""
    for tag in "abcdefgh":
        build_solution(_python_solution(tag), cache_dir=tmp_path).release()  # used and let go at once
        assert _cache_bytes(tmp_path) <= bounded


def test_builds_in_use_or_locked_by_a_builder_are_kept_over_the_bound(tmp_path: Path, bounded: int) -> None:
    in_use = build_solution(_python_solution("in use"), cache_dir=tmp_path)  # its lease is held
    locked = build_solution(_python_solution("locked"), cache_dir=tmp_path)
    old = build_solution(_python_solution("old"), cache_dir=tmp_path)
    locked.release()
    old.release()
    cache = BuildCache(tmp_path)
    with FileLock(str(cache.lock_path(locked.key))):  # another process is (re)building this key
        assert cache.evict() == [old.key]
    assert Path(in_use.build_dir).exists() and Path(locked.build_dir).exists()
    in_use.release()
    assert in_use.key in BuildCache(tmp_path, max_bytes=0).evict() and not Path(in_use.build_dir).exists()


def test_a_cache_hit_holds_a_lease_until_released(tmp_path: Path, bounded: int) -> None:
    build_solution(_python_solution("hit"), cache_dir=tmp_path).release()
    hit = build_solution(_python_solution("hit"), cache_dir=tmp_path)
    assert hit.cached
    cache = BuildCache(tmp_path, max_bytes=0)
    assert cache.evict() == []
    del hit  # dropping the result ends the lease as releasing it does
    assert cache.evict() != []


def test_a_build_whose_products_exceed_the_limit_fails_as_the_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIBSERVE_MAX_BUILD_MB", "1")
    result = build_solution(_python_solution("huge", padding_kib=1200), cache_dir=tmp_path)
    assert result.status == BuildStatus.COMPILE_ERROR
    assert "more than the limit of 1 MiB per build" in result.log
    assert _cache_bytes(tmp_path) < 64 * KIB  # only the record of why is kept


def test_a_malformed_bound_is_an_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIBSERVE_CACHE_MAX_GB", "ten")
    with pytest.raises(ValueError, match="FIBSERVE_CACHE_MAX_GB='ten'"):
        BuildCache(tmp_path)
