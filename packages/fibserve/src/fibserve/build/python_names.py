"""The name tables of the Python/Triton source policy (:mod:`fibserve.build.python_policy`), and the module
allowlist test.

Sources for the lists: the Python standard library's modules that reach files, processes, the network or the
interpreter (``os``, ``subprocess``, ``socket``, ``ctypes``, ``importlib``, ``runpy``...), CPython's frame and
code object attributes, and torch's public entry points that load native code or unpickle.
"""

from __future__ import annotations

import re
from collections.abc import Collection

DTYPE = re.compile(
    r"^torch\.(u?int\d+|float\d*(_\w+)?|bfloat16|half|double|long|short|int|bool|complex\d+|cfloat|cdouble)$"
)
ALLOCATORS = {
    *("ones", "ones_like", "full", "full_like", "rand", "rand_like", "randn", "randn_like", "randint"),
    *("arange", "linspace", "tensor", "as_tensor", "from_numpy", "eye", "frombuffer", "asarray"),
}
DYNAMIC = {"__import__", "exec", "eval", "compile"}
INTROSPECTION = {"globals", "vars", "locals"}
CONSOLE_AND_FILES = {"open", "input", "breakpoint"}
DUNDER = re.compile(r"^__\w+__$")
DUNDERS_ALLOWED = {"__name__", "__doc__", "__init__", "__len__", "__version__", "__file__"}
OPERATOR_MATMUL = {"operator.matmul", "operator.imatmul", "operator.__matmul__", "operator.__imatmul__"}
SYS_FORBIDDEN = {
    *("modules", "_getframe", "settrace", "setprofile", "meta_path", "path_hooks", "path_importer_cache"),
}
MODULE_NAMES = {
    *("os", "posix", "sys", "subprocess", "_posixsubprocess", "ctypes", "_ctypes", "importlib", "builtins"),
    *("socket", "_socket", "shutil", "pickle", "marshal", "runpy", "threading", "multiprocessing", "signal"),
    *("inspect", "gc", "urllib", "http", "pathlib", "tempfile", "fcntl", "fibserve"),
}
"""Module names refused wherever they appear in a dotted name (``torch.os``, ``typing.sys``)."""
INTERNAL_ATTRIBUTES = {
    *("f_globals", "f_locals", "f_back", "f_builtins", "f_code", "gi_frame", "gi_code", "cr_frame"),
    *("ag_frame", "tb_frame", "tb_next", "co_code", "get_type_hints", "ForwardRef", "_eval_type"),
}
TORCH_ESCAPES = (
    *("torch.utils", "torch.hub", "torch.ops.load_library", "torch.classes", "torch.library", "torch._C"),
    *("torch.load", "torch.save", "torch.jit.load", "torch.package", "torch.multiprocessing"),
    "torch.distributed",
)
JIT_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics", "triton.language.jit"}


def module_allowed(module: str, allowed: Collection[str], local: Collection[str]) -> bool:
    """Whether importing ``module`` is allowed: the solution's own top-level modules (``local``), an entry
    ``m`` of ``allowed`` for ``m`` itself, an entry ``m.*`` for ``m`` and its submodules."""
    if module.split(".")[0] in local:
        return True
    for entry in allowed:
        base = entry.removesuffix(".*")
        if module == base or (entry.endswith(".*") and module.startswith(base + ".")):
            return True
    return False
