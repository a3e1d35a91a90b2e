"""Workload: concrete var-axis values and how to obtain each input of one definition.

JSON-compatible with FlashInfer Trace workloads (the ``workload`` object of ``workloads/**/*.jsonl`` lines).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from ._base import NonEmptyStr, TraceModel


class RandomInput(TraceModel):
    """Generate the input randomly (seeded by the evaluator) with the definition's shape and dtype."""

    type: Literal["random"] = "random"
    """Discriminator: always ``"random"``."""


class ScalarInput(TraceModel):
    """Pass a fixed Python scalar (for inputs with ``shape: null``, or to fill a 0-d tensor)."""

    type: Literal["scalar"] = "scalar"
    """Discriminator: always ``"scalar"``."""
    value: bool | int | float
    """The literal value."""


class SafetensorsInput(TraceModel):
    """Load the input from a safetensors file stored with the trace set (index-like or captured data)."""

    type: Literal["safetensors"] = "safetensors"
    """Discriminator: always ``"safetensors"``."""
    path: NonEmptyStr
    """Path of the ``.safetensors`` file, relative to the root of the trace set that holds this workload."""
    tensor_key: NonEmptyStr
    """Key of the tensor inside the file."""


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]
"""How to obtain one input; told apart by ``type``."""


class Workload(TraceModel):
    """One concrete problem of a definition: values of its var axes plus a source for every input."""

    uuid: NonEmptyStr
    """Identifier of the workload, unique across a trace set (public data uses UUIDs, with or without dashes)."""
    axes: dict[NonEmptyStr, Annotated[int, Field(ge=0, strict=True)]]
    """Var axis name to its value (number of elements); a JSON integer (not ``true``, not ``3.0``)."""
    inputs: dict[NonEmptyStr, InputSpec]
    """Input name to how the input is obtained."""
    outputs: dict[NonEmptyStr, SafetensorsInput] | None = None
    """Optional stored reference outputs, for references too slow to rerun (output name to safetensors)."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"outputs"})
