"""What a failing candidate's author reads: the worker's traceback starts at the candidate's own code."""

from __future__ import annotations

from pathlib import Path

from fibserve.bench.worker.entry import _error_text

RAISES = "def run(x):\n    return helper(x)\n\n\ndef helper(x):\n    raise ValueError(f'bad {x}')\n"
WRAPS = "def run(x):\n    try:\n        {}['k']\n    except KeyError as e:\n        raise RuntimeError('wrapped') from e\n"


def _candidate_error(source_dir: Path, source: str) -> str:
    """Run ``source``'s ``run(3)`` as if imported from ``source_dir/kernel.py``; the worker's error text."""
    source_dir.mkdir(parents=True, exist_ok=True)
    kernel = source_dir / "kernel.py"
    kernel.write_text(source)
    namespace: dict = {}
    exec(compile(source, str(kernel), "exec"), namespace)
    try:
        namespace["run"](3)
    except Exception as exc:
        return _error_text(exc, str(source_dir))
    raise AssertionError("the candidate did not raise")


def test_the_traceback_starts_at_the_candidate_and_names_its_files_relatively(tmp_path: Path) -> None:
    text = _candidate_error(tmp_path / "build" / "pkg", RAISES)
    lines = text.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1].strip() == 'File "kernel.py", line 2, in run'
    assert 'File "kernel.py", line 6, in helper' in text and text.endswith("ValueError: bad 3\n")
    assert str(tmp_path) not in text and __file__ not in text  # no build path, no harness frame


def test_without_candidate_frames_the_traceback_stays_whole(tmp_path: Path) -> None:
    try:
        {}["missing"]
    except KeyError as exc:
        text = _error_text(exc, str(tmp_path / "pkg"))
    assert __file__ in text and "KeyError: 'missing'" in text  # a harness failure stays diagnosable


def test_a_wrapped_error_keeps_its_cause(tmp_path: Path) -> None:
    text = _candidate_error(tmp_path / "pkg", WRAPS)
    assert "KeyError: 'k'" in text and "direct cause" in text and text.endswith("RuntimeError: wrapped\n")
    assert __file__ not in text.split("direct cause")[1]  # the outer stack still starts at the candidate
