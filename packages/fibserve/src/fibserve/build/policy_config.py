"""What the source policy is configured with and what it reports: :class:`PolicyConfig` and
:class:`PolicyViolation`, shared by the CUDA rules (:mod:`fibserve.build.policy`), the Python/Triton rules
(:mod:`fibserve.build.python_policy`) and the binary check (:mod:`fibserve.build.binary_policy`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CudaLibrary = Literal["cublas", "cudnn", "cutlass"]
"""Library families the CUDA policy can forbid; ``cublas`` covers cuBLASLt, ``cutlass`` covers CuTe."""

_PURE_MODULES = (
    *("__future__", "abc", "collections", "dataclasses", "enum", "functools", "itertools", "math"),
    *("numbers", "time", "typing", "typing_extensions"),
)
"""Standard-library modules without access to files, processes, the network or the interpreter's internals
(``time`` is one: assigning to its attributes is the separate ``python.module-assignment`` rule)."""


class PolicyConfig(BaseModel):
    """Per-benchmark source policy. The defaults are PTXBench's: write the kernel yourself."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Master switch; ``False`` accepts every source (for references and baselines)."""
    cuda_forbidden_libraries: list[CudaLibrary] = Field(
        default_factory=lambda: ["cublas", "cudnn", "cutlass"]
    )
    """Library families a CUDA/C++ candidate may not include, call or link."""
    cuda_allow_dynamic_loading: bool = False
    """Whether ``dlopen``/``dlsym`` are allowed (they can reach any library by name at run time)."""
    python_languages: list[Literal["triton", "python"]] = Field(default_factory=lambda: ["triton", "python"])
    """Solution languages whose ``.py`` sources get the Python AST check. ``python`` solutions (references and
    baselines, trusted when they come from the server's own trace sets) get the module allowlist and the
    rules against reflection and dynamic code, but may compute with torch."""
    torch_allowed: list[str] = Field(
        default_factory=lambda: [
            "torch.empty",
            "torch.empty_like",
            "torch.empty_strided",
            "torch.zeros",
            "torch.zeros_like",
            "torch.Tensor",
            "torch.dtype",
            "torch.device",
            "torch.Size",
            "torch.finfo",
            "torch.iinfo",
            "torch.is_tensor",
            "torch.no_grad",
            "torch.inference_mode",
            "torch.cuda.current_stream",
            "torch.cuda.current_device",
            "torch.cuda.device",
            "torch.cuda.stream",
            "torch.cuda.Stream",
            "torch.cuda.is_available",
            "torch.cuda.device_count",
            "torch.cuda.get_device_properties",
            "torch.cuda.get_device_capability",
        ]
    )
    """``torch`` names a Triton wrapper may use (plus every dtype such as ``torch.bfloat16``). Allocation is
    ``empty``-style; ``zeros`` is allowed because split-K and atomic kernels need a zeroed accumulator."""
    tensor_methods_forbidden: list[str] = Field(
        default_factory=lambda: [
            *("matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "dot", "einsum", "linear", "conv2d"),
            *(
                "softmax",
                "log_softmax",
                "exp",
                "log",
                "sqrt",
                "rsqrt",
                "sigmoid",
                "tanh",
                "relu",
                "gelu",
                "silu",
            ),
            *("sum", "mean", "var", "std", "norm", "amax", "amin", "argmax", "argmin", "cumsum", "topk"),
            *("sub", "mul", "div", "pow", "add_", "sub_", "mul_", "div_", "addcmul", "lerp", "where"),
            *("to", "float", "half", "bfloat16", "double", "type", "contiguous", "clone", "copy_", "fill_"),
            *("zero_", "scatter", "scatter_add", "gather", "index_select", "masked_fill", "index_add_"),
            *("cpu", "numpy", "tolist"),
        ]
    )
    """Tensor methods a wrapper may not call outside ``@triton.jit`` functions: each runs a PyTorch kernel
    (``to``/``float``/``contiguous`` copy or cast, which is work the candidate must do in its own kernel).
    ``cpu``/``numpy``/``tolist`` would move the work to the host. ``add`` and ``sort`` are left out on
    purpose: ``set.add`` and ``list.sort`` are common in wrappers."""
    allowed_modules: dict[Literal["triton", "python"], list[str]] = Field(
        default_factory=lambda: {
            "triton": [
                *_PURE_MODULES,
                "torch",
                "triton",
                "triton.language.*",
                "triton.tools.tensor_descriptor",
            ],
            "python": [*_PURE_MODULES, "torch.*"],
        }
    )
    """Modules a solution of each language may import, besides its own files: an entry ``m`` allows ``m``, an
    entry ``m.*`` allows ``m`` and every submodule. Everything else (``os``, ``subprocess``, ``socket``,
    ``ctypes``, ``importlib``, ``runpy``, ``urllib``, ``fibserve``...) is refused."""
    protected_modules: list[str] = Field(default_factory=lambda: ["torch", "triton", "time", "numpy"])
    """Modules whose attributes may not be assigned, deleted or reached through ``getattr``."""


class PolicyViolation(BaseModel):
    """One policy violation, phrased for the model that wrote the code."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    rule: str
    """Rule id, e.g. ``cuda.library-call`` or ``triton.torch-compute``."""
    file: str
    """Source path inside the solution (or ``spec.dependencies``)."""
    line: int
    """1-based line number; 0 when the violation is not tied to a line."""
    message: str
    """What is wrong and what to do instead."""
