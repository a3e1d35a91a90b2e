"""Definition: the contract of one kernel (axes, input and output tensors, PyTorch reference).

JSON-compatible with FlashInfer Trace definitions (``definitions/**/*.json``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from ._base import NonEmptyStr, TraceModel, defines_top_level_function


class DType(StrEnum):
    """Element types a tensor may have; the values are the torch dtype names used in the JSON."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT4_E2M1 = "float4_e2m1"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    BOOL = "bool"

    @property
    def bits(self) -> int:
        """Storage size of one element in bits (float4_e2m1 is 4; bool is stored as one byte)."""
        return _DTYPE_BITS[self]

    @property
    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating-point type."""
        return self.value.startswith("float") or self is DType.BFLOAT16


_DTYPE_BITS = {
    DType.FLOAT32: 32,
    DType.FLOAT16: 16,
    DType.BFLOAT16: 16,
    DType.FLOAT8_E4M3FN: 8,
    DType.FLOAT8_E5M2: 8,
    DType.FLOAT4_E2M1: 4,
    DType.INT64: 64,
    DType.INT32: 32,
    DType.INT16: 16,
    DType.INT8: 8,
    DType.BOOL: 8,
}


class AxisConst(TraceModel):
    """An axis whose extent is fixed by the definition (e.g. ``N = 7168`` of a GEMM)."""

    type: Literal["const"] = "const"
    """Discriminator: always ``"const"``."""
    value: Annotated[int, Field(ge=0)]
    """The extent of the axis (number of elements along it)."""
    description: str | None = None
    """What the axis means, for people."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"description"})


class AxisVar(TraceModel):
    """An axis whose extent each workload chooses (e.g. the token count ``M`` of a GEMM)."""

    type: Literal["var"] = "var"
    """Discriminator: always ``"var"``."""
    description: str | None = None
    """What the axis means, for people."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"description"})


BASELINE_TAG = "baseline:"
"""Prefix of the tag by which a definition names its baseline Solution: ``baseline:<solution name>``. The
baseline is what speed is measured against (vendor quality: cuBLAS, cuDNN SDPA); the reference stays the
correctness oracle. A plain tag keeps the JSON FlashInfer Trace compatible."""

Axis = Annotated[AxisConst | AxisVar, Field(discriminator="type")]
"""A const or var axis, told apart by its ``type`` field."""


class TensorSpec(TraceModel):
    """Shape and dtype of one input or output.

    ``shape`` lists axis names, outermost first. ``None`` means a Python scalar (passed as int/float/bool);
    ``[]`` means a 0-d tensor.
    """

    shape: list[NonEmptyStr] | None
    """Axis names of the tensor's dimensions, or null for a Python scalar."""
    dtype: DType
    """Element type."""
    description: str | None = None
    """What the tensor holds, for people."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"description"})

    @property
    def is_scalar(self) -> bool:
        """Whether this is a Python scalar (``shape: null``) rather than a tensor."""
        return self.shape is None


class Definition(TraceModel):
    """One kernel's contract: named axes, ordered inputs then outputs, and a PyTorch reference.

    The positional calling order of a kernel is the inputs in order, then (destination-passing style) the
    outputs in order. The reference is Python source defining ``run(*inputs)`` that returns one tensor or a
    tuple of tensors in output order.

    Validation (errors name the offending axis or tensor): every shape axis is declared in ``axes``; input and
    output names are distinct; there is at least one output; ``reference`` parses and defines ``run`` at
    module level.
    """

    name: NonEmptyStr
    """Unique name of the definition, e.g. ``gemm_n7168_k5120``."""
    op_type: NonEmptyStr
    """Operator family, e.g. ``gemm``, ``mha``, ``rmsnorm``."""
    description: str | None = None
    """What the kernel computes and where its shapes come from."""
    tags: list[str] = Field(default_factory=list)
    """Free-form labels such as ``status:verified`` or ``model:llama-3.1-8b``."""
    axes: dict[NonEmptyStr, Axis]
    """Axis name to const or var axis."""
    inputs: dict[NonEmptyStr, TensorSpec]
    """Input name to spec, in calling order."""
    outputs: dict[NonEmptyStr, TensorSpec]
    """Output name to spec, in return (and destination-passing) order."""
    reference: NonEmptyStr
    """PyTorch source code defining ``run``; the ground truth for correctness."""
    constraints: list[str] = Field(default_factory=list)
    """Python expressions over axis values and inputs that every workload satisfies, e.g.
    ``len_indptr == batch_size + 1`` or ``total_q == qo_indptr[-1].item()``."""

    _omit_if_none: ClassVar[frozenset[str]] = frozenset({"description"})

    @model_validator(mode="after")
    def _check_contract(self) -> Definition:
        if not self.outputs:
            raise ValueError("definition has no outputs; declare at least one output tensor")
        both = sorted(set(self.inputs) & set(self.outputs))
        if both:
            raise ValueError(
                f"names used as both input and output: {both}; input and output names must be distinct"
            )
        for kind, specs in (("input", self.inputs), ("output", self.outputs)):
            for tensor, spec in specs.items():
                for axis in spec.shape or ():
                    if axis not in self.axes:
                        raise ValueError(
                            f"{kind} {tensor!r} uses axis {axis!r} that is not declared in axes "
                            f"(declared: {sorted(self.axes)})"
                        )
        try:
            has_run = defines_top_level_function(self.reference, "run")
        except SyntaxError as exc:
            raise ValueError(f"reference is not valid Python: {exc.msg} (line {exc.lineno})") from None
        if not has_run:
            raise ValueError("reference does not define a module-level function `run`")
        return self

    @property
    def baseline(self) -> str | None:
        """The name of the baseline Solution the tag ``baseline:<name>`` gives (the first such tag), or None."""
        return next((t[len(BASELINE_TAG) :] for t in self.tags if t.startswith(BASELINE_TAG)), None)

    @property
    def input_names(self) -> list[str]:
        """Input names in calling order."""
        return list(self.inputs)

    @property
    def output_names(self) -> list[str]:
        """Output names in return order."""
        return list(self.outputs)

    @property
    def var_axes(self) -> list[str]:
        """Names of the var axes, in declaration order (each workload gives their values)."""
        return [name for name, axis in self.axes.items() if isinstance(axis, AxisVar)]

    @property
    def const_axes(self) -> dict[str, int]:
        """Const axis name to its value, in declaration order."""
        return {name: axis.value for name, axis in self.axes.items() if isinstance(axis, AxisConst)}

    def tensor(self, tensor_name: str) -> TensorSpec:
        """The spec of input or output ``tensor_name``.

        Raises:
            KeyError: no input or output has that name.
        """
        spec = self.inputs.get(tensor_name) or self.outputs.get(tensor_name)
        if spec is None:
            raise KeyError(f"definition {self.name!r} has no input or output named {tensor_name!r}")
        return spec

    def axis_values(self, axes: dict[str, int]) -> dict[str, int]:
        """All axis values: the const axes plus the var axes taken from ``axes`` (a workload's ``axes``).

        Raises:
            ValueError: a var axis is missing from ``axes``, or ``axes`` overrides a const axis with a
                different value.
        """
        values = dict(self.const_axes)
        for name, value in axes.items():
            if name in values and values[name] != value:
                raise ValueError(
                    f"axis {name!r} is const {values[name]} in {self.name!r}, workload gives {value}"
                )
            values[name] = value
        missing = [name for name in self.var_axes if name not in values]
        if missing:
            raise ValueError(f"no value for var axes {missing} of definition {self.name!r}")
        return values

    def resolve_shape(self, tensor_name: str, axes: dict[str, int]) -> tuple[int, ...] | None:
        """The concrete shape of ``tensor_name`` for var-axis values ``axes``; ``None`` for a scalar.

        Raises:
            KeyError: unknown tensor name.
            ValueError: a var axis the tensor uses has no value in ``axes``.
        """
        spec = self.tensor(tensor_name)
        if spec.shape is None:
            return None
        values = self.const_axes
        shape = []
        for axis in spec.shape:
            if axis in values:
                shape.append(values[axis])
            elif axis in axes:
                shape.append(int(axes[axis]))
            else:
                raise ValueError(
                    f"var axis {axis!r} of {tensor_name!r} has no value (got axes {sorted(axes)})"
                )
        return tuple(shape)

    def check_workload(self, workload: Any) -> list[str]:
        """Problems that make ``workload`` (a :class:`~fibserve.trace.Workload`) unusable with this definition.

        Checks: every var axis has a value, no unknown axis is given, a const axis (if given) has its fixed
        value; the workload's inputs are exactly the definition's inputs. Returns an empty list when it fits.
        """
        problems: list[str] = []
        var = set(self.var_axes)
        missing = sorted(var - set(workload.axes))
        if missing:
            problems.append(f"workload {workload.uuid} lacks values for var axes {missing}")
        const = self.const_axes
        clashes = sorted(n for n, v in workload.axes.items() if n in const and const[n] != v)
        if clashes:
            problems.append(
                f"workload {workload.uuid} gives const axes {clashes} values other than {self.name!r} fixes"
            )
        extra = sorted(set(workload.axes) - set(self.axes))
        if extra:
            problems.append(f"workload {workload.uuid} sets axes {extra} that {self.name!r} does not declare")
        if set(workload.inputs) != set(self.inputs):
            problems.append(
                f"workload {workload.uuid} inputs {sorted(workload.inputs)} differ from "
                f"{self.name!r} inputs {sorted(self.inputs)}"
            )
        return problems
