"""Which files a Python or Triton solution may ship, so that the policy reads what the importer will run.

The AST policy (:mod:`fibserve.build.python_policy`) judges the text of each ``.py`` source; the worker imports
the bytes the builder wrote. These rules close the gaps between the two (ids as reported):

- ``python.encoding``: a source-encoding declaration other than UTF-8 (PEP 263: ``# -*- coding: utf-7 -*-`` in
  the first two lines). The builder writes each file as UTF-8, the policy parses that text, but the importer
  decodes the bytes by the declaration, so ``utf-7`` or ``rot13``-style codecs would run other code than the
  policy read. The declared encoding is found exactly as the importer finds it (``tokenize.detect_encoding``).
- ``python.compiled-file``: files the import system can load as code without reading a ``.py`` source:
  ``.pyc``/``.pyo`` (a sourceless or unchecked-hash bytecode file is loaded as is), anything under
  ``__pycache__``, extension modules (``.so``, ``.pyd``) and ``.pth`` files.
- ``python.shadowing``: a file or directory at the top of the solution named like a module the candidate or
  the harness imports (``math.py``, ``torch/``, ``numpy.py``, ``fibserve/``). The solution's directory is on
  ``sys.path`` for absolute sibling imports, so such a file would replace that module for the whole worker.
  The names refused are the standard library's, the interpreter's built-in modules and every top-level module
  installed beside the service (the worker runs the same environment).

Text that is not valid Unicode (a lone surrogate, which has no UTF-8 bytes) never gets this far: the
Solution model refuses it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import io
import pkgutil
import site
import sys
import tokenize
from collections.abc import Iterable

from .policy_config import PolicyViolation

_UTF8 = ("utf-8", "utf-8-sig")
_CODE_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".pth")
_ALSO_RESERVED = {"fibserve", "mini_ptx_agent", "sitecustomize", "usercustomize", "__main__"}
"""Names the harness imports or the interpreter looks up at start-up, whether or not they are installed."""


@functools.lru_cache(maxsize=1)
def reserved_module_names() -> frozenset[str]:
    """Top-level module names a solution's files may not take (see the module docstring)."""
    installed = set(importlib.metadata.packages_distributions())
    site_dirs = [*site.getsitepackages(), site.getusersitepackages()]
    installed |= {module.name for module in pkgutil.iter_modules(site_dirs)}
    return frozenset({*sys.stdlib_module_names, *sys.builtin_module_names, *installed, *_ALSO_RESERVED})


def declared_encoding(content: str) -> str | None:
    """The encoding Python's importer would use for ``content`` written as UTF-8 bytes, or None when the
    declaration is one it rejects (an unknown codec)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(content.encode("utf-8")).readline)
    except SyntaxError:
        return None
    return encoding


def check_python_files(sources: Iterable[tuple[str, str]]) -> list[PolicyViolation]:
    """The file rules of a Python/Triton solution over its ``(path, content)`` pairs (the reserved names are
    fixed by the environment the worker runs, not by the benchmark's policy)."""
    found: list[PolicyViolation] = []
    reserved = reserved_module_names()
    for path, content in sources:
        parts = path.split("/")
        top = parts[0].removesuffix(".py")
        if path.endswith(_CODE_SUFFIXES) or "__pycache__" in parts:
            found.append(
                PolicyViolation(
                    rule="python.compiled-file",
                    file=path,
                    line=0,
                    message="the import system can load this file as code without a .py source the policy "
                    "can read; ship Python sources (.py) only.",
                )
            )
        if top in reserved and (len(parts) > 1 or path.endswith(".py")):
            found.append(
                PolicyViolation(
                    rule="python.shadowing",
                    file=path,
                    line=0,
                    message=f"`{top}` is the name of a module the harness or your code imports (the standard "
                    f"library or an installed package); rename your file, e.g. to `my_{top}`.",
                )
            )
        if path.endswith(".py") and declared_encoding(content) not in _UTF8:
            found.append(
                PolicyViolation(
                    rule="python.encoding",
                    file=path,
                    line=1,
                    message="the file declares a source encoding other than UTF-8, so Python would run "
                    "different code from the text checked here; remove the coding declaration.",
                )
            )
    return found
