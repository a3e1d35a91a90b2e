"""Build cache: one directory per key, filled once, safe under concurrent builders.

Layout under the cache root (``FIBSERVE_CACHE_DIR``, default ``~/.cache/fibserve``)::

    builds/<key>/            a finished build: sources, products, build.log, result.json
    builds/<key>.tmp-<id>/   a build in progress (renamed into place when done), or a timed-out build kept
                             for its log until the next build of the same key
    locks/<key>.lock         held while one process builds <key>; others wait, then read the result

A directory only appears under its final name once ``result.json`` is complete, so a reader never sees half a
build. Compile errors are cached (they are a function of the key); timeouts, infrastructure errors and compilers
killed by a signal (a memory limit, say) are not.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from .result import BuildResult, BuildStatus

CACHE_FORMAT = 1
"""Bumped when the layout or the builders change in a way that invalidates old builds."""


def default_cache_dir() -> Path:
    """``FIBSERVE_CACHE_DIR`` if set, else ``~/.cache/fibserve``."""
    env = os.environ.get("FIBSERVE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fibserve"


def build_key(payload: dict[str, object]) -> str:
    """SHA-256 hex of the canonical JSON of ``payload`` (plus the cache format version)."""
    canonical = json.dumps({"format": CACHE_FORMAT, **payload}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class BuildCache:
    """Directories and locks of one cache root."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or default_cache_dir()).expanduser().resolve()

    def final_dir(self, key: str) -> Path:
        """Where the finished build of ``key`` lives."""
        return self.root / "builds" / key

    def lock_path(self, key: str) -> Path:
        """The lock file guarding ``key``."""
        return self.root / "locks" / f"{key}.lock"

    def staging_dir(self, key: str) -> Path:
        """A fresh, empty directory to build ``key`` in. Call it holding the key's lock: earlier staging
        directories of the same key (a crashed builder, an unpublished timeout) are removed first."""
        for stale in (self.root / "builds").glob(f"{key}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        path = self.root / "builds" / f"{key}.tmp-{uuid.uuid4().hex[:12]}"
        path.mkdir(parents=True)
        return path

    def load(self, key: str) -> BuildResult | None:
        """The cached result of ``key``, or None if there is none (or it is unreadable)."""
        final = self.final_dir(key)
        try:
            text = (final / "result.json").read_text()
        except OSError:
            return None
        try:
            result = BuildResult.model_validate_json(text)
        except ValueError:
            return None
        result.build_dir = str(final)
        result.cached = True
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
            if final.exists():  # a stale or unreadable build: replace it
                shutil.rmtree(final, ignore_errors=True)
            os.replace(staging, final)
        return result
