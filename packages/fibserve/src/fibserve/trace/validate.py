"""Validate and describe trace-set roots: the library functions behind ``fibserve validate`` and
``fibserve definitions``."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .definition import Definition
from .legacy import LegacyMigrationWarning
from .problems import LoadProblem
from .solution import Solution
from .trace_set import TraceSet


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
    suggestion: str | None = None
    """What to do next when a root looks like the 2025 format and ``legacy`` was not given (also among the
    problems, as a warning on that root)."""

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
            "suggestion": self.suggestion,
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
    not_trace_sets = [_not_a_trace_set(Path(root)) for root in expanded]
    hints = [] if legacy else [h for h in map(_legacy_hint, map(Path, expanded)) if h is not None]
    extra = [problem for problem in not_trace_sets if problem is not None] + hints
    counts = trace_set.counts()
    counts["errors"] += sum(p.severity == "error" for p in extra)
    counts["warnings"] += sum(p.severity == "warning" for p in extra)
    return ValidationReport(
        roots=[str(r) for r in roots],
        counts=counts,
        problems=extra + trace_set.problems,
        migrations=migrations,
        suggestion=f"{hints[0].path} {hints[0].message}" if hints else None,
    )


TRACE_SET_FOLDERS = ("definitions", "workloads", "solutions", "traces")
"""Sub-folders a trace-set root has (at least one of them), each holding that kind's JSON documents."""


def _not_a_trace_set(root: Path) -> LoadProblem | None:
    """An error for an existing folder with none of :data:`TRACE_SET_FOLDERS` (a typo'd or wrong root would
    otherwise validate as an empty, valid trace set). Missing roots are reported by the loader itself."""
    if not root.is_dir() or any((root / name).is_dir() for name in TRACE_SET_FOLDERS):
        return None
    folders = ", ".join(f"{name}/" for name in TRACE_SET_FOLDERS)
    return LoadProblem(path=str(root), message=f"has none of {folders}: is this a trace-set root?")


LEGACY_SAMPLE = 20
"""Definition files read to tell whether a root is in the 2025 format (the first ones in path order)."""


def legacy_hints(roots: Iterable[str | Path]) -> list[str]:
    """For each root (colon-separated lists split) that looks like the 2025 format: ``"<root> looks like ...:
    pass --legacy ..."``, the hint every command that reads trace sets without ``--legacy`` prints."""
    expanded = [Path(r) for root in roots for r in _split(str(root))]
    return [f"{hint.path} {hint.message}" for hint in map(_legacy_hint, expanded) if hint is not None]


def _legacy_hint(root: Path) -> LoadProblem | None:
    """A warning suggesting ``--legacy`` for a root that looks like the 2025 public snapshot: workload files
    under ``traces/workloads/``, or definitions that say ``type`` instead of ``op_type``."""
    if not root.is_dir():
        return None
    signs = []
    if (root / "traces" / "workloads").is_dir():
        signs.append("workload files under traces/workloads/")
    for path in sorted((root / "definitions").rglob("*.json"))[:LEGACY_SAMPLE]:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(raw, dict) and "type" in raw and "op_type" not in raw:
            signs.append(f"definitions with 'type' instead of 'op_type' ({path.name})")
            break
    if not signs:
        return None
    return LoadProblem(
        path=str(root),
        message=f"looks like the 2025 FlashInfer Trace format ({'; '.join(signs)}): validate it with --legacy, "
        "and pass --legacy to fibserve evaluate, check and serve too",
        severity="warning",
    )


@dataclass
class DefinitionDescription:
    """What a newcomer needs to implement a definition: its name, kind and the ``run`` calling convention (what
    ``fibserve definitions`` prints; ``GET /definitions`` answers the shorter :class:`fibserve.api.DefinitionSummary`)."""

    name: str
    """Definition name (what ``--definition`` takes)."""
    op_type: str
    """Operation family (gemm, rmsnorm, ...)."""
    workloads: int
    """Number of workloads of this definition in the loaded roots."""
    signature: str
    """``run(...)`` as the harness calls it (destination passing style): inputs, then the preallocated
    outputs; each argument with its dtype and axis names, or ``scalar`` for a Python number."""
    arguments: list[dict[str, Any]]
    """One entry per argument in call order: ``name``, ``role`` (input/output), ``dtype``, ``shape`` (axis
    names, or None for a scalar)."""
    baseline: str | None = None
    """The baseline Solution speed is measured against (the ``baseline:`` tag), or None: then against the
    reference."""
    baseline_description: str = ""
    """What the baseline runs (e.g. cuDNN SDPA) and its caveats."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (one element of what ``fibserve definitions --json`` prints)."""
        return asdict(self)


def describe_definition(
    definition: Definition, workloads: int = 0, baseline: Solution | None = None
) -> DefinitionDescription:
    """The :class:`DefinitionDescription` of ``definition`` (``workloads``: how many it has; ``baseline``: its
    baseline Solution as the trace set resolves it)."""
    arguments: list[dict[str, Any]] = []
    rendered: list[str] = []
    for role, specs in (("input", definition.inputs), ("output", definition.outputs)):
        for name, spec in specs.items():
            dtype = spec.dtype.value
            arguments.append({"name": name, "role": role, "dtype": dtype, "shape": spec.shape})
            kind = f"{dtype} scalar" if spec.shape is None else f"{dtype}[{', '.join(spec.shape)}]"
            rendered.append(f"{name}: {kind}" + (" (output)" if role == "output" else ""))
    return DefinitionDescription(
        name=definition.name,
        op_type=definition.op_type,
        workloads=workloads,
        signature=f"run({', '.join(rendered)})",
        arguments=arguments,
        baseline=baseline.name if baseline is not None else None,
        baseline_description=(baseline.description or "") if baseline is not None else "",
    )


def describe_definitions(
    roots: Sequence[str | Path], *, legacy: bool = False
) -> tuple[list[DefinitionDescription], list[LoadProblem]]:
    """Every definition in ``roots`` (loaded together, as ``validate_roots`` does), sorted by name, and the
    load errors (a root with errors still lists the definitions that loaded)."""
    report_roots: list[str] = []
    for root in roots:
        report_roots.extend(_split(root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacyMigrationWarning)  # `fibserve validate --legacy` reports them
        trace_set = TraceSet.load(report_roots, migrate_legacy=legacy, strict=False)
    summaries = [
        describe_definition(
            trace_set.definitions[name], len(trace_set.workloads_for(name)), trace_set.baseline_for(name)
        )
        for name in sorted(trace_set.definitions)
    ]
    errors = [p for p in map(_not_a_trace_set, map(Path, report_roots)) if p is not None]
    return summaries, errors + trace_set.errors


def _split(root: str | Path) -> list[str]:
    text = str(root)
    return [part for part in text.split(":") if part] if ":" in text else [text]
