"""AST policy for Triton and Python solutions: a module allowlist, no torch compute in Triton, no monkeypatching or dynamic imports.

A Triton candidate's host wrapper may allocate outputs and launch ``@triton.jit`` kernels; it may not hand
the work to PyTorch or tamper with the harness. A Python solution (a reference-style baseline) may compute
with torch. Both may import only the modules of an allowlist (:attr:`PolicyConfig.allowed_modules`) and their
own files, and neither may reach the interpreter's internals. Names are resolved through imports and simple
assignments, so ``import torch as t; t.matmul``, ``from torch import matmul as mm`` and
``F = torch.nn.functional`` are all seen as ``torch.matmul``/``torch.nn.functional``. Rules (ids as reported):

Both languages:

- ``python.syntax``: the file does not parse.
- ``python.forbidden-module``: importing a module outside the allowlist (``os``, ``subprocess``, ``socket``,
  ``ctypes``, ``runpy``, ``urllib``, ``fibserve``...), or reaching one as an attribute (``torch.os``).
- ``python.star-import``: ``from torch import *`` hides which names are used.
- ``python.dynamic-code``: ``__import__``, ``exec``, ``eval``, ``compile``, called or passed around.
- ``python.builtin``: ``open``, ``input``, ``breakpoint`` (files and consoles are not a kernel's business).
- ``python.reflection``: ``setattr``/``delattr`` anywhere, ``getattr`` on a module, with a computed name or
  passed around as a value, ``globals()``/``vars()``/``locals()``, any dunder name or attribute
  (``__builtins__``, ``__dict__``, ``__class__``, ``__matmul__``...) except ``__name__``, ``__doc__``,
  ``__init__``, ``__len__``, ``__version__``, ``__file__``, frame and code attributes (``f_globals``,
  ``gi_frame``, ``tb_frame``...), and ``typing.get_type_hints``/``ForwardRef`` (they evaluate strings).
- ``python.sys-modules``: ``sys.modules``, ``sys._getframe``, ``sys.settrace``... (also caught as ``sys``).
- ``python.module-assignment``: assigning or deleting an attribute of ``torch``/``triton``/``time``/``numpy``.

Triton only:

- ``python.torch-compute``: a ``torch`` name outside the allowlist (compute ops, ``torch.nn.functional``...).
- ``python.allocation``: a ``torch`` allocator other than the ``empty``/``zeros`` family.
- ``python.tensor-method``: a compute method (``.matmul``, ``.sum``, ``.to``...) called outside ``@triton.jit``.
- ``python.matmul-operator``: ``@`` outside ``@triton.jit`` functions, and ``operator.matmul``.

Python only: ``python.torch-escape``: torch's ways to load native code or unpickle (``torch.utils.cpp_extension``,
``torch.ops.load_library``, ``torch.load``, ``torch.hub``, ``torch.multiprocessing``...).

Limits (documented, not hidden): the analysis is flow-insensitive and does not follow values through
containers, function returns or ``**kwargs``; the sandbox (:mod:`fibserve.sandbox`) and the output checks are
the backstop.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator

from fibserve.trace.python_ast import parse_python

from . import python_names as names
from .policy_config import PolicyConfig, PolicyViolation
from .python_names import module_allowed


def _qualname(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """Dotted name of ``node`` with import aliases resolved, or None if it is not a plain name chain."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _qualname(node.value, aliases)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, config: PolicyConfig, aliases: dict[str, str], language: str,
                 local: Collection[str]) -> None:  # fmt: skip
        self.path = path
        self.config = config
        self.aliases = aliases
        self.triton = language == "triton"
        self.language = language
        self.modules = config.allowed_modules.get(language, [])  # type: ignore[call-overload]
        self.local = local
        self.allowed = set(config.torch_allowed)
        self.forbidden_methods = set(config.tensor_methods_forbidden)
        self.protected = tuple(config.protected_modules)
        self.jit_depth = 0
        self.found: list[PolicyViolation] = []
        self._accepted: set[int] = set()
        """ids of ``Name`` nodes already judged as the function of a call."""

    def report(self, rule: str, node: ast.AST, message: str) -> None:
        self.found.append(
            PolicyViolation(rule=rule, file=self.path, line=getattr(node, "lineno", 0), message=message)
        )

    def _is_module(self, qualname: str | None) -> bool:
        return qualname is not None and any(
            qualname == module or qualname.startswith(module + ".") for module in self.protected
        )

    def _check_torch_name(self, qualname: str, node: ast.AST) -> None:
        if not self.triton:
            if qualname.startswith(names.TORCH_ESCAPES):
                self.report(
                    "python.torch-escape",
                    node,
                    f"`{qualname}` loads native code, unpickles data or starts processes, which solutions may "
                    "not do; compute with torch operations only.",
                )
            return
        if qualname in self.allowed or names.DTYPE.match(qualname) or qualname == "torch":
            return
        short = qualname.removeprefix("torch.")
        if short in names.ALLOCATORS:
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

    def _check_dotted(self, qualname: str, node: ast.AST) -> bool:
        """Report a dotted name that reaches a refused module or an interpreter internal; True if reported."""
        parts = qualname.split(".")
        if module := next((p for p in parts if p in names.MODULE_NAMES), None):
            self.report(
                "python.forbidden-module",
                node,
                f"`{qualname}` reaches the module `{module}` (files, processes, the network or the "
                "interpreter), which solutions may not use.",
            )
            return True
        if attribute := next((p for p in parts[1:] if p in names.INTERNAL_ATTRIBUTES), None):
            self.report(
                "python.reflection",
                node,
                f"`{attribute}` reaches the interpreter's frames or evaluates strings.",
            )
            return True
        return False

    # Imports ----------------------------------------------------------------------------------------
    def _check_module(self, module: str, node: ast.AST) -> None:
        if self._check_dotted(module, node):
            return
        if not module_allowed(module, self.modules, self.local):
            allowed = ", ".join(m.removesuffix(".*") for m in self.modules)
            self.report(
                "python.forbidden-module",
                node,
                f"importing `{module}` is not allowed in {self.language} solutions: they may import only "
                f"{allowed} and their own files.",
            )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:  # the solution's own files
            return
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
            self._check_dotted(full, node)
            if full in names.OPERATOR_MATMUL:
                self.report(
                    "python.matmul-operator",
                    node,
                    f"`{full}` is torch.matmul on tensors; compute the product in a @triton.jit kernel with tl.dot.",
                )
            if full.startswith("torch."):
                self._check_torch_name(full, node)
            elif module == "sys" and alias.name in names.SYS_FORBIDDEN:
                self._sys_violation(alias.name, node)

    # Names and attributes ---------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        qualname = _qualname(node, self.aliases)
        if names.DUNDER.match(node.attr) and node.attr not in names.DUNDERS_ALLOWED:
            self.report(
                "python.reflection",
                node,
                f"`{node.attr}` access is reflection (or an operator in disguise, like `__matmul__`), "
                "forbidden in candidates; use the objects and operators directly.",
            )
        if qualname in names.OPERATOR_MATMUL:
            self.report(
                "python.matmul-operator",
                node,
                f"`{qualname}` is torch.matmul on tensors; compute the product in a @triton.jit kernel with tl.dot.",
            )
        if qualname is None:
            self._check_dotted(f"?.{node.attr}", node)
            self.generic_visit(node)
            return
        if qualname.startswith("sys.") and qualname.split(".")[1] in names.SYS_FORBIDDEN:
            self._sys_violation(qualname.split(".")[1], node)
            return
        if self._check_dotted(qualname, node):
            return
        if qualname.startswith("torch."):
            self._check_torch_name(qualname, node)
            return  # the inner chain (torch.nn) is part of this name; do not report it twice
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if id(node) in self._accepted or not isinstance(node.ctx, ast.Load):
            return
        if names.DUNDER.match(node.id) and node.id not in names.DUNDERS_ALLOWED:
            self.report("python.reflection", node, f"`{node.id}` reaches the interpreter's internals.")
        elif node.id in names.DYNAMIC:
            self.report(
                "python.dynamic-code", node, f"`{node.id}` runs code from strings; candidates may not."
            )
        elif node.id in names.INTROSPECTION | {"getattr", "setattr", "delattr"}:
            self.report(
                "python.reflection", node, f"`{node.id}` passed around as a value hides what is called."
            )
        elif node.id in names.CONSOLE_AND_FILES:
            self.report("python.builtin", node, f"`{node.id}` opens files or a console; solutions may not.")
        target = self.aliases.get(node.id)
        if target and target.startswith("torch."):
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
            self._check_named_call(func, node)
        elif isinstance(func, ast.Attribute) and self.jit_depth == 0 and self.triton:
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

    def _check_named_call(self, func: ast.Name, node: ast.Call) -> None:
        name = self.aliases.get(func.id, func.id)
        if name in names.DYNAMIC or name == "importlib.import_module":
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
            if self._is_module(target) or computed or target in self.aliases.values():
                self.report(
                    "python.reflection",
                    node,
                    "`getattr` on a module or with a computed name hides what is called; "
                    "write the attribute access out (e.g. `triton.cdiv`).",
                )
            elif isinstance(node.args[1], ast.Constant):
                self._check_dotted(f"?.{node.args[1].value}", node)
        elif name in names.INTROSPECTION:
            self.report("python.reflection", node, f"`{name}()` exposes namespaces and is forbidden.")
        elif name in names.CONSOLE_AND_FILES:
            self.report("python.builtin", node, f"`{name}(...)` opens files or a console; solutions may not.")
        else:
            return
        self._accepted.add(id(func))  # judged here; visit_Name must not report it a second time

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.jit_depth == 0 and self.triton:
            self.report(
                "python.matmul-operator",
                node,
                "`@` on tensors is torch.matmul; compute the product in a @triton.jit kernel with tl.dot.",
            )
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) and self.jit_depth == 0 and self.triton:
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
                    qualname = _qualname(sub.value, self.aliases)
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
        jit = any(self._decorator_name(d) in names.JIT_DECORATORS for d in node.decorator_list)
        for decorator in node.decorator_list:
            self.visit(decorator)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
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


def check_python_source(
    path: str, source: str, config: PolicyConfig, *, language: str = "triton", local: Collection[str] = ()
) -> list[PolicyViolation]:
    """Apply the rules of ``language`` (``triton`` or ``python``) to one ``.py`` source file; ``local`` are
    the solution's own top-level module names (importable besides the allowlist)."""
    try:
        tree = parse_python(source, filename=path)
    except SyntaxError as error:
        return [
            PolicyViolation(
                rule="python.syntax",
                file=path,
                line=error.lineno or 0,
                message=f"the file does not parse: {error.msg}; fix the syntax error.",
            )
        ]
    checker = _Checker(path, config, _collect_aliases(tree), language, local)
    checker.visit(tree)
    return checker.found
