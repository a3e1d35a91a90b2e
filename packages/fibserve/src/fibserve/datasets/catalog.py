"""Catalog: the definitions and workloads a server offers, looked up with errors a person can act on.

A thin layer over :class:`fibserve.trace.TraceSet` that turns a missing name into a :class:`NotFound`
carrying close matches (``gemm_n4096_k4069`` -> did you mean ``gemm_n4096_k4096``?).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from fibserve.trace import Definition, Solution, Workload
from fibserve.trace.trace_set import TraceSet

from . import load_trace_set


class NotFound(LookupError):
    """A definition or workload that the server does not have."""

    def __init__(
        self, code: str, message: str, close_matches: list[str] | None = None, hint: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.close_matches = close_matches or []
        self.hint = hint
        """What to do about it (the close matches, or where to look), without the subject."""


class WorkloadMismatch(ValueError):
    """A requested workload belongs to another definition."""


class Catalog:
    """Read-only view of the merged trace sets the server was started with."""

    def __init__(self, trace_set: TraceSet) -> None:
        self.trace_set = trace_set

    @classmethod
    def load(cls, roots: Sequence[Path] | None) -> Catalog:
        """Load ``roots`` (``$DATASET_ROOTS`` or the bundled trace set when empty), migrating legacy files.

        Raises:
            fibserve.trace.problems.TraceSetError: a root has errors (the message lists each file and line).
        """
        if roots:
            return cls(TraceSet.load(list(roots), migrate_legacy=True))
        return cls(load_trace_set(migrate_legacy=True))

    @property
    def roots(self) -> list[Path]:
        """The trace-set roots, in merge order."""
        return list(self.trace_set.roots)

    def definitions(self) -> list[Definition]:
        """Every definition, sorted by name."""
        return [self.trace_set.definitions[name] for name in sorted(self.trace_set.definitions)]

    def definition(self, name: str) -> Definition:
        """The definition ``name``.

        Raises:
            NotFound: unknown name; the message names up to five close matches.
        """
        definition = self.trace_set.definitions.get(name)
        if definition is None:
            matches = difflib.get_close_matches(name, list(self.trace_set.definitions), n=5, cutoff=0.6)
            hint = f"did you mean {', '.join(matches)}?" if matches else "GET /definitions lists them"
            raise NotFound(
                "unknown_definition", f"definition {name!r} is not on this server; {hint}", matches, hint
            )
        return definition

    def baseline(self, name: str) -> Solution | None:
        """The baseline Solution of definition ``name`` (None when it names none). Raises NotFound."""
        self.definition(name)
        return self.trace_set.baseline_for(name)

    def workloads(self, name: str) -> list[Workload]:
        """Workloads of definition ``name`` in load order. Raises NotFound for an unknown definition."""
        self.definition(name)
        return self.trace_set.workloads_for(name)

    def workload(self, uuid: str) -> tuple[str, Workload]:
        """(definition name, workload) of ``uuid``. Raises NotFound."""
        trace = self.trace_set.workload_traces.get(uuid)
        if trace is None:
            matches = difflib.get_close_matches(uuid, list(self.trace_set.workload_traces), n=3, cutoff=0.8)
            hint = f"; did you mean {', '.join(matches)}?" if matches else ""
            raise NotFound("unknown_workload", f"workload {uuid!r} is not on this server{hint}", matches)
        return trace.definition, trace.workload

    def select(self, definition: str, uuids: list[str] | None) -> list[Workload]:
        """The workloads a task runs: ``uuids`` in the given order (duplicates dropped), or all of them.

        Raises:
            NotFound: unknown definition or workload uuid.
            WorkloadMismatch: a uuid belongs to another definition, or the definition has no workloads.
        """
        if uuids is None:
            workloads = self.workloads(definition)
            if not workloads:
                raise WorkloadMismatch(
                    f"definition {definition!r} has no workloads on this server; add a workloads/*.jsonl file "
                    "to a trace-set root"
                )
            return workloads
        self.definition(definition)
        out: list[Workload] = []
        seen: set[str] = set()
        for uuid in uuids:
            if uuid in seen:
                continue
            seen.add(uuid)
            owner, workload = self.workload(uuid)
            if owner != definition:
                raise WorkloadMismatch(
                    f"workload {uuid!r} belongs to definition {owner!r}, not {definition!r}"
                )
            out.append(workload)
        if not out:
            raise WorkloadMismatch("workload_uuids is empty; omit it to run every workload of the definition")
        return out

    def blob_root(self, uuid: str) -> Path:
        """The trace-set root of workload ``uuid`` (its safetensors paths are relative to it)."""
        return self.trace_set.workload_root(uuid)
