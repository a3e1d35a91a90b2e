"""TraceSet: load one or more trace-set roots from disk and merge them in memory.

A root holds ``definitions/**/*.json``, ``solutions/**/*.json``, ``workloads/**/*.jsonl`` (workload traces),
``traces/**/*.jsonl`` (evaluated traces) and ``blob/**.safetensors``. Roots are merged in memory, never on
disk: an identical duplicate (same name or workload uuid, same content) is dropped; a conflict (same key,
different content) is an error naming both files, and the first one loaded is kept.

Every problem is collected with its file (and line for JSONL) so that one bad file or line loses nothing
else; ``strict=True`` (the default) raises :class:`TraceSetError` listing them all after loading.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from ._base import check_relative_path
from .definition import Definition
from .legacy import Migrator
from .problems import LoadProblem, TraceSetError, describe_validation_error
from .solution import Solution
from .trace import Trace
from .workload import SafetensorsInput, Workload

DATASET_ROOTS_ENV = "DATASET_ROOTS"
"""Environment variable holding a colon-separated list of trace-set roots."""

_TRACE_LIST = TypeAdapter(list[Trace])


def parse_roots(value: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Roots from a path, a list of paths, or a colon-separated string (``DATASET_ROOTS`` syntax)."""
    if isinstance(value, str):
        return [Path(part) for part in value.split(os.pathsep) if part.strip()]
    if isinstance(value, os.PathLike):
        return [Path(value)]
    return [Path(v) for v in value]


class TraceSet:
    """Definitions, solutions, workloads and traces of one or more roots, with lookups.

    Build one with :meth:`load` or :meth:`from_env`. Attributes are plain dicts/lists; treat them as
    read-only.
    """

    def __init__(self) -> None:
        self.roots: list[Path] = []
        self.definitions: dict[str, Definition] = {}
        """Definition name -> definition."""
        self.solutions: dict[str, Solution] = {}
        """Solution name -> solution."""
        self.workload_traces: dict[str, Trace] = {}
        """Workload uuid -> its workload trace (``solution`` and ``evaluation`` null)."""
        self.traces: list[Trace] = []
        """Evaluated traces, in load order."""
        self.problems: list[LoadProblem] = []
        """Everything that went wrong (errors and warnings)."""
        self._origin: dict[tuple[str, str], str] = {}
        self._workload_root: dict[str, Path] = {}
        self._by_definition: dict[str, list[str]] = defaultdict(list)
        self._trace_keys: set[str] = set()

    # ----------------------------------------------------------------------------------------- loading

    @classmethod
    def load(
        cls,
        roots: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        migrate_legacy: bool = False,
        strict: bool = True,
    ) -> TraceSet:
        """Load and merge trace-set roots.

        Args:
            roots: one root, a list of roots, or a colon-separated string of roots.
            migrate_legacy: read the 2025 public snapshot format through :mod:`fibserve.trace.legacy`
                (also treats ``traces/workloads/**/*.jsonl`` as workload files); warns once per kind of change.
            strict: raise :class:`TraceSetError` if any error was found (after loading everything).

        Raises:
            TraceSetError: ``strict`` and at least one error; ``.problems`` lists all of them.
        """
        ts = cls()
        ts.roots = parse_roots(roots)
        migrator = Migrator() if migrate_legacy else None
        layouts = []
        for root in ts.roots:
            if not root.is_dir():
                ts._problem(str(root), "trace-set root does not exist or is not a folder")
                continue
            layouts.append((root, _discover(root, legacy=migrate_legacy)))
        for _root, files in layouts:
            for path in files["definitions"]:
                ts._load_definition(path, migrator)
        for _root, files in layouts:
            for path in files["solutions"]:
                ts._load_solution(path, migrator)
        for root, files in layouts:
            for path in files["workloads"]:
                ts._load_jsonl(path, root, migrator, workload_file=True)
        for root, files in layouts:
            for path in files["traces"]:
                ts._load_jsonl(path, root, migrator, workload_file=False)
        if migrator is not None:
            migrator.warn(stacklevel=3)
        if strict and ts.errors:
            raise TraceSetError(ts.errors)
        return ts

    @classmethod
    def from_env(cls, *, migrate_legacy: bool = False, strict: bool = True) -> TraceSet:
        """Load the roots in ``$DATASET_ROOTS``, or the bundled default trace set when it is unset or empty."""
        value = os.environ.get(DATASET_ROOTS_ENV, "").strip()
        if not value:
            from fibserve.datasets import default_root

            value = str(default_root())
        return cls.load(value, migrate_legacy=migrate_legacy, strict=strict)

    def _problem(self, path: str, message: str, line: int | None = None, severity: str = "error") -> None:
        self.problems.append(LoadProblem(path=path, message=message, line=line, severity=severity))  # type: ignore[arg-type]

    def _read(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except OSError as exc:
            self._problem(str(path), f"cannot read file: {exc.strerror or exc}")
            return None

    def _load_definition(self, path: Path, migrator: Migrator | None) -> None:
        data = self._read(path)
        if data is None:
            return
        try:
            if migrator is None:
                definition = Definition.model_validate_json(data)
            else:
                definition = Definition.model_validate(migrator.definition(_json_object(data)))
        except (ValidationError, ValueError) as exc:
            self._problem(str(path), _describe(exc))
            return
        self._add("definition", definition.name, definition, self.definitions, path)

    def _load_solution(self, path: Path, migrator: Migrator | None) -> None:
        data = self._read(path)
        if data is None:
            return
        try:
            if migrator is None:
                solution = Solution.model_validate_json(data)
            else:
                solution = Solution.model_validate(migrator.solution(_json_object(data)))
        except (ValidationError, ValueError) as exc:
            self._problem(str(path), _describe(exc))
            return
        if solution.definition not in self.definitions:
            self._problem(
                str(path),
                f"solution for unknown definition {solution.definition!r} (kept)",
                severity="warning",
            )
        self._add("solution", solution.name, solution, self.solutions, path)

    def _add(
        self, kind: str, key: str, obj: object, store: dict, path: Path, line: int | None = None
    ) -> bool:
        """Insert ``obj`` under ``key``; drop identical duplicates, report conflicts naming both files."""
        if key in store:
            if store[key] != obj:
                first = self._origin[(kind, key)]
                self._problem(
                    str(path),
                    f"conflicting {kind} {key!r}: differs from the one in {first} (kept that one)",
                    line,
                )
            return False
        store[key] = obj
        self._origin[(kind, key)] = f"{path}:{line}" if line is not None else str(path)
        return True

    def _load_jsonl(self, path: Path, root: Path, migrator: Migrator | None, *, workload_file: bool) -> None:
        data = self._read(path)
        if data is None:
            return
        lines = [(n, text) for n, text in enumerate(data.splitlines(), start=1) if text.strip()]
        parsed = self._parse_lines(path, lines, migrator, workload_file)
        warned_missing: set[tuple[str, str]] = set()
        for lineno, trace in parsed:
            self._check_trace(path, lineno, trace, workload_file, warned_missing)
            if trace.is_workload_trace:
                problem = self._check_blobs(root, trace.workload)
                if problem:
                    self._problem(str(path), problem, lineno)
                    continue
                if self._add("workload", trace.workload.uuid, trace, self.workload_traces, path, lineno):
                    self._workload_root[trace.workload.uuid] = root
                    self._by_definition[trace.definition].append(trace.workload.uuid)
            else:
                key = trace.model_dump_json()
                if key not in self._trace_keys:
                    self._trace_keys.add(key)
                    self.traces.append(trace)

    def _parse_lines(
        self, path: Path, lines: list[tuple[int, bytes]], migrator: Migrator | None, workload_file: bool
    ) -> list[tuple[int, Trace]]:
        if migrator is None:
            # Fast path: validate the whole file as one JSON array (about 10x faster than line by line);
            # fall back to per-line validation only to locate the bad lines.
            try:
                traces = _TRACE_LIST.validate_json(b"[" + b",".join(text for _, text in lines) + b"]")
                return [(n, t) for (n, _), t in zip(lines, traces, strict=True)]
            except ValidationError:
                pass
        out = []
        for lineno, text in lines:
            try:
                if migrator is None:
                    trace = Trace.model_validate_json(text)
                else:
                    trace = Trace.model_validate(
                        migrator.trace(_json_object(text), workload_file=workload_file)
                    )
            except (ValidationError, ValueError) as exc:
                self._problem(str(path), _describe(exc), lineno)
                continue
            out.append((lineno, trace))
        return out

    def _check_trace(
        self, path: Path, lineno: int, trace: Trace, workload_file: bool, warned: set[tuple[str, str]]
    ) -> None:
        if workload_file and not trace.is_workload_trace:
            self._problem(str(path), "a workload file line must have solution and evaluation null", lineno)
        definition = self.definitions.get(trace.definition)
        if definition is None:
            if ("definition", trace.definition) not in warned:
                warned.add(("definition", trace.definition))
                self._problem(
                    str(path),
                    f"definition {trace.definition!r} is not in the trace set (kept)",
                    lineno,
                    "warning",
                )
        else:
            for problem in definition.check_workload(trace.workload):
                self._problem(str(path), problem, lineno)
        missing_solution = trace.solution is not None and trace.solution not in self.solutions
        if missing_solution and ("solution", trace.solution) not in warned:
            warned.add(("solution", trace.solution))
            self._problem(
                str(path), f"solution {trace.solution!r} is not in the trace set (kept)", lineno, "warning"
            )

    @staticmethod
    def _check_blobs(root: Path, workload: Workload) -> str | None:
        specs = list(workload.inputs.items()) + list((workload.outputs or {}).items())
        for name, spec in specs:
            if isinstance(spec, SafetensorsInput):
                try:
                    check_relative_path(spec.path)
                except ValueError as exc:
                    return f"workload {workload.uuid} input {name!r}: {exc}"
                if not (root / spec.path).is_file():
                    return f"workload {workload.uuid} input {name!r}: safetensors file {spec.path!r} not found under {root}"
        return None

    # ----------------------------------------------------------------------------------------- lookups

    @property
    def errors(self) -> list[LoadProblem]:
        """Problems with severity ``error``."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[LoadProblem]:
        """Problems with severity ``warning``."""
        return [p for p in self.problems if p.severity == "warning"]

    def definition(self, name: str) -> Definition:
        """The definition called ``name``. Raises KeyError naming the known definitions."""
        try:
            return self.definitions[name]
        except KeyError:
            raise KeyError(f"unknown definition {name!r}; known: {sorted(self.definitions)[:20]}") from None

    def workloads_for(self, definition: str) -> list[Workload]:
        """Workloads of ``definition`` in load order (empty if none)."""
        return [self.workload_traces[u].workload for u in self._by_definition.get(definition, [])]

    def workload(self, uuid: str) -> Workload:
        """The workload with ``uuid``. Raises KeyError."""
        return self.workload_trace(uuid).workload

    def workload_trace(self, uuid: str) -> Trace:
        """The workload trace (definition name + workload) with ``uuid``. Raises KeyError."""
        try:
            return self.workload_traces[uuid]
        except KeyError:
            raise KeyError(f"unknown workload uuid {uuid!r}") from None

    def workload_root(self, uuid: str) -> Path:
        """The root the workload was loaded from (its blob paths are relative to it)."""
        self.workload_trace(uuid)
        return self._workload_root[uuid]

    def blob_path(self, uuid: str, path: str) -> Path:
        """Absolute-or-relative filesystem path of a workload's safetensors ``path`` (resolved against its root)."""
        return self.workload_root(uuid) / check_relative_path(path)

    def solution(self, name: str) -> Solution:
        """The solution called ``name``. Raises KeyError."""
        try:
            return self.solutions[name]
        except KeyError:
            raise KeyError(f"unknown solution {name!r}") from None

    def solutions_for(self, definition: str) -> list[Solution]:
        """Solutions of ``definition``."""
        return [s for s in self.solutions.values() if s.definition == definition]

    def traces_for(self, definition: str | None = None, solution: str | None = None) -> list[Trace]:
        """Evaluated traces filtered by definition and/or solution name."""
        return [
            t
            for t in self.traces
            if (definition is None or t.definition == definition)
            and (solution is None or t.solution == solution)
        ]

    def origin(self, kind: str, key: str) -> str | None:
        """File (``path`` or ``path:line``) a definition/solution/workload was loaded from."""
        return self._origin.get((kind, key))

    def counts(self) -> dict[str, int]:
        """Number of definitions, solutions, workloads, traces, errors and warnings."""
        return {
            "definitions": len(self.definitions),
            "solutions": len(self.solutions),
            "workloads": len(self.workload_traces),
            "traces": len(self.traces),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
        }


def _discover(root: Path, *, legacy: bool) -> dict[str, list[Path]]:
    """The files of each kind under ``root``, sorted for a deterministic load order."""
    trace_files = sorted((root / "traces").rglob("*.jsonl"))
    workload_files = sorted((root / "workloads").rglob("*.jsonl"))
    if legacy:
        legacy_workloads = root / "traces" / "workloads"
        moved = [p for p in trace_files if legacy_workloads in p.parents]
        workload_files += moved
        trace_files = [p for p in trace_files if p not in set(moved)]
    return {
        "definitions": sorted((root / "definitions").rglob("*.json")),
        "solutions": sorted((root / "solutions").rglob("*.json")),
        "workloads": workload_files,
        "traces": trace_files,
    }


def _json_object(data: bytes | str) -> dict:
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _describe(exc: Exception) -> str:
    return describe_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
