"""What a failing candidate's author reads: the worker's traceback starts at the candidate's own code."""

from __future__ import annotations

from pathlib import Path

from fibserve.bench.worker import _error_text


def _raise_from_candidate(source_dir: Path) -> BaseException:
    kernel = source_dir / "kernel.py"
    kernel.write_text(
        "def run(x):\n    return helper(x)\n\n\ndef helper(x):\n    raise ValueError(f'bad {x}')\n"
    )
    namespace: dict = {}
    exec(compile(kernel.read_text(), str(kernel), "exec"), namespace)
    try:
        namespace["run"](3)
    except ValueError as exc:
        return exc
    raise AssertionError("the candidate did not raise")


def test_the_traceback_starts_at_the_candidate_and_names_its_files_relatively(tmp_path: Path) -> None:
    source_dir = tmp_path / "build" / "pkg"
    source_dir.mkdir(parents=True)
    text = _error_text(_raise_from_candidate(source_dir), str(source_dir))
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
    source_dir = tmp_path / "pkg"
    source_dir.mkdir()
    kernel = source_dir / "kernel.py"
    kernel.write_text(
        "def run():\n    try:\n        {}['k']\n    except KeyError as e:\n        raise RuntimeError('wrapped') from e\n"
    )
    namespace: dict = {}
    exec(compile(kernel.read_text(), str(kernel), "exec"), namespace)
    try:
        namespace["run"]()
    except RuntimeError as exc:
        text = _error_text(exc, str(source_dir))
    assert "KeyError: 'k'" in text and "direct cause" in text and text.endswith("RuntimeError: wrapped\n")
    assert __file__ not in text.split("direct cause")[1]  # the outer stack still starts at the candidate
