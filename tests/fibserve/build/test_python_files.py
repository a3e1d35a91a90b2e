"""The policy reads the bytes the importer will run (:mod:`fibserve.build.python_files`).

Before: a source-encoding declaration made Python decode other code than the policy parsed (``fibserve check``
called it clean while ``os`` ran), and a solution could ship modules named like standard ones beside
``kernel.py`` and replace them for the candidate and the harness.
"""

from __future__ import annotations

import pytest
from fibserve.build import check_policy
from fibserve.trace import Solution

CLEAN = "import torch\n\n\ndef run(x, y, z):\n    pass\n"

# The comment's second half is a UTF-7 encoded newline: Python, honouring the declaration, reads the next
# words as a statement, while the text the policy parses holds only a comment.
UTF7_SMUGGLE = "# -*- coding: utf-7 -*-\n# +AAo-import os; os.getcwd()\n" + CLEAN


def _triton(*sources: tuple[str, str], language: str = "triton") -> Solution:
    return Solution.model_validate(
        {
            "name": "files",
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {"language": language, "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
            "sources": [{"path": path, "content": content} for path, content in sources],
        }
    )


def _rules(solution: Solution) -> list[tuple[str, str]]:
    return sorted((v.rule, v.file) for v in check_policy(solution))


def test_the_smuggled_statement_is_real() -> None:
    """The importer decodes the file as UTF-7 and finds ``import os`` on a line of its own."""
    decoded = UTF7_SMUGGLE.encode("utf-8").decode("utf-7")
    assert "\nimport os; os.getcwd()" in decoded


@pytest.mark.parametrize("language", ["triton", "python"])
def test_an_encoding_declaration_other_than_utf8_is_refused(language: str) -> None:
    assert _rules(_triton(("kernel.py", UTF7_SMUGGLE), language=language)) == [
        ("python.encoding", "kernel.py")
    ]
    declared_utf8 = "# -*- coding: utf-8 -*-\n" + CLEAN
    assert _rules(_triton(("kernel.py", declared_utf8), language=language)) == []


@pytest.mark.parametrize(
    "name", ["math.py", "os.py", "torch/__init__.py", "numpy.py", "fibserve/x.py", "triton.py"]
)
def test_files_named_like_a_module_the_worker_imports_are_refused(name: str) -> None:
    rules = _rules(_triton(("kernel.py", CLEAN), (name, "x = 1\n")))
    assert ("python.shadowing", name) in rules


def test_ordinary_helper_modules_pass() -> None:
    helpers = (("kernel.py", CLEAN), ("my_utils.py", "x = 1\n"), ("tiles/gemm.py", "y = 2\n"))
    assert _rules(_triton(*helpers)) == []


@pytest.mark.parametrize("name", ["__pycache__/kernel.cpython-311.pyc", "helper.pyc", "fast.so", "extra.pth"])
def test_files_the_importer_loads_without_a_source_are_refused(name: str) -> None:
    assert ("python.compiled-file", name) in _rules(_triton(("kernel.py", CLEAN), (name, "\x00")))


def test_text_that_is_not_unicode_is_refused_by_the_solution_model() -> None:
    """A JSON client can send a lone surrogate (``"\\udcff"``); it has no UTF-8 bytes for the builder to write
    (the evaluator used to crash hashing it: an internal error instead of a clear refusal)."""
    with pytest.raises(ValueError, match="not valid Unicode text at line 6"):
        _triton(("kernel.py", CLEAN + "# \udcff\n"))
