"""Parse Python source into an :mod:`ast` tree, one thread at a time.

CPython 3.11 keeps the recursion depth of its AST constructor in interpreter-wide state, so two threads
inside :func:`ast.parse` at once (a thread switch during the tree's construction, for example when the
garbage collector runs a finalizer) can end one of them with ``SystemError: AST constructor recursion depth
mismatch`` (python/cpython#106905). The experiment runner evaluates trajectories on threads, and every
solution's validation parses its entry point, so every parse in FIBServe goes through :func:`parse_python`.
"""

from __future__ import annotations

import ast
import threading

_PARSE_LOCK = threading.Lock()


def parse_python(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """The module tree of Python ``source``, parsed under a process-wide lock (see the module docstring).

    Raises:
        SyntaxError: ``source`` is not valid Python (``filename`` names it in the error).
        ValueError: ``source`` contains a NUL byte.
    """
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)
