"""JSON Schema of the FlashInfer Trace documents, as printed by ``fibserve schema``."""

from __future__ import annotations

from typing import Any, Literal

from .definition import Definition
from .solution import Solution
from .trace import Trace
from .workload import Workload

SchemaKind = Literal["definition", "workload", "solution", "trace"]

_MODELS = {"definition": Definition, "workload": Workload, "solution": Solution, "trace": Trace}


def json_schema(kind: SchemaKind) -> dict[str, Any]:
    """JSON Schema (draft 2020-12, as pydantic emits it) for one document kind, in validation mode.

    Raises:
        KeyError: ``kind`` is not one of definition, workload, solution, trace.
    """
    if kind not in _MODELS:
        raise KeyError(f"unknown kind {kind!r}; choose one of {sorted(_MODELS)}")
    return _MODELS[kind].model_json_schema(mode="validation")


def all_json_schemas() -> dict[str, dict[str, Any]]:
    """The schema of every document kind, keyed by kind."""
    return {kind: json_schema(kind) for kind in _MODELS}  # type: ignore[arg-type]
