"""Build cache: one directory per key, filled once, safe under concurrent builders, bounded under any load.

Layout under the cache root (``FIBSERVE_CACHE_DIR``, default ``~/.cache/fibserve``)::

    builds/<key>/            a finished build: sources, products, build.log, result.json
    builds/<key>.tmp-<id>/   a build in progress (renamed into place when done), or a timed-out build kept
                             for its log until the next build of the same key
    locks/<key>.lock         held while one process builds <key>; others wait, then read the result
    locks/<key>.use          share-locked (``flock``) by every user of the finished build: a lease

A directory only appears under its final name once ``result.json`` is complete, so a reader never sees half a
build. Compile errors are cached (they are a function of the key); timeouts, infrastructure errors and compilers
killed by a signal (a memory limit, say) are not.

The cache is bounded (``FIBSERVE_CACHE_MAX_GB``, default 10 GiB): after each new build, the least recently
used builds are deleted until the rest fit, however young they are, except builds *in use*. A build is in use
while someone holds its lease (:class:`BuildLease`): :func:`fibserve.build.build_solution` returns every
result with a lease taken before the key's lock is let go, and the lease ends when the caller releases the
result or drops it. A deleter takes the key's lock and the lease file exclusively (without waiting), renames
the build out of place and deletes it; a reader takes the lease first and then looks, so it either holds the
whole build or finds none and rebuilds under the lock. So the cache holds at most its bound plus the builds in
use, each at most ``FIBSERVE_MAX_BUILD_MB`` (a burst of large builds cannot grow it further). The modification
time of ``result.json`` is a build's last use (every cache hit touches it).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import uuid
from pathlib import Path

from filelock import FileLock, Timeout

from .result import BuildResult, BuildStatus

log = logging.getLogger("fibserve.build")

CACHE_FORMAT = 1
"""Bumped when the layout or the builders change in a way that invalidates old builds."""

DEFAULT_MAX_GB = 10.0
"""Default size bound of the cache (GiB), when ``FIBSERVE_CACHE_MAX_GB`` is not set."""

DEFAULT_MAX_BUILD_MB = 256
"""Default bound of one build's products (MiB), when ``FIBSERVE_MAX_BUILD_MB`` is not set: a kernel library with
its PTX and cubins is a few MiB; an assembler ``.incbin`` of a toolkit library made one 846 MB build."""

_SIZE_FILE = "size-bytes"
"""File in a finished build holding its size in bytes, so eviction need not walk every build."""


def default_cache_dir() -> Path:
    """``FIBSERVE_CACHE_DIR`` if set, else ``~/.cache/fibserve``."""
    env = os.environ.get("FIBSERVE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fibserve"


def default_max_bytes() -> int:
    """``FIBSERVE_CACHE_MAX_GB`` (GiB) in bytes, else ``DEFAULT_MAX_GB``.

    Raises:
        ValueError: the variable is not a positive number.
    """
    env = os.environ.get("FIBSERVE_CACHE_MAX_GB")
    try:
        gib = float(env) if env else DEFAULT_MAX_GB
    except ValueError:
        gib = -1.0
    if not gib > 0:
        raise ValueError(f"FIBSERVE_CACHE_MAX_GB={env!r} is not a positive number of GiB (e.g. 10 or 0.5)")
    return int(gib * 1024**3)


def max_build_bytes() -> int:
    """``FIBSERVE_MAX_BUILD_MB`` (MiB) in bytes, else ``DEFAULT_MAX_BUILD_MB``: the most one build may write.

    Raises:
        ValueError: the variable is not a positive integer.
    """
    env = os.environ.get("FIBSERVE_MAX_BUILD_MB")
    try:
        mib = int(env) if env else DEFAULT_MAX_BUILD_MB
    except ValueError:
        mib = -1
    if mib <= 0:
        raise ValueError(f"FIBSERVE_MAX_BUILD_MB={env!r} is not a positive number of MiB (e.g. 256)")
    return mib << 20


class BuildLease:
    """A shared ``flock`` on a build's lease file: while any lease is held, the build is not evicted. Ends at
    :meth:`release`, or when the object is garbage-collected (the descriptor closes)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a+b")  # noqa: SIM115 (held for the lease's lifetime)
        fcntl.flock(self._file.fileno(), fcntl.LOCK_SH)

    def release(self) -> None:
        """End the lease (idempotent)."""
        self._file.close()


def build_key(payload: dict[str, object]) -> str:
    """SHA-256 hex of the canonical JSON of ``payload`` (plus the cache format version)."""
    canonical = json.dumps({"format": CACHE_FORMAT, **payload}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class BuildCache:
    """Directories and locks of one cache root, bounded to ``max_bytes`` (default: :func:`default_max_bytes`)."""

    def __init__(self, root: Path | None = None, max_bytes: int | None = None) -> None:
        self.root = (root or default_cache_dir()).expanduser().resolve()
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes

    def final_dir(self, key: str) -> Path:
        """Where the finished build of ``key`` lives."""
        return self.root / "builds" / key

    def lock_path(self, key: str) -> Path:
        """The lock file guarding ``key``."""
        return self.root / "locks" / f"{key}.lock"

    def lease(self, key: str) -> BuildLease:
        """Take a lease on ``key``'s build (waits while a deleter holds it); see the module docstring."""
        return BuildLease(self.root / "locks" / f"{key}.use")

    def staging_dir(self, key: str) -> Path:
        """A fresh, empty directory to build ``key`` in. Call it holding the key's lock: earlier staging
        directories of the same key (a crashed builder, an unpublished timeout) are removed first."""
        for stale in (self.root / "builds").glob(f"{key}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        path = self.root / "builds" / f"{key}.tmp-{uuid.uuid4().hex[:12]}"
        path.mkdir(parents=True)
        return path

    def load(self, key: str) -> BuildResult | None:
        """The cached result of ``key`` holding a lease on it, or None if there is none (or it is unreadable)."""
        final = self.final_dir(key)
        lease = self.lease(key)
        try:
            os.utime(final / "result.json")  # its last use, for the order of eviction
            result = BuildResult.model_validate_json((final / "result.json").read_text())
        except (OSError, ValueError):
            lease.release()
            return None
        result.build_dir = str(final)
        result.cached = True
        result.hold(lease)
        return result

    def publish(self, staging: Path, result: BuildResult) -> BuildResult:
        """Write ``result.json`` into ``staging`` and move it to its final name (when cacheable).

        Timeouts and infrastructure errors stay where they are built (not cached), so a retry rebuilds.
        """
        cacheable = result.status in (BuildStatus.OK, BuildStatus.COMPILE_ERROR) and not result.transient
        final = self.final_dir(result.key)
        if cacheable:
            result.build_dir = str(final)
        (staging / "result.json").write_text(result.model_dump_json(indent=2))
        if cacheable:
            (staging / _SIZE_FILE).write_text(str(tree_bytes(staging)))
            if final.exists():  # a stale or unreadable build: replace it
                shutil.rmtree(final, ignore_errors=True)
            os.replace(staging, final)
        return result

    def evict(self) -> list[str]:
        """Delete the least recently used builds until the cache holds at most ``max_bytes``.

        Builds in use (a lease is held) and builds whose key lock a builder holds are kept; the others go,
        however recently used. Kept staging directories of unpublished builds (timeouts) count too and go
        first. One process evicts at a time; others skip.

        Returns:
            Names of the directories deleted under ``builds/`` (none when the cache cannot be read: that is
            logged, never raised, since a build that succeeded must not fail over its clean-up).
        """
        try:
            guard = FileLock(str(self._lock_file("evict")), timeout=0).acquire()
        except Timeout:
            return []
        except OSError:
            log.exception("build cache %s: cannot take the eviction lock", self.root)
            return []
        with guard:
            return self._evict_unlocked()

    def _evict_unlocked(self) -> list[str]:
        builds = self.root / "builds"
        try:
            entries = [e for e in (self._entry(p) for p in _listdir(builds)) if e is not None]
            total = sum(size for _, _, size in entries)
            removed = []
            for _used, path, size in sorted(entries, key=lambda e: (".tmp-" not in e[1].name, e[0])):
                if total <= self.max_bytes:
                    break
                if self._remove(path):
                    total -= size
                    removed.append(path.name)
        except OSError:
            log.exception("build cache %s: eviction failed; the cache may exceed its bound", self.root)
            return []
        if removed:
            log.info("build cache %s: evicted %d builds, %d bytes left", self.root, len(removed), total)
        return removed

    def _lock_file(self, name: str) -> Path:
        path = self.root / "locks" / f"{name}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _entry(self, path: Path) -> tuple[float, Path, int] | None:
        """(last use, path, bytes) of one directory under ``builds/``; leftovers of a crashed eviction are
        deleted on sight, and a build being written (no ``result.json`` yet) is skipped."""
        if ".evict-" in path.name:
            shutil.rmtree(path, ignore_errors=True)
            return None
        try:
            if ".tmp-" in path.name:
                return path.stat().st_mtime, path, tree_bytes(path)
            used = (path / "result.json").stat().st_mtime
        except OSError:
            return None
        try:
            size = int((path / _SIZE_FILE).read_text())
        except (OSError, ValueError):
            size = tree_bytes(path)
        return used, path, size

    def _remove(self, path: Path) -> bool:
        """Delete one build (or staging directory) unless a builder or a lease holds it; True when deleted."""
        key = path.name.split(".tmp-")[0]
        try:
            lock = FileLock(str(self._lock_file(key)), timeout=0).acquire()  # the builders' lock_path(key)
        except Timeout:
            return False  # a builder of this key is at work
        with lock, open(self.root / "locks" / f"{key}.use", "a+b") as use:
            try:
                fcntl.flock(use.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # in use
            away = path.with_name(f"{path.name}.evict-{uuid.uuid4().hex[:12]}")
            try:
                os.replace(path, away)
            except OSError:
                return False
        shutil.rmtree(away, ignore_errors=True)
        return True


def _listdir(path: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(path) if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (symlinks not followed)."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile
                total += os.lstat(os.path.join(folder, name)).st_size
    return total
