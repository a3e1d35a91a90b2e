"""AST policy for Triton (and optionally Python) candidates: no torch compute, monkeypatching or dynamic imports.

A Triton candidate's host wrapper may allocate outputs and launch ``@triton.jit`` kernels; it may not hand
the work to PyTorch or tamper with the harness. Names are resolved through imports and simple assignments,
so ``import torch as t; t.matmul``, ``from torch import matmul as mm`` and ``F = torch.nn.functional`` are all
seen as ``torch.matmul``/``torch.nn.functional``. Rules (ids as reported):

- ``python.syntax``: the file does not parse.
- ``python.torch-compute``: a ``torch`` name outside the allowlist (compute ops, ``torch.nn.functional``...).
- ``python.allocation``: a ``torch`` allocator other than the ``empty``/``zeros`` family (``ones``, ``full``,
  ``rand``, ``tensor``...), since it computes values on the device.
- ``python.tensor-method``: a compute method (``.matmul``, ``.sum``, ``.to``...) called outside ``@triton.jit``.
- ``python.matmul-operator``: ``@`` outside ``@triton.jit`` functions (it is ``torch.matmul`` on tensors),
  and ``operator.matmul``.
- ``python.star-import``: ``from torch import *`` hides which names are used.
- ``python.forbidden-module``: importing ``ctypes``, ``gc``, ``inspect``, ``importlib``... (configurable).
- ``python.dynamic-code``: ``__import__``, ``exec``, ``eval``, ``compile``.
- ``python.reflection``: ``setattr``/``delattr`` anywhere, ``getattr`` on a module or with a computed name,
  ``globals()``/``vars()``/``locals()``, and any dunder attribute (``__dict__``, ``__class__``,
  ``__matmul__``...) except ``__name__``, ``__doc__``, ``__init__``, ``__len__``, ``__version__``, ``__file__``.
- ``python.sys-modules``: ``sys.modules``, ``sys._getframe``, ``sys.settrace``, ``sys.setprofile``,
  ``sys.meta_path``, ``sys.path_hooks``.
- ``python.module-assignment``: assigning or deleting an attribute of ``torch``/``triton``/``time``/``numpy``.

Limits (documented, not hidden): the analysis is flow-insensitive and does not follow values through
containers, function returns or ``**kwargs``; the sandbox and the output checks are the backstop.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .policy import PolicyConfig, PolicyViolation

_DTYPE = re.compile(
    r"^torch\.(u?int\d+|float\d*(_\w+)?|bfloat16|half|double|long|short|int|bool|complex\d+|cfloat|cdouble)$"
)
_ALLOCATORS = {
    *("ones", "ones_like", "full", "full_like", "rand", "rand_like", "randn", "randn_like", "randint"),
    *("arange", "linspace", "tensor", "as_tensor", "from_numpy", "eye", "frombuffer", "asarray"),
}
_DYNAMIC = {"__import__", "exec", "eval", "compile"}
_INTROSPECTION = {"globals", "vars", "locals"}
_DUNDER = re.compile(r"^__\w+__$")
_DUNDERS_ALLOWED = {"__name__", "__doc__", "__init__", "__len__", "__version__", "__file__"}
_OPERATOR_MATMUL = {"operator.matmul", "operator.imatmul", "operator.__matmul__", "operator.__imatmul__"}
_SYS_FORBIDDEN = {
    "modules",
    "_getframe",
    "settrace",
    "setprofile",
    "meta_path",
    "path_hooks",
    "path_importer_cache",
}
_JIT_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics", "triton.language.jit"}


def _qualname(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """Dotted name of ``node`` with import aliases resolved, or None if it is not a plain name chain."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _qualname(node.value, aliases)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, config: PolicyConfig, aliases: dict[str, str]) -> None:
        self.path = path
        self.config = config
        self.aliases = aliases
        self.allowed = set(config.torch_allowed)
        self.forbidden_methods = set(config.tensor_methods_forbidden)
        self.protected = tuple(config.protected_modules)
        self.jit_depth = 0
        self.found: list[PolicyViolation] = []

    def report(self, rule: str, node: ast.AST, message: str) -> None:
        self.found.append(
            PolicyViolation(rule=rule, file=self.path, line=getattr(node, "lineno", 0), message=message)
        )

    def _is_module(self, qualname: str | None) -> bool:
        return qualname is not None and any(
            qualname == module or qualname.startswith(module + ".") for module in self.protected
        )

    def _check_torch_name(self, qualname: str, node: ast.AST) -> None:
        if qualname in self.allowed or _DTYPE.match(qualname) or qualname == "torch":
            return
        short = qualname.removeprefix("torch.")
        if short in _ALLOCATORS:
            self.report(
                "python.allocation",
                node,
                f"`{qualname}` fills a tensor with PyTorch; allocate with torch.empty/torch.empty_like "
                "(or torch.zeros for accumulators) and write the values in your Triton kernel.",
            )
        else:
            self.report(
                "python.torch-compute",
                node,
                f"`{qualname}` is PyTorch compute, which this benchmark forbids in Triton solutions; "
                "implement it inside a @triton.jit kernel (e.g. tl.dot for matmul, tl.sum/tl.max for reductions).",
            )

    # Imports ----------------------------------------------------------------------------------------
    def _check_module(self, module: str, node: ast.AST) -> None:
        for forbidden in self.config.python_forbidden_modules:
            if module == forbidden or module.startswith(forbidden + "."):
                self.report(
                    "python.forbidden-module",
                    node,
                    f"importing `{module}` is forbidden in candidates (introspection, FFI or process control); "
                    "a Triton solution needs only torch (for allocation) and triton.",
                )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._check_module(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                if module.split(".")[0] in ("torch", "triton"):
                    self.report(
                        "python.star-import",
                        node,
                        f"`from {module} import *` hides which names are used; import the names you need.",
                    )
                continue
            self._check_module(full, node)
            if full in _OPERATOR_MATMUL:
                self.report(
                    "python.matmul-operator",
                    node,
                    f"`{full}` is torch.matmul on tensors; compute the product in a @triton.jit kernel with tl.dot.",
                )
            if full.startswith("torch."):
                self._check_torch_name(full, node)
            elif module == "sys" and alias.name in _SYS_FORBIDDEN:
                self._sys_violation(alias.name, node)

    # Names and attributes ---------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        qualname = _qualname(node, self.aliases)
        if _DUNDER.match(node.attr) and node.attr not in _DUNDERS_ALLOWED:
            self.report(
                "python.reflection",
                node,
                f"`{node.attr}` access is reflection (or an operator in disguise, like `__matmul__`), "
                "forbidden in candidates; use the objects and operators directly.",
            )
        if qualname in _OPERATOR_MATMUL:
            self.report(
                "python.matmul-operator",
                node,
                f"`{qualname}` is torch.matmul on tensors; compute the product in a @triton.jit kernel with tl.dot.",
            )
        if qualname is None:
            self.generic_visit(node)
            return
        if qualname.startswith("torch."):
            self._check_torch_name(qualname, node)
            return  # the inner chain (torch.nn) is part of this name; do not report it twice
        if qualname.startswith("sys.") and qualname.split(".")[1] in _SYS_FORBIDDEN:
            self._sys_violation(qualname.split(".")[1], node)
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        target = self.aliases.get(node.id)
        if target and target.startswith("torch.") and isinstance(node.ctx, ast.Load):
            self._check_torch_name(target, node)

    def _sys_violation(self, name: str, node: ast.AST) -> None:
        self.report(
            "python.sys-modules",
            node,
            f"`sys.{name}` reaches the interpreter's module table or frames, which candidates may not touch.",
        )

    # Calls and operators ----------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            name = self.aliases.get(func.id, func.id)
            if name in _DYNAMIC or name == "importlib.import_module":
                self.report(
                    "python.dynamic-code",
                    node,
                    f"`{func.id}(...)` runs or imports code dynamically, which candidates may not do; "
                    "use plain import statements.",
                )
            elif name in ("setattr", "delattr"):
                self.report(
                    "python.reflection",
                    node,
                    f"`{name}(...)` can patch other modules and is forbidden; assign attributes of your own "
                    "objects directly.",
                )
            elif name == "getattr" and node.args:
                target = _qualname(node.args[0], self.aliases)
                computed = len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)
                if self._is_module(target) or computed:
                    self.report(
                        "python.reflection",
                        node,
                        "`getattr` on a module or with a computed name hides what is called; "
                        "write the attribute access out (e.g. `triton.cdiv`).",
                    )
            elif name in _INTROSPECTION:
                self.report("python.reflection", node, f"`{name}()` exposes namespaces and is forbidden.")
        elif isinstance(func, ast.Attribute) and self.jit_depth == 0:
            base = _qualname(func.value, self.aliases)
            is_module_call = base is not None and (
                base.split(".")[0] in ("torch", "triton", "tl", "math", "os", "sys", "time")
                or base in self.aliases.values()
            )
            if func.attr in self.forbidden_methods and not is_module_call:
                self.report(
                    "python.tensor-method",
                    node,
                    f"`.{func.attr}(...)` on a tensor runs a PyTorch kernel; do this work inside your "
                    "@triton.jit kernel (load, convert with .to(tl.<dtype>) and store there).",
                )
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.jit_depth == 0:
            self.report(
                "python.matmul-operator",
                node,
                "`@` on tensors is torch.matmul; compute the product in a @triton.jit kernel with tl.dot.",
            )
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) and self.jit_depth == 0:
            self.report(
                "python.matmul-operator",
                node,
                "`@=` on tensors is torch.matmul; compute the product in a @triton.jit kernel with tl.dot.",
            )
        self._check_targets([node.target])
        self.generic_visit(node)

    # Assignments into modules -----------------------------------------------------------------------
    def _check_targets(self, targets: list[ast.expr]) -> None:
        for target in targets:
            for sub in _flatten_targets(target):
                if isinstance(sub, ast.Attribute | ast.Subscript):
                    base = sub.value
                    qualname = _qualname(base, self.aliases)
                    if self._is_module(qualname):
                        self.report(
                            "python.module-assignment",
                            sub,
                            f"assigning into `{qualname}` patches a library the harness relies on; "
                            "candidates may not modify torch, triton, time or numpy.",
                        )

    def visit_Assign(self, node: ast.Assign) -> None:
        self._check_targets(node.targets)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_targets([node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._check_targets(node.targets)
        self.generic_visit(node)

    # Functions: track whether we are inside a @triton.jit body --------------------------------------
    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        jit = any(self._decorator_name(d) in _JIT_DECORATORS for d in node.decorator_list)
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.jit_depth += jit
        for statement in node.body:
            self.visit(statement)
        self.jit_depth -= jit

    def _decorator_name(self, decorator: ast.expr) -> str | None:
        return _qualname(decorator.func if isinstance(decorator, ast.Call) else decorator, self.aliases)

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function


def _flatten_targets(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _flatten_targets(element)
    elif isinstance(target, ast.Starred):
        yield from _flatten_targets(target.value)
    else:
        yield target


def _collect_aliases(tree: ast.Module) -> dict[str, str]:
    """Map local names to the dotted names they stand for (imports, then simple assignments, to a fixpoint)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    assignments = [
        (target.id, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    changed = True
    while changed:
        changed = False
        for name, value in assignments:
            resolved = _qualname(value, aliases)
            if (
                resolved
                and resolved.split(".")[0] in ("torch", "triton", "sys", "time")
                and aliases.get(name) != resolved
            ):
                aliases[name] = resolved
                changed = True
    return aliases


def check_python_source(path: str, source: str, config: PolicyConfig) -> list[PolicyViolation]:
    """Apply the Python/Triton AST rules to one ``.py`` source file."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        return [
            PolicyViolation(
                rule="python.syntax",
                file=path,
                line=error.lineno or 0,
                message=f"the file does not parse: {error.msg}; fix the syntax error.",
            )
        ]
    checker = _Checker(path, config, _collect_aliases(tree))
    checker.visit(tree)
    return checker.found
