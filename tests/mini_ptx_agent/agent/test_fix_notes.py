"""BM25 fix notes: the bundled notes answer the failures they are written for; a folder of one's own works too."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_reports import report
from mini_ptx_agent.environment.fix_notes import BUNDLED_DIR, FixNoteIndex, FixNotesError, failure_query
from mini_ptx_agent.environment.report import QuotedFinding, SanitizerVerdict, StaticAnalysis


@pytest.fixture(scope="module")
def bundled() -> FixNoteIndex:
    return FixNoteIndex.load("bundled")


def test_every_bundled_note_has_a_title_and_a_body(bundled: FixNoteIndex) -> None:
    assert len(bundled.notes) == len(list(BUNDLED_DIR.glob("*.md"))) >= 6
    assert all(note.title and len(note.text) > 200 for note in bundled.notes)


@pytest.mark.parametrize(
    ("log", "first"),
    [
        ("the evaluation timed out after 10 s: the kernel hangs waiting on an mbarrier phase", "mbarrier-deadlock.md"),
        ("CUDA error: misaligned address at UTMALDG; cuTensorMapEncodeTiled failed", "misaligned-tensor-map.md"),
        ("ptxas fatal: Instruction 'wgmma.mma_async' not supported on .target 'sm_90'", "wrong-target-architecture.md"),
        ("too many resources requested for launch (dynamic shared memory 240 KB)", "shared-memory-limit.md"),
    ],
)  # fmt: skip
def test_a_failure_log_finds_its_note_first(bundled: FixNoteIndex, log: str, first: str) -> None:
    failing = report(["RUNTIME_ERROR"], language="cuda")
    failing.workloads[0].log = log
    hits = bundled.search(failure_query(failing))
    assert hits and hits[0].name == first, [(h.name, h.score) for h in hits]
    assert len(hits) <= 2 and all(h.score > 0 for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_the_query_carries_compile_logs_and_sanitizer_findings() -> None:
    failing = report(["COMPILE_ERROR"], language="cuda")
    failing.static_analysis = StaticAnalysis(
        compiled=False, compile_log="kernel.cu(9): error: fence.proxy.async"
    )
    failing.sanitizer = SanitizerVerdict(
        passed=False,
        findings=[QuotedFinding(tool="memcheck", workload="w", message="Invalid __global__ write")],
    )
    query = failure_query(failing)
    assert "fence.proxy.async" in query and "memcheck Invalid __global__ write" in query


def test_nothing_in_common_finds_nothing(bundled: FixNoteIndex) -> None:
    assert bundled.search("zzzz qqqq") == [] and bundled.search("") == []


def test_a_folder_of_ones_own_notes(tmp_path: Path) -> None:
    (tmp_path / "nan.md").write_text(
        "# NaN from an uninitialized accumulator\nZero the accumulator before the loop.\n"
    )
    (tmp_path / "other.md").write_text("No title line here, about register spills and local memory.\n")
    index = FixNoteIndex.load(str(tmp_path))
    (hit,) = index.search("INCORRECT NUMERICAL: NaN in the output, accumulator", k=1)
    assert (hit.name, hit.title, hit.text) == (
        "nan.md",
        "NaN from an uninitialized accumulator",
        "Zero the accumulator before the loop.",
    )
    assert index.search("register spills", k=1)[0].title == "other"
    with pytest.raises(FixNotesError, match="does not exist"):
        FixNoteIndex.load(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FixNotesError, match=r"holds no \*\.md notes"):
        FixNoteIndex.load(str(tmp_path / "empty"))
