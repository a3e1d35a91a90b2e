"""Which PyTorch operators a Triton candidate's own code runs (worker side; torch only).

The source policy forbids PyTorch compute in Triton solutions by name, but operators and tensor methods are
not names: ``z[:] = x + y`` or a GEMM written as a method call checks clean and would be timed as "a Triton
kernel". So the worker runs a Triton candidate's correctness calls under a ``TorchDispatchMode`` that sees
every ATen operator that executes, and attributes each one to the code that called it: the first frame
outside torch's own package is either Triton's (its launcher, or the CPU interpreter, which moves tensors
with torch) or the candidate's. The candidate's operators are reported unless they are

- allocation: the ``empty`` family, and the ``zeros`` family with its constant fills (``zero_``, ``fill_``),
  which compute nothing from the inputs (the static policy allows ``torch.zeros`` for accumulators);
- views and metadata: any operator whose schema says its output aliases its input (``view``, ``permute``,
  ``transpose``, ``as_strided``, ``slice``, ``detach`` ...; ``OpOverload.is_view``), and reading a scalar
  (``item()``).

Everything else (arithmetic, reductions, matmuls, copies, casts, random numbers) is PyTorch compute. The mode
can only be switched off or fooled through torch's private modules or the interpreter's frames, which the
static policy refuses in Triton sources (:mod:`fibserve.build.python_policy`).

Source: ``torch.utils._python_dispatch.TorchDispatchMode`` (the dispatcher calls ``__torch_dispatch__`` for
every operator that reaches the Python key while the mode is active).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ALLOCATION = {
    *("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"),
    *("zeros", "zeros_like", "new_zeros", "zero_", "fill_"),
}
"""ATen operator names (overload packets) that allocate or fill with a constant."""

METADATA = {"_local_scalar_dense", "lift_fresh", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset"}
"""ATen operators that read a scalar or a tensor's metadata."""

MAX_OPS = 20
"""Distinct operator names kept (the first ones, in order of first use)."""

_TORCH_DIR = str(Path(torch.__file__).parent) + "/"


def _triton_dir() -> str | None:
    module = sys.modules.get("triton")
    return str(Path(module.__file__).parent) + "/" if module is not None and module.__file__ else None


class TorchAudit(TorchDispatchMode):
    """Records the ATen operators (by name) that code outside torch and Triton runs while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self._triton = _triton_dir()

    def _from_candidate(self) -> bool:
        frame = sys._getframe(2)  # the caller of __torch_dispatch__'s caller
        while frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR):
            frame = frame.f_back
        if frame is None:
            return False
        return not (self._triton and frame.f_code.co_filename.startswith(self._triton))

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        allowed = name in ALLOCATION or name in METADATA or func.is_view
        if not allowed and len(self.ops) < MAX_OPS and name not in self.ops and self._from_candidate():
            self.ops.append(name)
        return func(*args, **(kwargs or {}))
