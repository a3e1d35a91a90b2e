"""Evaluation configuration: tolerances, timing counts, timeouts, with one documented precedence.

Precedence, lowest to highest (each layer overrides only the keys it names)::

    packaged defaults.yaml  <  op_type.<op_type>  <  definitions.<name>  <  request overrides

An operator file (``config_path`` or the ``FIBSERVE_EVAL_CONFIG`` environment variable) has the same three
sections (``defaults``, ``op_type``, ``definitions``); each of its sections is laid over the packaged section
of the same level before the levels are applied. The resolved :class:`EvalConfig` records, in ``origin``,
which layer set each value, and it is stored with every result.
"""

from __future__ import annotations

import copy
import functools
import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

CONFIG_ENV = "FIBSERVE_EVAL_CONFIG"
"""Environment variable naming an operator YAML file laid over the packaged defaults."""


class Timeouts(BaseModel):
    """Wall-clock limits per phase, in seconds. A phase that runs past its limit ends the worker."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    build: float = Field(300.0, gt=0, le=3600)
    """Building the candidate (nvcc for CUDA), in seconds."""
    load: float = Field(60.0, gt=0, le=3600)
    """Starting a worker (when no warm spare is ready) and loading the candidate into it, in seconds."""
    correctness: float = Field(60.0, gt=0, le=3600)
    """One correctness call of the candidate (including the Triton interpreter on CPU), in seconds."""
    timing: float = Field(300.0, gt=0, le=7200)
    """All timed calls of one workload (warmup, iterations and trials together), in seconds."""


class EvalConfig(BaseModel):
    """Everything that decides how one evaluation is judged and timed (values are recorded with results)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    atol: float = Field(1e-2, ge=0)
    """Absolute tolerance: an element matches when ``|x - y| <= atol + rtol * |y|`` (computed in fp32)."""
    rtol: float = Field(1e-2, ge=0)
    """Relative tolerance (see ``atol``)."""
    required_matched_ratio: float = Field(1.0, gt=0, le=1)
    """Fraction of elements (per output) that must match; 1.0 means every element."""
    warmup: int = Field(10, ge=0, le=1000)
    """Untimed candidate and reference calls per trial before the timed pairs."""
    iterations: int = Field(50, ge=1, le=10000)
    """Timed candidate/reference pairs per trial."""
    trials: int = Field(3, ge=1, le=100)
    """Trials per workload; the input sets rotate between buffer slots from one trial to the next."""
    num_input_sets: int = Field(3, ge=1, le=16)
    """Distinct seeded input sets per workload (random inputs differ; scalars and safetensors do not)."""
    timing_slots: int = Field(16, ge=1, le=64)
    """Buffer slots each side's timed calls rotate over on a GPU (at least ``num_input_sets``, the input sets
    taking turns in them), each slot its own allocations, so that a latency is a median over that many
    placements in device memory. Why: on the H100 (2026-12-05, docs/gpu-results.md "Fourteenth session")
    torch.matmul at M=232, N=7168, K=5120 read up to 2.5% apart from one slot to another of the same worker
    (per-slot medians of the pair ratios up to 4% apart: SD 1.07% over 12 evaluations, 0.39% of it
    sampling), so with 3 slots a side the same kernel against itself read 0.9923 to 1.0096 over those 12
    evaluations. Capped by
    ``timing_slot_bytes`` and by ``iterations``; on CPU, and for workloads with no buffer over 1 MiB, the
    slots are the input sets' (:func:`fibserve.bench.worker.slots.timing_slot_count`)."""
    timing_slot_bytes: int = Field(2 << 30, ge=0)
    """Device memory (bytes) all of one side's slots may take together: a workload whose slot needs more than
    ``timing_slot_bytes / timing_slots`` gets fewer slots (never fewer than its input sets, whatever they
    take)."""
    cold_l2: bool = True
    """Overwrite a buffer of at least twice the L2 size before every timed call (GPU only)."""
    validate_timed_outputs: bool = True
    """After each trial, compare with the reference the last output of one slot per input set, drawn at random
    among the slots that held it (besides the sampled timed calls)."""
    check_input_mutation: bool = True
    """Compare the inputs after each correctness call with a pristine copy."""
    vary_inputs: bool = True
    """Give every timed call (warm-up included) input content never seen before in the evaluation, so that no
    answer can be cached by content (:mod:`fibserve.bench.data.variation`); the validated timed outputs are
    then compared with the reference of their own inputs."""
    enforce_source_policy: bool = True
    """Reject candidates that break the source policy (CUDA: no cuBLAS/cuDNN/CUTLASS, no host-file includes;
    Triton and Python: module allowlists and AST rules) or whose CUDA entry point has the wrong argument
    count, as COMPILE_ERROR before anything runs."""
    plausibility: bool = True
    """Flag latencies faster than the device roofline for the definition's FLOPs and bytes."""
    time_reference: bool = True
    """Also time the definition's reference (for the speedup against it) when a baseline Solution is the
    comparator. Without a baseline the reference is the comparator and is always timed."""
    reference_timing_budget_s: float = Field(5.0, ge=0, le=3600)
    """Wall seconds of reference calls allowed per workload when a baseline is the comparator: the reference
    is timed on every k-th iteration, k chosen from its call time in the correctness phase so that its calls
    fit this budget, and not at all when even one call per trial does not (the result says so)."""
    check_baseline: bool = True
    """Compare the baseline's output of its first call in each trial with the reference; a mismatch is a
    harness error (a wrong baseline or a tolerance real kernels cannot meet), never the candidate's."""
    reference_cache_bytes: int = Field(4 << 30, ge=0)
    """Memory budget (bytes) for cached reference outputs, per evaluator."""
    compare_chunk_elements: int = Field(1 << 24, ge=1024)
    """Elements compared at once in fp32 (bounds the temporary memory of a comparison)."""
    timeouts: Timeouts = Field(default_factory=Timeouts)
    """Per-phase wall-clock limits."""
    origin: dict[str, str] = Field(default_factory=dict)
    """Key (dotted for ``timeouts.*``) -> the layer above the defaults that set it: ``op_type:<t>``,
    ``definition:<n>`` or ``request``; keys not listed come from the defaults."""


REQUEST_KEYS = frozenset(
    {"atol", "rtol", "required_matched_ratio", "warmup", "iterations", "trials", "num_input_sets", "timeouts"}
)
"""Keys a request may override. Integrity switches (cold L2, poisoning checks, source policy, plausibility)
are operator settings: a client cannot turn a defence off."""


def _load_yaml(path: Path | str | None) -> dict[str, Any]:
    if path is None:
        text = resources.files("fibserve.bench").joinpath("defaults.yaml").read_text(encoding="utf-8")
        where = "packaged defaults.yaml"
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read evaluation config {where}: {exc}") from None
    data = copy.deepcopy(_parsed(text))
    if not isinstance(data, dict):
        raise ValueError(f"evaluation config {where} must be a mapping with defaults/op_type/definitions")
    unknown = sorted(set(data) - {"defaults", "op_type", "definitions"})
    if unknown:
        raise ValueError(f"evaluation config {where} has unknown sections {unknown}")
    return data


@functools.lru_cache(maxsize=16)
def _parsed(text: str) -> Any:
    """``text`` parsed as YAML, kept by its content: every evaluation resolves its config, and parsing the
    packaged defaults.yaml was half of a CPU evaluation of a vector add (54.0 ms each, 29.4 ms once kept;
    cProfile, 2026-12-05). A file is still read each time, so an operator's edit takes effect on the next
    evaluation."""
    return yaml.safe_load(text) or {}


def _merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict merge; ``layer`` wins; nested mappings (``timeouts``) merge key by key."""
    out = dict(base)
    for key, value in (layer or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _flat_keys(layer: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in layer.items():
        if isinstance(value, dict):
            keys.extend(_flat_keys(value, f"{prefix}{key}."))
        else:
            keys.append(f"{prefix}{key}")
    return keys


def resolve_config(
    definition: Any,
    request_overrides: dict[str, Any] | None = None,
    config_path: Path | str | None = None,
) -> EvalConfig:
    """The configuration for ``definition``: defaults < op_type < definition < request.

    Args:
        definition: a :class:`fibserve.trace.Definition` (only ``name`` and ``op_type`` are read), or None for
            the plain defaults.
        request_overrides: keys of :class:`EvalConfig` from the request (e.g. ``{"atol": 1e-3,
            "timeouts": {"timing": 60}}``); ``None`` values are ignored.
        config_path: operator YAML laid over the packaged defaults; falls back to ``$FIBSERVE_EVAL_CONFIG``.

    Raises:
        ValueError: an unreadable or malformed config file, or a value out of range, naming the layer.
    """
    packaged = _load_yaml(None)
    path = config_path or os.environ.get(CONFIG_ENV) or None
    operator = _load_yaml(path) if path else {}
    sections = {
        name: _merge(packaged.get(name) or {}, operator.get(name) or {})
        for name in ("defaults", "op_type", "definitions")
    }
    layers: list[tuple[str, dict[str, Any]]] = [("defaults", sections["defaults"])]
    if definition is not None:
        op_type = getattr(definition, "op_type", None)
        layers.append((f"op_type:{op_type}", sections["op_type"].get(op_type) or {}))
        name = getattr(definition, "name", None)
        layers.append((f"definition:{name}", sections["definitions"].get(name) or {}))
    request = {k: v for k, v in (request_overrides or {}).items() if v is not None}
    forbidden = sorted(set(request) - REQUEST_KEYS)
    if forbidden:
        raise ValueError(
            f"request may not set {forbidden}; per-request keys are {sorted(REQUEST_KEYS)} "
            "(the others are operator settings in the evaluation config file)"
        )
    layers.append(("request", request))

    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for label, layer in layers:
        if not isinstance(layer, dict):
            raise ValueError(f"evaluation config layer {label} must be a mapping, got {type(layer).__name__}")
        try:
            EvalConfig.model_validate(_merge(merged, layer))
        except ValidationError as exc:
            raise ValueError(f"invalid evaluation config from {label}: {exc}") from None
        merged = _merge(merged, layer)
        if label != "defaults":
            for key in _flat_keys(layer):
                origin[key] = label
    merged["origin"] = origin
    return EvalConfig.model_validate(merged)
