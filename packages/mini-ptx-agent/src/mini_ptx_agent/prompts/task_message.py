"""The first user message of a run: the definition, its workloads, the target and the entry signature.

Only the standard library is imported, so ``import mini_ptx_agent.prompts`` stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from mini_ptx_agent.task import TaskLanguage

_SCALAR_CPP = {"bool": "bool"}


def _scalar_cpp_type(dtype: str) -> str:
    if dtype in _SCALAR_CPP:
        return _SCALAR_CPP[dtype]
    return "int64_t" if dtype.startswith("int") or dtype.startswith("uint") else "double"


def expected_signature(definition: Mapping[str, Any], language: str) -> str:
    """The ``run`` signature the ABI (the README's "Writing a kernel") asks for, spelled out for this definition.

    CUDA: ``void run(tvm::ffi::TensorView A, ..., double eps, tvm::ffi::TensorView C)``; scalar inputs
    (``shape: null``) become ``int64_t``/``double``/``bool``. Triton: ``def run(A, ..., C):``.

    Raises:
        ValueError: ``language`` is neither ``cuda``/``cpp`` nor ``triton``.
    """
    language = _normalise_language(language)
    params: list[str] = []
    for section in ("inputs", "outputs"):
        for name, spec in (definition.get(section) or {}).items():
            if language == "triton":
                params.append(name)
            elif spec.get("shape") is None and section == "inputs":
                params.append(f"{_scalar_cpp_type(str(spec.get('dtype', 'float32')))} {name}")
            else:
                params.append(f"tvm::ffi::TensorView {name}")
    if language == "triton":
        return f"def run({', '.join(params)}):"
    return f"void run({', '.join(params)})"


def _normalise_language(language: str) -> TaskLanguage:
    lowered = language.lower()
    if lowered in ("cuda", "cpp", "cu"):
        return "cuda"
    if lowered == "triton":
        return "triton"
    raise ValueError(f"unknown kernel language {language!r}; use 'cuda' (or 'cpp') or 'triton'")


def _workload_axes(workload: Any) -> Mapping[str, Any]:
    if isinstance(workload, Mapping):
        return workload.get("axes") or {}
    axes = getattr(workload, "axes", None)
    return axes if isinstance(axes, Mapping) else {}


def _summarise_workloads(workloads: Iterable[Any]) -> list[str]:
    lines = []
    for index, workload in enumerate(workloads):
        axes = _workload_axes(workload)
        values = ", ".join(f"{k}={v}" for k, v in axes.items()) or "(no variable axes)"
        lines.append(f"{index + 1}. {values}")
    return lines


def _compact_json(value: Any, depth: int = 0) -> str:
    """JSON with objects expanded two levels deep and everything below on one line (short, still valid JSON)."""
    if isinstance(value, Mapping) and value and depth < 2:
        pad = "  " * (depth + 1)
        items = [f"{pad}{json.dumps(str(k))}: {_compact_json(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    return json.dumps(value, ensure_ascii=False)


def first_user_message(
    definition_json: Mapping[str, Any],
    *,
    language: str,
    target_speedup: float,
    workloads: Iterable[Any] | None = None,
    closing: str | None = None,
) -> str:
    """The task message: the definition JSON (``tags`` removed), the workloads, the target, the signature.

    Args:
        definition_json: a FlashInfer Trace definition as a JSON object (``name``, ``axes``, ``inputs``,
            ``outputs``, ``reference``, ...). Not modified.
        language: ``cuda`` (``cpp`` accepted) or ``triton``.
        target_speedup: the minimum speedup (e.g. ``1.0``) every workload must reach against the definition's
            baseline Solution (its reference where it names none).
        workloads: optional workload objects or dicts with an ``axes`` mapping (``{"M": 8192}``), listed in order.
        closing: the last paragraph, what to deliver; default: a short plan and the whole file in one fenced
            block (the agent loop's reply format). A Harbor task says where to write the file instead.

    Raises:
        ValueError: unknown language or a non-positive target.
    """
    lang = _normalise_language(language)
    if not target_speedup > 0:
        raise ValueError(f"target_speedup must be > 0, got {target_speedup}")
    definition = {k: v for k, v in definition_json.items() if k != "tags"}
    fence = "cuda" if lang == "cuda" else "python"
    what = "a CUDA kernel (tvm-ffi binding)" if lang == "cuda" else "a Triton kernel"
    parts = [
        f"Write {what} for the FlashInfer Trace definition `{definition.get('name', '?')}`.",
        "",
        "Definition:",
        "```json",
        _compact_json(definition),
        "```",
        "",
    ]
    if workloads is not None:
        lines = _summarise_workloads(workloads)
        parts += [f"Workloads ({len(lines)}), values of the variable axes:", *lines, ""]
    parts += [
        f"Target: every workload passes and the minimum speedup against the definition's baseline (its reference "
        f"where it names none) is at least {target_speedup:g}x.",
        "",
        "Your entry point must be:",
        f"```{fence}",
        expected_signature(definition, lang),
        "```",
        "",
        closing or f"Reply with a short plan and the complete file in one ```{fence} block.",
    ]
    return "\n".join(parts) + "\n"
