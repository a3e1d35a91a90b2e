"""Validate trace-set roots: the library function behind ``fibserve validate``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .legacy import LegacyMigrationWarning
from .problems import LoadProblem
from .trace_set import DATASET_ROOTS_ENV, TraceSet


@dataclass
class ValidationReport:
    """Outcome of validating one or more roots together (as they would be merged)."""

    roots: list[str]
    """The roots, as given."""
    counts: dict[str, int]
    """definitions, solutions, workloads, traces, errors, warnings."""
    problems: list[LoadProblem]
    """Every problem with its file and line."""
    migrations: list[str] = field(default_factory=list)
    """One line per kind of legacy change applied (only with ``legacy``)."""

    @property
    def ok(self) -> bool:
        """True when no problem is an error (warnings are allowed)."""
        return not any(p.severity == "error" for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``fibserve validate --json`` prints)."""
        return {
            "ok": self.ok,
            "roots": self.roots,
            "counts": self.counts,
            "problems": [p.to_dict() for p in self.problems],
            "migrations": self.migrations,
        }


def validate_roots(roots: Sequence[str | Path], *, legacy: bool = False) -> ValidationReport:
    """Load ``roots`` together, collecting every problem instead of raising.

    Args:
        roots: trace-set roots (each may itself be a colon-separated list).
        legacy: migrate the 2025 public snapshot format (see :mod:`fibserve.trace.legacy`).
    """
    expanded: list[str] = []
    for root in roots:
        expanded.extend(str(r) for r in _split(root))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LegacyMigrationWarning)
        trace_set = TraceSet.load(expanded, migrate_legacy=legacy, strict=False)
    migrations = [str(w.message) for w in caught if issubclass(w.category, LegacyMigrationWarning)]
    return ValidationReport(
        roots=[str(r) for r in roots],
        counts=trace_set.counts(),
        problems=trace_set.problems,
        migrations=migrations,
    )


def default_roots() -> list[str]:
    """The roots ``fibserve`` uses when none are given: ``$DATASET_ROOTS``, else the bundled default set."""
    value = os.environ.get(DATASET_ROOTS_ENV, "").strip()
    if value:
        return [value]
    from fibserve.datasets import default_root

    return [str(default_root())]


def _split(root: str | Path) -> list[str]:
    text = str(root)
    return [part for part in text.split(":") if part] if ":" in text else [text]
