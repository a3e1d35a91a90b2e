"""fibserve.bench: honest correctness and timing of candidate kernels (trusted harness + sandbox worker).

Public API: :class:`EvalConfig`, :func:`resolve_config`, :class:`Evaluator`, :func:`evaluate`,
:class:`EvaluationReport`. Attributes are imported lazily so the sandbox worker, which imports
``fibserve.bench.worker.entry``, loads nothing beyond torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EvalConfig": "config",
    "Timeouts": "config",
    "resolve_config": "config",
    "Evaluator": "evaluator",
    "evaluate": "evaluator",
    "EvaluationReport": "report",
    "DeviceInfo": "report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fibserve.bench' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fibserve.bench.{module}"), name)
