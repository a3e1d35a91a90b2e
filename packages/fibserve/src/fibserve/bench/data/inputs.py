"""Seeded, dtype-aware and definition-aware input generation (trusted side).

Seeding: input set ``k`` of workload ``u`` draws from ``torch.Generator`` seeds derived by SHA-256 over
(server secret, workload uuid, ``k``, input name). Without the secret the inputs cannot be predicted, and the
same (secret, uuid, k) always gives the same inputs on the same device type. Set ``k`` is the design's
"trial": each input set is one seeded draw.

Random inputs by dtype: float32/float16/bfloat16 standard normal; float8 normal clamped to the format's finite
range, or, next to a floating input ``NAME_scale``, quantized from bf16 normals with that scale, per tensor,
per leading index or per block such as the 1x128 and 128x128 blocks of FP8 GEMMs
(:mod:`fibserve.bench.data.derived`); integers uniform in ``[0, 64)`` (int8 ``[-64, 64)``); bool fair coin.
float4 needs safetensors. A reference that defines ``derive_inputs`` computes some inputs from the others
(the attention backward's ``o`` and ``lse`` are the forward of ``q``, ``k``, ``v``; same module).

Definitions of a known family get *definition-aware* generators, which make several inputs at once:

* paged and ragged attention (:mod:`fibserve.bench.data.paged`): ``qo_indptr``, ``kv_indptr``,
  ``kv_indices``, ``kv_last_page_len``, ``seq_indptr``, ``cu_seqlens``... describing one batch whose lengths
  add up to the workload's totals (the lengths from the workload uuid alone, the page ids per input set);
  used when the workload draws every one of them at random;
* gated delta net (:mod:`fibserve.bench.data.gdn`): unit-norm ``q`` and ``k``, gates ``A_log``, ``a``,
  ``dt_bias``, ``b`` in their ranges, a recurrent state, distinct state-pool slots.

Other index-like inputs get generic rules, chosen by name (first match wins, see ``INDEX_RULES``):

* ``*_indptr`` (1-D): monotone offsets from 0 whose last value is the length of the matching ``*_indices``
  input (same prefix) or the axis named by a constraint ``AXIS == NAME[-1].item()``;
* ``*_indices`` (1-D): page ids in ``[0, num_pages)`` (axis ``num_pages``, else the first dim of an input whose
  name contains ``cache``), distinct while there are enough pages;
* ``last_page_len``: in ``[1, page_size]``; other ``*_len*`` inputs of length ``n``: the segment lengths of a
  ``*_indptr`` of length ``n + 1``, times ``page_size`` (kept consistent with the indptr);
* ``*scale*`` floats not already set by their FP8 tensor: ``1 / sqrt(head_dim)`` (largest axis named
  ``*head_dim*``), broadcast to their shape.

After generation every definition constraint is evaluated; a violation is an :class:`InputError` naming it, so
a definition whose inputs we cannot synthesise fails loudly (give safetensors inputs instead) rather than
running on garbage.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from fibserve.trace import Definition, DType, Workload

from fibserve.bench.dtypes import TORCH_DTYPES
from fibserve.bench.data.derived import DerivedInputError, derive_inputs_, quantize_fp8, scale_partner
from fibserve.bench.data.gdn import GdnInputError, gdn_inputs
from fibserve.bench.data.paged import LAYOUT_NAMES, LayoutError, layout_inputs, layout_seed

Value = torch.Tensor | int | float | bool


class InputError(ValueError):
    """Inputs for a workload cannot be produced (a task-level problem, never the candidate's fault)."""


def torch_dtype(dtype: DType | str) -> torch.dtype:
    """The torch dtype for a definition dtype name.

    Raises:
        InputError: the dtype has no torch equivalent in this torch build.
    """
    try:
        return TORCH_DTYPES[str(getattr(dtype, "value", dtype))]
    except KeyError:
        raise InputError(f"dtype {dtype} is not supported by this torch build") from None


def derive_seed(secret: bytes, workload_uuid: str, input_set: int, name: str = "") -> int:
    """A 63-bit generator seed from SHA-256(secret, uuid, input set, input name)."""
    digest = hashlib.sha256(
        b"\x00".join([secret, workload_uuid.encode(), str(input_set).encode(), name.encode()])
    ).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _generator(device: torch.device, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def random_tensor(
    shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    """A random tensor by dtype (see the module docstring for the distributions)."""
    shape = tuple(shape)
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        limit = torch.finfo(dtype).max
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
        return x.clamp(-limit, limit).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen, device=device, dtype=torch.int32).bool()
    if dtype in (torch.int64, torch.int32, torch.int16, torch.int8):
        low = -64 if dtype == torch.int8 else 0
        return torch.randint(low, 64, shape, generator=gen, device=device, dtype=dtype)
    raise InputError(f"random inputs of dtype {dtype} are not supported; provide them as safetensors")


class _Context:
    """What a generator rule can see: the definition, axis values, inputs made so far."""

    def __init__(self, definition: Definition, axes: dict[str, int], device: torch.device):
        self.definition = definition
        self.axes = axes
        self.device = device
        self.values: dict[str, Value] = {}
        self.random: dict[str, bool] = {}
        """Input name -> whether the workload draws it at random (False: given as scalar or safetensors)."""

    def shape(self, name: str) -> tuple[int, ...] | None:
        return self.definition.resolve_shape(name, self.axes)

    def total_for_indptr(self, name: str) -> int:
        prefix = name[: -len("indptr")]
        paired = prefix + "indices"
        if paired in self.definition.inputs:
            return self.shape(paired)[0]
        for constraint in self.definition.constraints:
            m = re.fullmatch(rf"\s*(\w+)\s*==\s*{re.escape(name)}\[-1\]\.item\(\)\s*", constraint)
            if m and m.group(1) in self.axes:
                return self.axes[m.group(1)]
        raise InputError(
            f"cannot tell what {name!r} must sum to: no input {paired!r} and no constraint "
            f"'AXIS == {name}[-1].item()'; provide {name!r} as a safetensors input"
        )

    def num_pages(self, name: str) -> int:
        if "num_pages" in self.axes:
            return self.axes["num_pages"]
        for other, spec in self.definition.inputs.items():
            if "cache" in other and spec.shape:
                return self.shape(other)[0]
        raise InputError(f"cannot tell the page count for {name!r}; provide it as a safetensors input")


def _gen_indptr(
    ctx: _Context, name: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator
) -> torch.Tensor:
    if len(shape) != 1 or shape[0] < 1:
        raise InputError(f"{name!r} looks like an indptr but has shape {shape}; expected 1-D, length >= 1")
    total = ctx.total_for_indptr(name)
    cuts = torch.randint(
        0, total + 1, (shape[0] - 2,) if shape[0] > 2 else (0,), generator=gen, device=ctx.device
    )
    cuts, _ = torch.sort(cuts)
    ends = torch.tensor([total], device=ctx.device)
    zero = torch.zeros(1, device=ctx.device, dtype=cuts.dtype)
    body = torch.cat([zero, cuts.to(zero.dtype), ends.to(zero.dtype)]) if shape[0] > 1 else zero
    return body.to(dtype)


def _gen_indices(
    ctx: _Context, name: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator
) -> torch.Tensor:
    pages = ctx.num_pages(name)
    n = math.prod(shape)
    if pages <= 0:
        if n:
            raise InputError(f"{name!r} needs {n} page ids but there are no pages")
        return torch.zeros(shape, dtype=dtype, device=ctx.device)
    if n <= pages:
        ids = torch.randperm(pages, generator=gen, device=ctx.device)[:n]
    else:
        ids = torch.randint(0, pages, (n,), generator=gen, device=ctx.device)
    return ids.reshape(shape).to(dtype)


def _gen_lengths(
    ctx: _Context, name: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator
) -> torch.Tensor:
    page_size = ctx.axes.get("page_size", 1)
    if "last_page_len" in name:
        return torch.randint(1, page_size + 1, shape, generator=gen, device=ctx.device, dtype=dtype)
    for other, value in ctx.values.items():
        is_indptr = other.endswith("indptr") and isinstance(value, torch.Tensor) and value.dim() == 1
        if is_indptr and len(shape) == 1 and value.numel() == shape[0] + 1:
            return ((value[1:] - value[:-1]) * page_size).to(dtype)
    raise InputError(f"cannot derive lengths {name!r} from an indptr; provide it as a safetensors input")


def _gen_scale(
    ctx: _Context, name: str, shape: tuple[int, ...] | None, dtype: torch.dtype, gen: torch.Generator
) -> Value:
    dims = [v for k, v in ctx.axes.items() if "head_dim" in k and v > 0]
    scale = 1.0 / math.sqrt(max(dims)) if dims else 1.0
    if shape is None:
        return scale
    return torch.full(shape, scale, dtype=dtype, device=ctx.device)


def _gen_fp8(
    ctx: _Context, name: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator
) -> torch.Tensor:
    """An FP8 input: quantized bf16 normals, setting its ``NAME_scale`` partner when that one is random too."""
    partner = scale_partner(ctx.definition, name)
    if partner is None or ctx.random.get(partner) is False:
        return random_tensor(shape, dtype, gen, ctx.device)
    values = random_tensor(shape, torch.bfloat16, gen, ctx.device)
    scale_shape = ctx.shape(partner) or ()
    try:
        quantized, scale = quantize_fp8(values, dtype, scale_shape)
    except DerivedInputError as exc:
        raise InputError(f"{name!r} and {partner!r}: {exc}") from None
    spec = ctx.definition.inputs[partner]
    ctx.values[partner] = scale.item() if spec.shape is None else scale.to(torch_dtype(spec.dtype))
    return quantized


Rule = Callable[[_Context, str, Any, torch.dtype, torch.Generator], Value]

INDEX_RULES: list[tuple[Callable[[str, DType], bool], Rule, int]] = [
    (lambda n, d: n.endswith("indptr") and not d.is_floating_point, _gen_indptr, 0),
    (lambda n, d: n.endswith("indices") and not d.is_floating_point, _gen_indices, 0),
    (lambda n, d: "_len" in n and not d.is_floating_point, _gen_lengths, 1),
    (lambda n, d: str(d.value).startswith("float8"), _gen_fp8, 0),
    (lambda n, d: "scale" in n and d.is_floating_point, _gen_scale, 1),
]
"""(matches(name, dtype), generator, pass). Pass-1 rules run after all pass-0 inputs exist. Extend here."""


def _load_safetensors(path: str, key: str, roots: Sequence[Path], device: torch.device) -> torch.Tensor:
    from safetensors.torch import load_file

    for root in roots:
        candidate = (Path(root) / path).resolve()
        if candidate.is_file():
            tensors = load_file(str(candidate))
            if key not in tensors:
                raise InputError(f"{candidate} has no tensor {key!r} (keys: {sorted(tensors)[:10]})")
            return tensors[key].to(device)
    raise InputError(
        f"safetensors file {path!r} not found under the trace-set roots {[str(r) for r in roots]}"
    )


def generate_inputs(
    definition: Definition,
    workload: Workload,
    input_set: int,
    *,
    secret: bytes,
    device: str | torch.device,
    roots: Sequence[Path] = (),
) -> dict[str, Value]:
    """Inputs (name -> tensor or Python scalar, in definition order) for one input set of one workload.

    Args:
        definition: the definition (shapes, dtypes, constraints).
        workload: the workload (axis values, how each input is obtained).
        input_set: which seeded draw (0, 1, ...).
        secret: server-side secret mixed into every seed.
        device: where tensors are created (``cpu`` or ``cuda:N``).
        roots: trace-set roots against which safetensors paths are resolved, in order.

    Raises:
        InputError: unsupported dtype, missing safetensors file or key, a workload that does not fit the
            definition, or generated inputs that violate a definition constraint.
    """
    device = torch.device(device)
    problems = definition.check_workload(workload)
    if problems:
        raise InputError("; ".join(problems))
    try:
        axes = definition.axis_values(workload.axes)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    ctx = _Context(definition, axes, device)
    ctx.random = {name: workload.inputs[name].type == "random" for name in definition.inputs}
    ctx.values.update(_family_inputs(ctx, workload.uuid, input_set, secret))
    for pass_no in (0, 1):
        for name, spec in definition.inputs.items():
            if name in ctx.values:
                continue
            source = workload.inputs[name]
            dtype = torch_dtype(spec.dtype)
            shape = ctx.shape(name)
            gen = _generator(device, derive_seed(secret, workload.uuid, input_set, name))
            rule, rule_pass = _find_rule(name, spec.dtype) if source.type == "random" else (None, 0)
            if rule_pass != pass_no:
                continue
            if source.type == "scalar":
                value = source.value
                ctx.values[name] = (
                    value if shape is None else torch.full(shape, value, dtype=dtype, device=device)
                )
            elif source.type == "safetensors":
                tensor = _load_safetensors(source.path, source.tensor_key, roots, device)
                if shape is not None and tuple(tensor.shape) != shape:
                    raise InputError(
                        f"safetensors input {name!r} has shape {tuple(tensor.shape)}, expected {shape}"
                    )
                ctx.values[name] = tensor.to(dtype)
            elif rule is not None:
                ctx.values[name] = rule(ctx, name, shape, dtype, gen)
            elif shape is None:
                ctx.values[name] = _random_scalar(spec.dtype, gen)
            else:
                ctx.values[name] = random_tensor(shape, dtype, gen, device)
    ordered = {name: ctx.values[name] for name in definition.inputs}
    try:
        derive_inputs_(definition, workload, ordered)
    except DerivedInputError as exc:
        raise InputError(str(exc)) from None
    check_constraints(definition, axes, ordered)
    return ordered


def has_index_rule(name: str, dtype: DType) -> bool:
    """Whether a random input ``name`` of ``dtype`` is drawn by a definition-aware rule (page tables, indptr,
    indices, lengths, scales: values that are structure) rather than as plain random values."""
    return _find_rule(name, dtype)[0] is not None


def _family_inputs(ctx: _Context, uuid: str, input_set: int, secret: bytes) -> dict[str, Value]:
    """The inputs the definition-aware generators make (module docstring), for the inputs drawn at random."""
    wanted = {name for name, drawn in ctx.random.items() if drawn}
    layout_names = LAYOUT_NAMES & set(ctx.definition.inputs)
    if layout_names - wanted:  # the workload gives some of them: the generic rules keep to those
        wanted -= layout_names

    def generator_for(name: str) -> torch.Generator:
        return _generator(ctx.device, derive_seed(secret, uuid, input_set, name))

    layout_gen = torch.Generator().manual_seed(layout_seed(uuid))
    try:
        out: dict[str, Value] = dict(layout_inputs(ctx, wanted, generator_for, layout_gen, ctx.device))
        out.update(gdn_inputs(ctx.definition, ctx.shape, wanted - set(out), generator_for, ctx.device))
    except (LayoutError, GdnInputError) as exc:
        raise InputError(f"{ctx.definition.name}: {exc}") from None
    return out


def _find_rule(name: str, dtype: DType) -> tuple[Rule | None, int]:
    for match, rule, pass_no in INDEX_RULES:
        if match(name, dtype):
            return rule, pass_no
    return None, 0


def _random_scalar(dtype: DType, gen: torch.Generator) -> Value:
    draw = torch.rand((), generator=gen, device=gen.device).item()
    if dtype is DType.BOOL:
        return draw < 0.5
    if dtype.is_floating_point:
        return 0.5 + draw
    return 1 + int(draw * 63)


def check_constraints(definition: Definition, axes: dict[str, int], inputs: dict[str, Value]) -> None:
    """Evaluate each definition constraint over axis values and inputs.

    Raises:
        InputError: a constraint is False or cannot be evaluated (the message quotes it).
    """
    scope: dict[str, Any] = {"torch": torch, "math": math, **axes, **inputs}
    for constraint in definition.constraints:
        try:
            ok = bool(eval(constraint, {"__builtins__": {"len": len, "int": int, "abs": abs}}, scope))
        except Exception as exc:
            raise InputError(f"cannot evaluate constraint {constraint!r}: {exc}") from None
        if not ok:
            raise InputError(
                f"generated inputs violate constraint {constraint!r} of {definition.name!r}; "
                "give the offending inputs as safetensors in the workload"
            )
