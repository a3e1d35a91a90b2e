"""Parsing Python on several threads at once: CPython 3.11's AST constructor shares its recursion depth
between threads (python/cpython#106905), which failed an experiment's trajectory on CI with ``SystemError: AST
constructor recursion depth mismatch``. Threads that parse while the garbage collector runs finalizers (which
let another thread in mid-construction) show it; :func:`parse_python` holds them apart."""

from __future__ import annotations

import ast
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fibserve.trace.python_ast import parse_python

SOURCE = Path(ast.__file__).read_text()  # 1,800 lines of Python


class _Finalized:
    """A cycle's member whose finalizer hands the GIL to another thread, from inside the collector."""

    def __del__(self) -> None:
        time.sleep(0)


def _system_errors(parse: Callable[[str], object], threads: int = 4, rounds: int = 15) -> list[str]:
    errors: list[str] = []

    def work() -> None:
        for _ in range(rounds):
            cycle = _Finalized()
            cycle.self = cycle  # collected by the cyclic GC, at some allocation inside the next parse
            try:
                parse(SOURCE)
            except SystemError as error:
                errors.append(str(error))

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return errors


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="shown on CPython 3.11, which CI runs")
def test_concurrent_bare_parses_can_fail():
    """The control: without the lock, this load failed a parse in every one of 6 runs on the 2-core machine (one try of up to 10 suffices)."""
    assert any(_system_errors(ast.parse) for _ in range(10))


def test_concurrent_parses_through_parse_python_never_fail():
    assert _system_errors(parse_python) == []


def test_parse_python_names_the_file_in_a_syntax_error():
    with pytest.raises(SyntaxError) as error:
        parse_python("def broken(:\n", filename="kernel.py")
    assert error.value.filename == "kernel.py"
