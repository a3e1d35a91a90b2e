"""Fix notes: a folder of short Markdown notes on known kernel bugs, searched with BM25 for a failure's text.

A note is one ``*.md`` file whose first ``# `` line is its title. The index is built once per run with
``bm25s`` (Okapi BM25 over lowercased word tokens, English stop words removed); the query is the failure's
own text (:func:`failure_query`: status, error and compile logs, sanitizer findings, the verdict line), and
the notes that score above zero are added to the feedback, best first. The notes shipped with mini-ptx-agent
(``mini_ptx_agent/fix_notes``, ``notes_dir: bundled``) cover misaligned tensor maps, mbarrier deadlocks,
missing wgmma and async-proxy fences, shared-memory limits, edge-tile bounds and the ``a`` targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..feedback_options import BUNDLED_NOTES
from .report import FixNote, KernelReport

BUNDLED_DIR = Path(__file__).parents[1] / "fix_notes"
"""The fix notes shipped with mini-ptx-agent."""
TOP_HITS = 2
"""Notes added to one failure's feedback at most."""
MAX_QUERY_CHARS = 6000
"""Longest query text (characters; the head of each log is kept)."""


class FixNotesError(ValueError):
    """The notes folder cannot be used (missing, or without ``*.md`` notes); the message says which."""


def notes_folder(notes_dir: str) -> Path:
    """The folder ``notes_dir`` names: :data:`BUNDLED_DIR` for ``bundled``, else the path itself."""
    return BUNDLED_DIR if notes_dir == BUNDLED_NOTES else Path(notes_dir).expanduser()


def note_files(notes_dir: str) -> list[Path]:
    """The ``*.md`` notes of the folder ``notes_dir`` names, sorted.

    Raises:
        FixNotesError: the folder does not exist or holds no ``*.md`` file.
    """
    folder = notes_folder(notes_dir)
    if not folder.is_dir():
        raise FixNotesError(
            f"notes folder {folder} does not exist (give a folder of *.md notes, or 'bundled')"
        )
    files = sorted(folder.glob("*.md"))
    if not files:
        raise FixNotesError(f"notes folder {folder} holds no *.md notes")
    return files


@dataclass(frozen=True)
class _Note:
    name: str
    title: str
    text: str


class FixNoteIndex:
    """BM25 over the notes of one folder."""

    def __init__(self, notes: list[_Note]):
        import bm25s

        self.notes = notes
        self._bm25 = bm25s
        self._index = bm25s.BM25()
        self._index.index(self._tokens([f"{n.title}\n{n.text}" for n in notes]), show_progress=False)

    def _tokens(self, texts: list[str]):
        return self._bm25.tokenize(texts, stopwords="en", show_progress=False)

    @classmethod
    def load(cls, notes_dir: str) -> FixNoteIndex:
        """Index every ``*.md`` in the folder ``notes_dir`` names (:func:`notes_folder`).

        Raises:
            FixNotesError: the folder does not exist or holds no ``*.md`` file.
        """
        notes = []
        for path in note_files(notes_dir):
            text = path.read_text(encoding="utf-8")
            first, _, rest = text.partition("\n")
            title = first.removeprefix("# ").strip() if first.startswith("# ") else path.stem
            notes.append(_Note(path.name, title, rest.strip() if first.startswith("# ") else text.strip()))
        return cls(notes)

    def search(self, query: str, k: int = TOP_HITS) -> list[FixNote]:
        """The ``k`` best notes for ``query`` with a BM25 score above zero, best first."""
        tokens = self._tokens([query])
        if not query.strip() or not tokens.vocab:
            return []
        hits, scores = self._index.retrieve(tokens, k=min(k, len(self.notes)), show_progress=False)
        found = []
        for index, score in zip(hits[0], scores[0], strict=True):
            if float(score) > 0:
                note = self.notes[int(index)]
                found.append(
                    FixNote(name=note.name, title=note.title, text=note.text, score=round(float(score), 3))
                )
        return found


def failure_query(report: KernelReport) -> str:
    """The text a failure is searched with: its status, error and compile logs, sanitizer findings and notes."""
    parts = [report.status.value.replace("_", " ")]
    failing = [w for w in report.workloads if w.status.value != "PASSED"]
    parts += [w.status.value.replace("_", " ") + "\n" + w.log[:2000] for w in failing[:2]]
    analysis = report.static_analysis
    if analysis is not None:
        parts.append(analysis.compile_log[:2000])
        parts += analysis.policy_violations
    if report.sanitizer is not None:
        parts += [f"{f.tool} {f.message} {' '.join(f.details)}" for f in report.sanitizer.findings]
        if not report.sanitizer.findings:
            parts.append(report.sanitizer.summary[:2000])
    parts.append(report.notes[:1000])
    return "\n".join(p for p in parts if p)[:MAX_QUERY_CHARS]
