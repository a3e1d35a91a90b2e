"""The project's docs stand alone: no committed file points at a design document the project does not ship.

Code, docstrings and docs explain themselves or point at the README or docs/; a reader of a fresh clone has
nothing else. Nor does any committed file hold what a merge left unresolved: a merge once went in with its
conflict markers in a module (every GPU step failed at import) and in three docs (nothing failed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Assembled from pieces so that this file does not match itself.
OUTSIDE_DOCUMENT = re.compile(r"\b" + "DES" + r"IGN\b")
CONFLICT_MARKER = re.compile("(" + "<" * 7 + " |" + "=" * 7 + "$|" + ">" * 7 + " )")


def _committed_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the committed files cannot be listed")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def _committed_lines():
    """(path relative to the checkout, line number, line) of every committed text file."""
    for path in _committed_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary data, or a file deleted in the working tree
        for number, line in enumerate(text.splitlines(), 1):
            yield path.relative_to(ROOT), number, line


def test_no_committed_file_points_at_an_outside_design_document() -> None:
    found = [
        f"{path}:{number}: {line.strip()[:120]}"
        for path, number, line in _committed_lines()
        if OUTSIDE_DOCUMENT.search(line)
    ]
    assert not found, "say it here, or point at the README or docs/, instead of:\n" + "\n".join(found)


def test_no_committed_file_holds_a_merge_conflict() -> None:
    found = [f"{path}:{number}" for path, number, line in _committed_lines() if CONFLICT_MARKER.match(line)]
    assert not found, "resolve the merge conflict at:\n" + "\n".join(found)
