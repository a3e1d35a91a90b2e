"""TraceSet: load one or more trace-set roots from disk and merge them in memory.

A root holds ``definitions/**/*.json``, ``solutions/**/*.json``, ``workloads/**/*.jsonl`` (workload traces),
``traces/**/*.jsonl`` (evaluated traces) and ``blob/**.safetensors``. Roots are merged in memory, never on
disk: an identical duplicate (same name or workload uuid, same content) is dropped; a conflict (same key,
different content) is an error naming both files, and the first one loaded is kept.

Every problem is collected with its file (and line for JSONL) so that one bad file or line loses nothing
else; ``strict=True`` (the default) raises :class:`TraceSetError` listing them all after loading.
"""

from __future__ import annotations

import gc
import json
import os
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._base import check_relative_path
from .definition import Definition
from .jsonl import parse_trace_lines
from .legacy import Migrator
from .problems import LoadProblem, TraceSetError, describe_validation_error
from .solution import Solution
from .trace import Trace
from .workload import Workload


def parse_roots(value: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Roots from a path, a list of paths, or a colon-separated string (``DATASET_ROOTS`` syntax)."""
    if isinstance(value, str):
        return [Path(part) for part in value.split(os.pathsep) if part.strip()]
    if isinstance(value, os.PathLike):
        return [Path(value)]
    return [Path(v) for v in value]


class WorkloadTraces(Mapping[str, Trace]):
    """Workload uuid -> workload trace; models are built on first access (loading validated them already)."""

    def __init__(self, raw: dict[str, dict[str, Any]]):
        self._raw = raw
        self._built: dict[str, Trace] = {}

    def prime(self, uuid: str, trace: Trace) -> None:
        """Remember a model that loading already built."""
        self._built[uuid] = trace

    def __getitem__(self, uuid: str) -> Trace:
        trace = self._built.get(uuid)
        if trace is None:
            trace = self._built[uuid] = Trace.model_validate(self._raw[uuid])
        return trace

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, uuid: object) -> bool:
        return uuid in self._raw


class TraceSet:
    """Definitions, solutions, workloads and traces of one or more roots, with lookups.

    Build one with :meth:`load` (or :func:`fibserve.datasets.load_trace_set`: ``$DATASET_ROOTS`` or the bundled set). Attributes are plain mappings and lists; treat them and
    the models in them as read-only.
    """

    def __init__(self) -> None:
        self.roots: list[Path] = []
        self.definitions: dict[str, Definition] = {}
        """Definition name -> definition."""
        self.solutions: dict[str, Solution] = {}
        """Solution name -> solution."""
        self._workload_raw: dict[str, dict[str, Any]] = {}
        self.workload_traces = WorkloadTraces(self._workload_raw)
        """Workload uuid -> its workload trace (``solution`` and ``evaluation`` null)."""
        self.traces: list[Trace] = []
        """Evaluated traces, in load order."""
        self.problems: list[LoadProblem] = []
        """Everything that went wrong (errors and warnings)."""
        self._origin: dict[tuple[str, str], tuple[Path, int | None]] = {}
        self._workload_root: dict[str, Path] = {}
        self._by_definition: dict[str, list[str]] = defaultdict(list)
        self._trace_keys: set[str] = set()
        self._fit_cache: dict[tuple, str] = {}

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
        # Loading allocates hundreds of thousands of small dicts and no cycles; pausing the cyclic garbage
        # collector meanwhile roughly halves the time for 100,000 workloads.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            ts = cls._load(parse_roots(roots), migrate_legacy)
        finally:
            if gc_was_enabled:
                gc.enable()
        if strict and ts.errors:
            raise TraceSetError(ts.errors)
        return ts

    @classmethod
    def _load(cls, roots: list[Path], migrate_legacy: bool) -> TraceSet:
        ts = cls()
        ts.roots = roots
        migrator = Migrator() if migrate_legacy else None
        layouts = []
        for root in ts.roots:
            if not root.is_dir():
                ts._problem(str(root), "trace-set root does not exist or is not a folder")
                continue
            layouts.append((root, _discover(root, legacy=migrate_legacy)))
        # Definitions and solutions of every root first, so workload and trace lines are checked against all.
        for _root, files in layouts:
            for path in files["definitions"]:
                ts._load_document(path, Definition, migrator)
        for _root, files in layouts:
            for path in files["solutions"]:
                ts._load_document(path, Solution, migrator)
        for root, files in layouts:
            for path in files["workloads"]:
                ts._load_jsonl(path, root, migrator, workload_file=True)
        for root, files in layouts:
            for path in files["traces"]:
                ts._load_jsonl(path, root, migrator, workload_file=False)
        ts._check_baselines()
        if migrator is not None:
            migrator.warn(stacklevel=4)
        return ts

    def _check_baselines(self) -> None:
        """A warning for each ``baseline:`` tag that names no Solution of that definition (its speedups are
        then against the reference, and say so)."""
        for definition in self.definitions.values():
            name = definition.baseline
            if name is None:
                continue
            solution = self.solutions.get(name)
            if solution is None or solution.definition != definition.name:
                where = self.origin("definition", definition.name) or definition.name
                what = "is not in the trace set" if solution is None else f"is for {solution.definition!r}"
                self._problem(
                    where,
                    f"baseline Solution {name!r} of {definition.name!r} {what}: speedups will be against the "
                    "reference",
                    severity="warning",
                )

    def _problem(self, path: str, message: str, line: int | None = None, severity: str = "error") -> None:
        self.problems.append(LoadProblem(path=path, message=message, line=line, severity=severity))  # type: ignore[arg-type]

    def _read(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except OSError as exc:
            self._problem(str(path), f"cannot read file: {exc.strerror or exc}")
            return None

    def _load_document(
        self, path: Path, model: type[Definition] | type[Solution], migrator: Migrator | None
    ) -> None:
        data = self._read(path)
        if data is None:
            return
        try:
            if migrator is None:
                doc = model.model_validate_json(data)
            else:
                migrate = migrator.definition if model is Definition else migrator.solution
                doc = model.model_validate(migrate(_json_object(data)))
        except (ValidationError, ValueError) as exc:
            self._problem(str(path), _describe(exc))
            return
        if isinstance(doc, Solution):
            if doc.definition not in self.definitions:
                message = f"solution for unknown definition {doc.definition!r} (kept)"
                self._problem(str(path), message, severity="warning")
            self._add("solution", doc.name, doc, self.solutions, path)
        else:
            self._add("definition", doc.name, doc, self.definitions, path)

    def _add(
        self, kind: str, key: str, obj: object, store: dict, path: Path, line: int | None = None
    ) -> bool:
        """Insert ``obj`` under ``key``; drop identical duplicates, report conflicts naming both files."""
        if key in store:
            if store[key] != obj:
                first = self.origin(kind, key)
                message = f"conflicting {kind} {key!r}: differs from the one in {first} (kept that one)"
                self._problem(str(path), message, line)
            return False
        store[key] = obj
        self._origin[(kind, key)] = (path, line)
        return True

    def _load_jsonl(self, path: Path, root: Path, migrator: Migrator | None, *, workload_file: bool) -> None:
        data = self._read(path)
        if data is None:
            return
        warned: set[tuple[str, str]] = set()
        template_ok = False
        workload_raw, origins, roots = self._workload_raw, self._origin, self._workload_root
        for line in parse_trace_lines(data, migrator, workload_file=workload_file):
            if line.error is not None:
                self._problem(str(path), line.error, line.lineno)
                continue
            raw = line.raw
            assert raw is not None
            if line.fast and template_ok:
                # Same definition, axis names and inputs as the accepted template line: only the uuid is new.
                uuid = raw["workload"]["uuid"]
                if uuid not in workload_raw:
                    workload_raw[uuid] = raw
                    origins[("workload", uuid)] = (path, line.lineno)
                    roots[uuid] = root
                    self._by_definition[raw["definition"]].append(uuid)
                    continue
                problem = None
            else:
                problem = self._check_line(raw, root, workload_file, warned, path, line.lineno)
            if line.model is not None and line.model.is_workload_trace:
                template_ok = problem is None and not self._values_matter(raw)
            if problem:
                self._problem(str(path), problem, line.lineno)
            elif raw.get("solution") is None and raw.get("evaluation") is None:
                uuid = raw["workload"]["uuid"]
                if self._add("workload", uuid, raw, self._workload_raw, path, line.lineno):
                    self._workload_root[uuid] = root
                    self._by_definition[raw["definition"]].append(uuid)
                    if line.model is not None:
                        self.workload_traces.prime(uuid, line.model)
            else:
                key = json.dumps(raw, sort_keys=True)
                if key not in self._trace_keys:
                    self._trace_keys.add(key)
                    self.traces.append(line.trace())

    def _check_line(
        self,
        raw: dict,
        root: Path,
        workload_file: bool,
        warned: set[tuple[str, str]],
        path: Path,
        lineno: int,
    ) -> str | None:
        """Cross-file checks of one valid trace line (its JSON object); returns an error, or None."""
        name, workload, solution = raw["definition"], raw["workload"], raw.get("solution")
        if workload_file and (solution is not None or raw.get("evaluation") is not None):
            return "a workload file line must have solution and evaluation null"
        definition = self.definitions.get(name)
        if definition is None:
            if ("definition", name) not in warned:
                warned.add(("definition", name))
                self._problem(
                    str(path), f"definition {name!r} is not in the trace set (kept)", lineno, "warning"
                )
        else:
            problem = self._fit_problem(definition, workload)
            if problem:
                return problem
        if solution is not None and solution not in self.solutions and ("solution", solution) not in warned:
            warned.add(("solution", solution))
            self._problem(
                str(path), f"solution {solution!r} is not in the trace set (kept)", lineno, "warning"
            )
        return _check_blobs(root, workload)

    def _fit_problem(self, definition: Definition, workload: dict) -> str | None:
        """Why a workload (JSON object) does not fit its definition, or None; cached on axis and input names."""
        key = (definition.name, tuple(workload["axes"]), tuple(workload["inputs"]))
        verdict = self._fit_cache.get(key)
        if verdict is None:
            const = definition.const_axes
            if any(axis in const for axis in workload["axes"]):
                verdict = "values"  # a const axis is given: its value must be checked on every line
            else:
                verdict = "bad" if definition.check_workload(Workload.model_validate(workload)) else "ok"
            self._fit_cache[key] = verdict
        if verdict == "ok":
            return None
        return "; ".join(definition.check_workload(Workload.model_validate(workload))) or None

    def _values_matter(self, raw: dict) -> bool:
        """Whether a valid workload line's axis values affect its checks (it gives a const axis)."""
        workload = raw["workload"]
        return (
            self._fit_cache.get((raw["definition"], tuple(workload["axes"]), tuple(workload["inputs"])))
            == "values"
        )

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
        """The definition called ``name``. Raises KeyError naming some known definitions."""
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
        if uuid not in self._workload_raw:
            raise KeyError(f"unknown workload uuid {uuid!r}")
        return self.workload_traces[uuid]

    def workload_root(self, uuid: str) -> Path:
        """The root the workload was loaded from (its safetensors paths are relative to it). Raises KeyError."""
        self.workload_trace(uuid)
        return self._workload_root[uuid]

    def blob_path(self, uuid: str, path: str) -> Path:
        """Filesystem path of a workload's safetensors ``path``, resolved against the workload's own root."""
        return self.workload_root(uuid) / check_relative_path(path)

    def solution(self, name: str) -> Solution:
        """The solution called ``name``. Raises KeyError."""
        try:
            return self.solutions[name]
        except KeyError:
            raise KeyError(f"unknown solution {name!r}") from None

    def baseline_for(self, definition: str) -> Solution | None:
        """The baseline Solution that definition ``definition`` names (tag ``baseline:<name>``), or None when
        it names none or the named Solution is missing or for another definition (a load warning says so).

        Raises:
            KeyError: unknown definition.
        """
        name = self.definition(definition).baseline
        solution = self.solutions.get(name) if name else None
        return solution if solution is not None and solution.definition == definition else None

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
        """File (``path`` or ``path:line``) a definition, solution or workload was loaded from."""
        found = self._origin.get((kind, key))
        if found is None:
            return None
        path, line = found
        return f"{path}:{line}" if line is not None else str(path)

    def counts(self) -> dict[str, int]:
        """Number of definitions, solutions, workloads, traces, errors and warnings."""
        return {
            "definitions": len(self.definitions),
            "solutions": len(self.solutions),
            "workloads": len(self._workload_raw),
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


def _check_blobs(root: Path, workload: dict) -> str | None:
    """Safetensors inputs/outputs of a workload (JSON object) must be safe relative paths existing under root."""
    specs = list(workload["inputs"].items()) + list((workload.get("outputs") or {}).items())
    for name, spec in specs:
        if spec.get("type") == "safetensors":
            try:
                check_relative_path(spec["path"])
            except ValueError as exc:
                return f"workload {workload['uuid']} tensor {name!r}: {exc}"
            if not (root / spec["path"]).is_file():
                return f"workload {workload['uuid']} tensor {name!r}: {spec['path']!r} not found under {root}"
    return None


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
