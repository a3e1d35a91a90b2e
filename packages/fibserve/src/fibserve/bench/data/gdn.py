"""Inputs of gated delta net (GDN) definitions (trusted side): gates in their ranges, unit keys, a state.

The GDN recurrence (FlashInfer-Bench op type ``gdn``; per value head, k-last state ``S`` [V, K])::

    g    = exp(-exp(A_log) * softplus(a + dt_bias))      # decay, in (0, 1)
    beta = sigmoid(b)                                     # update gate, in (0, 1)
    S    = g * S + beta * (v - g * S k) k^T               # delta rule
    o    = scale * S q

Random normals break it: ``I - beta k k^T`` is a contraction only for ``|k| <= sqrt(2 / beta)``, and a
normal key of dimension 128 has norm about 11, so a prefill of thousands of tokens would overflow. Models
L2-normalise q and k before the kernel (Qwen3-Next's ``use_qk_l2norm``), and the public references take the
normalised tensors, so that is what the generator gives:

* ``q``, ``k``: bf16 normals scaled to unit L2 norm over ``head_size`` (per token and head);
* ``v``: bf16 standard normals;
* ``state`` / ``initial_state``: fp32 normals times :data:`STATE_STD`, the size of a state mid-sequence
  (from a zero state, 2000 tokens of these inputs left entries of standard deviation 0.13 averaged over the
  heads, 0.002 to 0.30 per head: ``qk4_v8`` on CPU);
* ``A_log`` [HV] fp32 uniform in [-2, 0.4] and ``dt_bias`` [HV] fp32 uniform in [-6.5, 2.5]; ``a`` and ``b``
  bf16 normals with means 0.8 and 0.45 and standard deviations 2.2 and 2.0: the ranges of Qwen3-Next's
  parameters and projections (public FlashInfer-Trace captures). Then ``g`` covers (0, 1) with most of its
  mass near 1 (slow forgetting, some heads fast) and ``beta`` spreads over (0, 1);
* ``initial_state_indices`` [B] int32 (MTP): distinct slots of the state pool, in random order.

Every value is drawn per input set from the evaluation's secret; ``cu_seqlens`` comes from
:mod:`fibserve.bench.data.paged` (the workload's sequence lengths).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fibserve.trace import Definition

from fibserve.bench.dtypes import TORCH_DTYPES

STATE_STD = 0.1
"""Spread of a generated recurrent state's entries (fp32)."""

UNIFORM = {"A_log": (-2.0, 0.4), "dt_bias": (-6.5, 2.5)}
"""Per-head parameters: name -> (low, high) of a uniform draw."""
NORMAL = {"a": (0.8, 2.2), "b": (0.45, 2.0), "v": (0.0, 1.0)}
"""Per-token inputs: name -> (mean, standard deviation)."""
UNIT = ("q", "k")
"""Inputs normalised to unit L2 norm over their last dimension."""
STATES = ("state", "initial_state")
"""Names of the recurrent state input."""
SLOTS = "initial_state_indices"
"""The pool slot of each batch row (MTP)."""


class GdnInputError(ValueError):
    """A GDN input cannot be made (a task-level problem: fix the workload's axes)."""


def is_gdn(definition: Definition) -> bool:
    """Whether the definition is a gated delta net (op type ``gdn``, or the gate inputs ``A_log`` and
    ``dt_bias``)."""
    return definition.op_type.lower() == "gdn" or {"A_log", "dt_bias"} <= set(definition.inputs)


def gdn_inputs(
    definition: Definition,
    shape_of: Callable[[str], tuple[int, ...] | None],
    wanted: set[str],
    generator_for: Callable[[str], torch.Generator],
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """The GDN inputs among ``wanted`` (names the workload draws at random) that this module makes, in the
    definition's dtypes; empty for other definitions.

    Args:
        definition: the definition.
        shape_of: an input name -> its concrete shape.
        wanted: input names to produce.
        generator_for: an input name -> the generator of this input set.
        device: where the tensors are made.

    Raises:
        GdnInputError: more batch rows than state-pool slots.
    """
    if not is_gdn(definition):
        return {}
    out: dict[str, torch.Tensor] = {}
    for name, spec in definition.inputs.items():
        shape = shape_of(name)
        if name not in wanted or shape is None:
            continue
        gen = generator_for(name)
        dtype = TORCH_DTYPES[spec.dtype.value]
        if name in UNIT:
            x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
            out[name] = torch.nn.functional.normalize(x, dim=-1).to(dtype)
        elif name in NORMAL:
            mean, std = NORMAL[name]
            out[name] = (torch.randn(shape, generator=gen, device=device) * std + mean).to(dtype)
        elif name in UNIFORM:
            low, high = UNIFORM[name]
            out[name] = (torch.rand(shape, generator=gen, device=device) * (high - low) + low).to(dtype)
        elif name in STATES:
            out[name] = (torch.randn(shape, generator=gen, device=device) * STATE_STD).to(dtype)
        elif name == SLOTS:
            out[name] = _slots(definition, shape_of, shape[0], gen, device).to(dtype)
    return out


def _slots(
    definition: Definition,
    shape_of: Callable[[str], tuple[int, ...] | None],
    rows: int,
    gen: torch.Generator,
    device: torch.device,
) -> torch.Tensor:
    """``rows`` distinct slots of the state pool (the first dimension of the state input), in random order."""
    state = next((n for n in STATES if n in definition.inputs), None)
    pool = (shape_of(state) or (0,))[0] if state else 0
    if rows > pool:
        raise GdnInputError(
            f"{rows} batch rows need distinct state slots but the pool holds {pool}; raise pool_size"
        )
    return torch.randperm(pool, generator=gen, device=gen.device)[:rows].to(device)
