"""The project's docs stand alone: no committed file points at a design document the project does not ship.

Code, docstrings and docs explain themselves or point at the README or docs/; a reader of a fresh clone has
nothing else.
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


def _committed_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the committed files cannot be listed")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_committed_file_points_at_an_outside_design_document() -> None:
    found = []
    for path in _committed_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary data, or a file deleted in the working tree
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_DOCUMENT.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "say it here, or point at the README or docs/, instead of:\n" + "\n".join(found)
