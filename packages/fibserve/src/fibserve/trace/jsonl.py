"""Fast, exact validation of trace JSONL files (the hot path of loading 100,000 workloads).

Building a pydantic ``Trace`` costs about 20 us per line on a small CI machine, which alone would exceed the
2 s budget for 100,000 workloads. Workload lines in one file almost always differ only in ``uuid`` and the
*values* of ``axes``. So each line is parsed once (``pydantic_core.from_json``), and:

- a line that equals the last fully validated workload line (the *template*) in everything except ``uuid``
  and axis values, whose ``uuid`` is a non-empty ``str`` and whose axis values are plain non-negative
  ``int``s, is accepted without building models: every other field is identical to one pydantic accepted,
  and the differing fields meet exactly the model's constraints;
- every other line is validated by pydantic (``Trace.model_validate_json``) and becomes the new template if
  it is a workload trace.

The fast path only accepts a subset of what pydantic accepts, so it never loosens the schema; models for
fast-path lines are built on first lookup (:meth:`ParsedLine.trace`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from .legacy import Migrator
from .problems import describe_validation_error
from .trace import Trace


@dataclass(slots=True)
class ParsedLine:
    """One non-empty JSONL line: its number and either a valid object or an error message."""

    lineno: int
    """1-based line number."""
    raw: dict[str, Any] | None
    """The parsed (and, for legacy files, migrated) JSON object; None when malformed."""
    model: Trace | None = None
    """The validated model, when it was built during loading."""
    error: str | None = None
    """Why the line is invalid (None when valid)."""
    fast: bool = False
    """Accepted on the fast path: equal to the previous validated workload line (``model`` set, workload
    trace) except ``uuid`` and axis values, so every check that ignores those gives the same answer."""

    def trace(self) -> Trace:
        """The validated model, built now from ``raw`` if loading took the fast path."""
        if self.model is None:
            self.model = Trace.model_validate(self.raw)
        return self.model


class _Template:
    """The last fully validated workload line, plus a probe dict for one C-level deep comparison per line."""

    def __init__(self, raw: dict[str, Any]):
        self.workload = dict(raw["workload"])
        self.probe = {**raw, "workload": self.workload}

    def matches(self, raw: dict[str, Any]) -> bool:
        """Whether ``raw`` equals the template up to ``uuid`` and axis values, and those are valid."""
        workload = raw.get("workload")
        if type(workload) is not dict:
            return False
        uuid = workload.get("uuid", _MISSING)
        axes = workload.get("axes", _MISSING)
        if type(uuid) is not str or not uuid or type(axes) is not dict:
            return False
        reference_axes = self.workload["axes"]
        self.workload["uuid"] = uuid
        self.workload["axes"] = axes
        try:
            same = raw == self.probe
        finally:
            self.workload["axes"] = reference_axes
        return (
            same
            and axes.keys() == reference_axes.keys()
            and all(type(v) is int and v >= 0 for v in axes.values())
        )


_MISSING = object()


def parse_trace_lines(
    data: bytes, migrator: Migrator | None = None, *, workload_file: bool
) -> Iterator[ParsedLine]:
    """Parse and validate every non-empty line of a trace JSONL file.

    Args:
        data: the file's bytes.
        migrator: legacy migrator; when given, every line is migrated then validated by pydantic.
        workload_file: the file is a workload file (only matters for legacy migration).

    Yields:
        One :class:`ParsedLine` per non-empty line, in order; invalid lines carry ``error``.
    """
    lines = [(n, text) for n, text in enumerate(data.splitlines(), start=1) if text.strip()]
    parsed: list[Any] | None = None
    if migrator is None:
        try:
            parsed = from_json(b"[" + b",".join(text for _, text in lines) + b"]")
        except ValueError:
            parsed = None  # some line is malformed: parse line by line to say which
        if parsed is not None and len(parsed) != len(lines):
            parsed = None  # a line held several values ("{...}, {...}"): per line, so it is reported
    template: _Template | None = None
    for index, (lineno, text) in enumerate(lines):
        try:
            raw = parsed[index] if parsed is not None else from_json(text)
        except ValueError as exc:
            yield ParsedLine(lineno, None, error=f"malformed JSON: {exc}")
            continue
        if not isinstance(raw, dict):
            yield ParsedLine(lineno, None, error=f"expected a JSON object, got {type(raw).__name__}")
            continue
        if migrator is not None:
            raw = migrator.trace(raw, workload_file=workload_file)
        elif template is not None and template.matches(raw):
            yield ParsedLine(lineno, raw, fast=True)
            continue
        try:
            model = Trace.model_validate(raw) if migrator is not None else Trace.model_validate_json(text)
        except ValidationError as exc:
            yield ParsedLine(lineno, raw, error=describe_validation_error(exc))
            continue
        if model.is_workload_trace and migrator is None:
            template = _Template(raw)
        yield ParsedLine(lineno, raw, model)
