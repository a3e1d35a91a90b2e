"""Reference runs in the trusted process, a memory-bounded cache of their outputs, and the reference's
timing twin.

The definition's ``reference`` is Python source defining ``run(*inputs)``; it returns one tensor, a tuple (or
list) in output order, or (legacy FlashInfer Trace) a dict keyed by output name. Reference outputs used for
correctness are computed here and never leave the trusted process.

For *timing*, the reference runs in a worker process built exactly like the candidate's
(:func:`reference_solution`), so both sides of every timed pair go through the same process kind, messages
and buffers. Timed in this process instead, the same cuBLAS GEMM measured 1.006 to 1.020 times slower than in
a worker, while worker against worker gave 0.9996 to 1.0004 (benchmarks/timing_symmetry.py on the H200,
docs/gpu-results.md).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import torch

from fibserve.trace import Definition, Solution


class ReferenceError(RuntimeError):
    """The definition's reference failed or returned the wrong outputs (a task-level problem)."""


_COMPILED: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()


def reference_key(definition: Definition) -> str:
    """A short hash of the definition's name and reference source (cache keys change when it changes)."""
    return hashlib.sha256(f"{definition.name}\x00{definition.reference}".encode()).hexdigest()[:16]


def reference_namespace(definition: Definition) -> dict[str, Any]:
    """The module namespace of the reference source, executed once per (name, source); treat it as read-only.

    Raises:
        ReferenceError: the source fails to execute.
    """
    key = reference_key(definition)
    with _LOCK:
        if key not in _COMPILED:
            namespace: dict[str, Any] = {"__name__": f"fibserve_reference_{key}"}
            try:
                exec(compile(definition.reference, f"<reference {definition.name}>", "exec"), namespace)
            except Exception as exc:
                raise ReferenceError(f"reference of {definition.name!r} failed to load: {exc!r}") from exc
            _COMPILED[key] = namespace
        return _COMPILED[key]


def load_reference(definition: Definition) -> Callable[..., Any]:
    """The reference's ``run`` function.

    Raises:
        ReferenceError: the source fails to execute or defines no callable ``run``.
    """
    run = reference_namespace(definition).get("run")
    if not callable(run):
        raise ReferenceError(f"reference of {definition.name!r} defines no callable run")
    return run


def normalize_outputs(definition: Definition, result: Any) -> dict[str, torch.Tensor]:
    """Map a reference's return value onto the definition's output names.

    Raises:
        ReferenceError: wrong number of outputs, non-tensor outputs, or missing names in a dict.
    """
    names = definition.output_names
    if isinstance(result, torch.Tensor):
        values = [result]
    elif isinstance(result, (tuple, list)):
        values = list(result)
    elif isinstance(result, Mapping):
        missing = [n for n in names if n not in result]
        if missing:
            raise ReferenceError(f"reference of {definition.name!r} returned no {missing}")
        values = [result[n] for n in names]
    else:
        raise ReferenceError(
            f"reference of {definition.name!r} returned {type(result).__name__}, not tensors"
        )
    if len(values) != len(names):
        raise ReferenceError(
            f"reference of {definition.name!r} returned {len(values)} outputs, definition has {len(names)}"
        )
    if not all(isinstance(v, torch.Tensor) for v in values):
        raise ReferenceError(f"reference of {definition.name!r} returned a non-tensor output")
    return dict(zip(names, values, strict=True))


def call_reference(definition: Definition, inputs: Mapping[str, Any]) -> Any:
    """Call the reference ``run`` on inputs in definition order (no normalisation, for timing)."""
    run = load_reference(definition)
    with torch.no_grad():
        return run(*[inputs[n] for n in definition.input_names])


def run_reference(
    definition: Definition, inputs: Mapping[str, Any], expected_shapes: Mapping[str, tuple[int, ...]]
) -> dict[str, torch.Tensor]:
    """Run the reference and check its output shapes against the definition.

    Raises:
        ReferenceError: the reference raised, or returned outputs of the wrong count or shape.
    """
    try:
        result = call_reference(definition, inputs)
    except ReferenceError:
        raise
    except Exception as exc:
        raise ReferenceError(f"reference of {definition.name!r} raised {exc!r}") from exc
    outputs = normalize_outputs(definition, result)
    for name, tensor in outputs.items():
        want = expected_shapes[name]
        if tuple(tensor.shape) != tuple(want):
            raise ReferenceError(
                f"reference of {definition.name!r} output {name!r} has shape {tuple(tensor.shape)}, "
                f"the definition says {tuple(want)}"
            )
    return {name: tensor.detach() for name, tensor in outputs.items()}


_TWIN_ENTRY = """from collections.abc import Mapping

import torch

from .definition_reference import run as _run

OUTPUTS = {outputs!r}


def run(*inputs):
    with torch.no_grad():
        result = _run(*inputs)
    if isinstance(result, Mapping):  # legacy FlashInfer Trace references return a dict keyed by output name
        return tuple(result[name] for name in OUTPUTS)
    return result
"""


def reference_solution(definition: Definition) -> Solution:
    """The definition's reference as a value-returning Python Solution (``reference.py::run``) for the
    reference's timing worker. Its ``run`` takes the inputs in definition order and returns the outputs in
    definition order (a legacy dict return is reordered by a thin wrapper), under ``torch.no_grad()`` like
    :func:`call_reference`."""
    return Solution.model_validate(
        {
            "name": f"{definition.name}__reference",
            "definition": definition.name,
            "author": "fibserve",
            "description": "the definition's reference, timed in a worker twin of the candidate's",
            "spec": {
                "language": "python",
                "target_hardware": ["any"],
                "entry_point": "reference.py::run",
                "destination_passing_style": False,
            },
            "sources": [
                {"path": "definition_reference.py", "content": definition.reference},
                {"path": "reference.py", "content": _TWIN_ENTRY.format(outputs=definition.output_names)},
            ],
        }
    )


class ReferenceCache:
    """LRU cache of reference outputs keyed by (reference key, workload uuid, input set, device), bounded
    by ``budget_bytes`` of tensor storage. An entry larger than the budget is not cached."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[tuple[str, ...], dict[str, torch.Tensor]] = OrderedDict()
        self._sizes: dict[tuple[str, ...], int] = {}
        self._call_ms: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    @property
    def used_bytes(self) -> int:
        """Bytes held now."""
        return sum(self._sizes.values())

    def get(self, key: tuple[str, ...]) -> dict[str, torch.Tensor] | None:
        """The cached outputs for ``key`` (marking them recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def call_ms(self, key: tuple[str, ...]) -> float | None:
        """How long the reference call that made ``key``'s outputs took (ms), when it was noted."""
        return self._call_ms.get(key)

    def put(
        self, key: tuple[str, ...], outputs: dict[str, torch.Tensor], call_ms: float | None = None
    ) -> None:
        """Store ``outputs`` (and the time of the call that made them), evicting least recently used entries
        to stay within the budget. The time is kept even when the outputs are too large to cache."""
        if call_ms is not None:
            with self._lock:
                self._call_ms[key] = call_ms
        size = sum(t.numel() * t.element_size() for t in outputs.values())
        if size > self.budget_bytes:
            return
        with self._lock:
            if key in self._entries:
                self._entries.pop(key)
                self._sizes.pop(key)
            while self._entries and self.used_bytes + size > self.budget_bytes:
                old, _ = self._entries.popitem(last=False)
                self._sizes.pop(old)
            self._entries[key] = outputs
            self._sizes[key] = size

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._sizes.clear()
            self._call_ms.clear()
