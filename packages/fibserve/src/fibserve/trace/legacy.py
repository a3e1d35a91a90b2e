"""Explicit migration of the 2025 public FlashInfer Trace snapshot to the current format.

The snapshot differs from the current format in these ways (each is a *kind* of change, and a load warns
once per kind with a count):

- ``op_type``: definitions say ``type`` instead of ``op_type``.
- ``dict_return``: references ``return {"C": C}``; the current format returns a tensor or a tuple in output
  order. The original source is kept and a small adapter ``run`` that converts the dict is appended.
- ``workload_file``: workload lines live under ``traces/workloads/`` with ``"solution": ""`` and
  ``"evaluation": {}``; they become workload traces (both null).
- ``workload_uuid``: trace lines carry workloads without ``uuid``. Such a workload gets the uuid of the
  workload with the same definition, axes and inputs when the trace set declares one, else a deterministic
  ``uuid5`` of that content (:func:`workload_uuid`).
- ``log_file``: evaluations name a log file instead of carrying the log; the name is kept in ``log``.
- ``device``: evaluation environments say ``device`` instead of ``hardware``.
- ``language_case``: solutions spell languages with capitals (``CUDA``, ``Triton``).
- ``build_commands``: solutions carry ``"build_commands": []`` in their spec (the public o3 Triton GEMM of
  ``gemm_n_4096_k_4096`` does); an empty list is dropped. A non-empty one is refused with a message: FIBServe
  builds every solution itself and never runs a solution's own commands.
- ``value_returning``: Python and Triton solutions have no ``destination_passing_style``: they allocate their
  outputs and return them (``run(A, B)`` returning ``{"C": C}``, like the public o3 Triton GEMM of
  ``gemm_n_4096_k_4096``), where the current default is destination passing. Such a solution is marked
  value-returning unless its entry function takes the inputs and the outputs, and when its definition is
  known, its entry function is wrapped like a dict-returning reference, so a dict of outputs comes back as the
  outputs in definition order.

The current models are never loosened: migration rewrites raw JSON objects, which are then validated by the
same strict models as any other file. These functions do no I/O.
"""

from __future__ import annotations

import ast
import json
import uuid
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .python_ast import parse_python

LEGACY_WORKLOAD_NAMESPACE = uuid.UUID("5d1f9c8e-2b7a-4f40-9c61-7e0c3a1b2d44")
"""Namespace of :func:`workload_uuid` (fixed forever: changing it would change every derived uuid)."""

CHANGE_DESCRIPTIONS = {
    "op_type": "definition field 'type' renamed to 'op_type'",
    "dict_return": "reference returning a dict wrapped to return outputs in order",
    "workload_file": "workload line under traces/workloads/ turned into a workload trace",
    "workload_uuid": "workload without uuid given a uuid",
    "log_file": "evaluation 'log_file' moved into 'log'",
    "device": "environment 'device' renamed to 'hardware'",
    "language_case": "solution language lower-cased",
    "build_commands": "empty spec.build_commands dropped (FIBServe builds solutions itself)",
    "value_returning": "solution without destination_passing_style taken as value-returning (it allocates and "
    "returns its outputs; a returned dict is read by output name)",
}
"""Kind of change -> what it does, as printed in the warning."""


class LegacyMigrationWarning(UserWarning):
    """Emitted once per kind of change when legacy files are migrated."""


def workload_uuid(definition: str, workload: dict[str, Any]) -> str:
    """Deterministic uuid5 of a workload's content (definition name, axes, inputs), for workloads lacking one."""
    key = json.dumps(
        {"definition": definition, "axes": workload.get("axes", {}), "inputs": workload.get("inputs", {})},
        sort_keys=True,
        separators=(",", ":"),
    )
    return str(uuid.uuid5(LEGACY_WORKLOAD_NAMESPACE, key))


def signature_of(definition: Any) -> tuple[int, list[str]]:
    """A :class:`fibserve.trace.Definition`'s (number of inputs, output names), what
    :meth:`Migrator.solution` takes as ``signature``."""
    return len(definition.inputs), list(definition.outputs)


def as_legacy(solution: Any, definition: Any) -> Any:
    """``solution`` (a :class:`fibserve.trace.Solution` already validated, e.g. from an HTTP request) read as
    a 2025 solution of ``definition``: when it did not set ``destination_passing_style`` itself, it goes through
    :meth:`Migrator.solution` (value-returning, a returned dict read by output name); otherwise it is returned
    unchanged."""
    if "destination_passing_style" in solution.spec.model_fields_set:
        return solution
    migrator = Migrator()
    raw = solution.model_dump(mode="json", exclude_unset=True)
    return type(solution).model_validate(migrator.solution(raw, signature=signature_of(definition)))


def _content_key(definition: str, workload: dict[str, Any]) -> str:
    return json.dumps([definition, workload.get("axes", {}), workload.get("inputs", {})], sort_keys=True)


def _run_returns_dict(reference: str) -> bool:
    try:
        tree = parse_python(reference)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "run":
            return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Dict) for n in ast.walk(node))
    return False


def _dict_return_adapter(output_names: list[str], symbol: str = "run") -> str:
    """Python appended to a source whose ``symbol`` may return a dict of outputs: ``symbol`` is rebound to a
    wrapper that returns them as a tensor (one output) or a tuple in ``output_names`` order, and says which
    outputs a dict lacks."""
    names = ", ".join(repr(n) for n in output_names)
    original = f"_legacy_{symbol}"
    return (
        "\n\n\n# Added by fibserve legacy migration: the 2025 format returned a dict of outputs;\n"
        "# the current format returns a tensor or a tuple in output order.\n"
        f"{original} = {symbol}\n\n\n"
        f"def {symbol}(*args, **kwargs):\n"
        f"    result = {original}(*args, **kwargs)\n"
        "    if isinstance(result, dict):\n"
        f"        missing = [name for name in ({names},) if name not in result]\n"
        "        if missing:\n"
        f"            raise KeyError(f'{symbol} returned a dict without the outputs {{missing}}')\n"
        f"        ordered = tuple(result[name] for name in ({names},))\n"
        "        return ordered[0] if len(ordered) == 1 else ordered\n"
        "    return result\n"
    )


def _positional_params(source: str, symbol: str) -> int | None:
    """How many positional parameters the top-level function ``symbol`` of ``source`` takes (None: not found,
    not parseable, or ``*args``)."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == symbol:
            if node.args.vararg is not None:
                return None
            return len(node.args.posonlyargs) + len(node.args.args)
    return None


@dataclass
class Migrator:
    """Stateful migration over one load: counts changes and remembers workload uuids by content.

    Feed workload files before trace files so that traces reuse the uuids their workloads declare.
    """

    changes: Counter[str] = field(default_factory=Counter)
    _uuid_by_content: dict[str, str] = field(default_factory=dict)
    _signatures: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    """Definition name -> (number of inputs, output names), from the definitions migrated so far."""

    def definition(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Migrate one definition object (returns a new dict; ``raw`` is not modified)."""
        out = dict(raw)
        if "type" in out and "op_type" not in out:
            out["op_type"] = out.pop("type")
            self.changes["op_type"] += 1
        reference = out.get("reference")
        if (
            isinstance(reference, str)
            and isinstance(out.get("outputs"), dict)
            and _run_returns_dict(reference)
        ):
            out["reference"] = reference.rstrip("\n") + _dict_return_adapter(list(out["outputs"]))
            self.changes["dict_return"] += 1
        name, inputs, outputs = out.get("name"), out.get("inputs"), out.get("outputs")
        if isinstance(name, str) and isinstance(inputs, dict) and isinstance(outputs, dict):
            self._signatures[name] = (len(inputs), list(outputs))
        return out

    def solution(
        self, raw: dict[str, Any], *, signature: tuple[int, list[str]] | None = None
    ) -> dict[str, Any]:
        """Migrate one solution object.

        Raises:
            ValueError: the solution asks for its own build commands (see the module docstring).

        Args:
            raw: the solution's JSON object (not modified).
            signature: its definition's (number of inputs, output names); by default that of the definition
                of the same name migrated earlier by this migrator (a trace set's definitions load first).
        """
        out = dict(raw)
        spec = out.get("spec")
        if isinstance(spec, dict) and "build_commands" in spec:
            if spec["build_commands"]:
                raise ValueError(
                    f"solution {out.get('name')!r}: spec.build_commands {spec['build_commands']!r} cannot be honoured: "
                    "FIBServe builds every solution itself (nvcc with the tvm-ffi binding, or a Python package) and "
                    "never runs a solution's own commands; remove them"
                )
            spec = {k: v for k, v in spec.items() if k != "build_commands"}
            out["spec"] = spec
            self.changes["build_commands"] += 1
        if isinstance(spec, dict) and isinstance(spec.get("language"), str):
            language = spec["language"]
            if language != language.lower():
                spec = {**spec, "language": language.lower()}
                out["spec"] = spec
                self.changes["language_case"] += 1
        if (
            isinstance(spec, dict)
            and "destination_passing_style" not in spec
            and spec.get("language") in ("python", "triton")
        ):
            self._value_returning(out, spec, signature or self._signatures.get(str(out.get("definition"))))
        return out

    def _value_returning(
        self, out: dict[str, Any], spec: dict[str, Any], signature: tuple[int, list[str]] | None
    ) -> None:
        file, _, symbol = str(spec.get("entry_point", "")).partition("::")
        sources = out.get("sources") if isinstance(out.get("sources"), list) else []
        entry = next((s for s in sources if isinstance(s, dict) and s.get("path") == file), None)
        content = entry.get("content") if entry is not None else None
        if signature is not None and isinstance(content, str):
            inputs, outputs = signature
            if _positional_params(content, symbol) == inputs + len(outputs):
                return  # it takes its outputs: destination passing, the current default, holds
        out["spec"] = {**spec, "destination_passing_style": False}
        if signature is not None and isinstance(content, str) and symbol.isidentifier():
            wrapped = {**entry, "content": content.rstrip("\n") + _dict_return_adapter(signature[1], symbol)}
            out["sources"] = [wrapped if s is entry else s for s in sources]
        self.changes["value_returning"] += 1

    def trace(self, raw: dict[str, Any], *, workload_file: bool) -> dict[str, Any]:
        """Migrate one trace line; ``workload_file`` is true for lines of a workload file."""
        out = dict(raw)
        if workload_file and out.get("solution") in ("", None) and out.get("evaluation") in ({}, None):
            if out.get("solution") == "" or out.get("evaluation") == {}:
                self.changes["workload_file"] += 1
            out["solution"] = None
            out["evaluation"] = None
        workload = out.get("workload")
        definition = out.get("definition")
        if isinstance(workload, dict) and isinstance(definition, str):
            key = _content_key(definition, workload)
            if workload.get("uuid"):
                self._uuid_by_content.setdefault(key, workload["uuid"])
            else:
                known = self._uuid_by_content.get(key) or workload_uuid(definition, workload)
                out["workload"] = {"uuid": known, **workload}
                self.changes["workload_uuid"] += 1
        evaluation = out.get("evaluation")
        if isinstance(evaluation, dict) and evaluation:
            out["evaluation"] = self._evaluation(evaluation)
        return out

    def _evaluation(self, raw: dict[str, Any]) -> dict[str, Any]:
        out = dict(raw)
        if "log_file" in out:
            log_file = out.pop("log_file")
            if not out.get("log"):
                out["log"] = f"legacy log_file: {log_file}" if log_file else ""
            self.changes["log_file"] += 1
        env = out.get("environment")
        if isinstance(env, dict) and "device" in env and "hardware" not in env:
            env = dict(env)
            env["hardware"] = env.pop("device")
            out["environment"] = env
            self.changes["device"] += 1
        return out

    def warn(self, stacklevel: int = 3) -> None:
        """Emit one :class:`LegacyMigrationWarning` per kind of change seen, with its count."""
        for kind in sorted(self.changes):
            warnings.warn(
                f"legacy migration: {CHANGE_DESCRIPTIONS[kind]} ({self.changes[kind]}x)",
                LegacyMigrationWarning,
                stacklevel=stacklevel,
            )
