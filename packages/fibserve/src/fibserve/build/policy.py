"""Source policy: what a candidate may not use (no vendor GEMM/DNN libraries in CUDA, no torch compute in Triton).

A benchmark of kernel *authors* is void if a candidate hands the work to a vendor library or to PyTorch.
The policy runs before any build and reports every violation with its rule id, file, line and a sentence a
model can act on. It is configurable per benchmark through :class:`~fibserve.build.policy_config.PolicyConfig`.

CUDA/C++ rules (comments and string literals ignored, see :mod:`fibserve.build.c_source`):

- ``cuda.library-header``: ``#include`` of a cuBLAS, cuBLASLt, cuDNN or CUTLASS/CuTe header.
- ``cuda.library-call``: an identifier of those libraries in code (``cublasGemmEx``, ``cudnnCreate``,
  ``cutlass::``, ``cute::``).
- ``cuda.link-dependency``: a ``spec.dependencies`` entry naming one of them (``-lcublas``, ``cutlass``).
- ``cuda.dynamic-loading``: ``dlopen``/``dlsym``, which would reach the same libraries by name at run time.
- ``cuda.include-path``: an ``#include`` of an absolute path, of a path with a ``..`` component, or of a
  macro (a computed include): a header is named relative to the solution or the include path, so the
  preprocessor cannot quote a file of the build machine into the compile log (nvcc also runs in a sandbox
  that has no such files: :mod:`fibserve.sandbox`).

Python/Triton rules (a module allowlist per language, and the torch rules of Triton) are in
:mod:`fibserve.build.python_policy`, the rules on which files they may ship (encodings, bytecode, names that
shadow modules) in :mod:`fibserve.build.python_files`.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from array import array
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .c_source import StrippedSource, strip_c_source
from .policy_config import PolicyConfig, PolicyViolation
from .python_files import check_python_files
from .python_policy import check_python_source

if TYPE_CHECKING:
    from fibserve.trace import Solution

# Header prefixes and identifier patterns per library family. Sources: the public header names shipped by
# the CUDA toolkit (cublas_v2.h, cublasLt.h, cublasXt.h), cuDNN (cudnn*.h, cudnn_frontend*.h) and
# CUTLASS (cutlass/..., cute/...).
_HEADERS: dict[str, re.Pattern[str]] = {
    "cublas": re.compile(r"(^|/)cublas\w*\.h(pp)?$", re.IGNORECASE),
    "cudnn": re.compile(r"(^|/)cudnn\w*\.h(pp)?$", re.IGNORECASE),
    "cutlass": re.compile(r"^(cutlass|cute)/", re.IGNORECASE),
}
_IDENTIFIERS: dict[str, re.Pattern[str]] = {
    "cublas": re.compile(r"\b(cublas\w*|CUBLAS_\w+)"),
    "cudnn": re.compile(r"\b(cudnn\w*|CUDNN_\w+)"),
    "cutlass": re.compile(r"\b(cutlass|cute)\s*::"),
}
_DEPENDENCY: dict[str, re.Pattern[str]] = {
    "cublas": re.compile(r"cublas", re.IGNORECASE),
    "cudnn": re.compile(r"cudnn", re.IGNORECASE),
    "cutlass": re.compile(r"cutlass|\bcute\b", re.IGNORECASE),
}
LIBRARY_NAMES: dict[str, str] = {"cublas": "cuBLAS/cuBLASLt", "cudnn": "cuDNN", "cutlass": "CUTLASS/CuTe"}
_DYNAMIC_LOADING = re.compile(r"\b(dlopen|dlsym|dlvsym|dlmopen)\s*\(")
_C_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".hxx", ".inl")


def check_include_paths(path: str, stripped: StrippedSource) -> Iterator[PolicyViolation]:
    """``cuda.include-path`` violations of one C-family file (``stripped``: :func:`strip_c_source` of it), one
    at a time: absolute, ``..`` or computed includes."""
    for line, header in stripped.includes():
        parts = header.replace("\\", "/").split("/")
        if header.startswith(("/", "~")) or ".." in parts:
            yield PolicyViolation(
                rule="cuda.include-path",
                file=path,
                line=line,
                message=f"#include of {header!r} reaches outside the solution: name headers relative to "
                'your own files or the include path (e.g. "common.cuh", <cuda_bf16.h>), with no leading '
                "'/' and no '..'.",
            )
    for line, text in stripped.computed_includes():
        yield PolicyViolation(
            rule="cuda.include-path",
            file=path,
            line=line,
            message=f"#include {text} names its header through a macro; write the header name "
            'itself (#include "file.cuh" or #include <header.h>).',
        )


def check_cuda_source(path: str, source: str, config: PolicyConfig) -> Iterator[PolicyViolation]:
    """Apply the CUDA/C++ rules to one source file (comments and string literals are ignored).

    Yields the violations one at a time: a source of 8 MiB can hold about a million, which
    :func:`check_policy` counts without keeping them all (kept as a list, they took about 620 MB); the
    include directives are read one at a time too (:class:`~fibserve.build.c_source.StrippedSource`).
    """
    stripped = strip_c_source(source)
    yield from check_include_paths(path, stripped)
    # lines holding an include directive (ascending, 8 bytes each): a library call there was reported as a header
    include_lines = array("q", (line for line, _header in stripped.includes()))
    for library in config.cuda_forbidden_libraries:
        name = LIBRARY_NAMES[library]
        for line, header in stripped.includes():
            if _HEADERS[library].search(header):
                yield PolicyViolation(
                    rule="cuda.library-header",
                    file=path,
                    line=line,
                    message=f"#include <{header}> uses {name}, which this benchmark forbids; remove it and "
                    "implement the computation in your own kernel (inline PTX or CUDA C++).",
                )
        last = 0  # one violation a line: the matches come in line order
        for match in _IDENTIFIERS[library].finditer(stripped.code):
            line = stripped.line_of(match.start())
            at = bisect.bisect_left(include_lines, line)
            if line == last or (at < len(include_lines) and include_lines[at] == line):
                continue
            last = line
            yield PolicyViolation(
                rule="cuda.library-call",
                file=path,
                line=line,
                message=f"`{match.group(0).strip()}` is {name} library code, which this benchmark forbids; "
                "write the kernel yourself (for GEMMs on sm_90a: wgmma with TMA loads).",
            )
    if not config.cuda_allow_dynamic_loading:
        for match in _DYNAMIC_LOADING.finditer(stripped.code):
            yield PolicyViolation(
                rule="cuda.dynamic-loading",
                file=path,
                line=stripped.line_of(match.start()),
                message=f"`{match.group(1)}` loads libraries at run time, which this benchmark forbids; "
                "call only your own kernels and the CUDA runtime/driver API.",
            )


def check_dependencies(dependencies: list[str], config: PolicyConfig) -> list[PolicyViolation]:
    """Reject ``spec.dependencies`` entries (link flags or package names) naming a forbidden library."""
    found = []
    for dependency in dependencies:
        for library in config.cuda_forbidden_libraries:
            if _DEPENDENCY[library].search(dependency):
                found.append(
                    PolicyViolation(
                        rule="cuda.link-dependency",
                        file="spec.dependencies",
                        line=0,
                        message=f"dependency {dependency!r} links {LIBRARY_NAMES[library]}, which this "
                        "benchmark forbids; remove it from spec.dependencies.",
                    )
                )
    return found


MAX_VIOLATIONS = 100
"""Violations listed at most; the last one listed counts the rest. One 8 MiB source of `dlopen(` lines made
about a million, each in the analysis, the reply and the model's feedback."""


def check_policy(solution: Solution, config: PolicyConfig | None = None) -> list[PolicyViolation]:
    """Check every source of ``solution`` against ``config`` (default :class:`PolicyConfig`).

    CUDA/C++ rules apply to C-family files of ``cuda``/``cpp`` solutions; the Python AST rules apply to
    ``.py`` files of solutions whose language is in ``config.python_languages``.

    Returns:
        The violations, ordered by file and line, at most :data:`MAX_VIOLATIONS` (the last then counts the
        rest); empty when the solution is clean.
    """
    config = config or PolicyConfig()
    if not config.enabled:
        return []
    language = str(solution.spec.language.value)
    found: list[Iterable[PolicyViolation]] = []
    if language in ("cuda", "cpp"):
        found.append(check_dependencies(list(solution.spec.dependencies), config))
        for source in solution.sources:
            if source.path.lower().endswith(_C_SUFFIXES):
                found.append(check_cuda_source(source.path, source.content, config))
    elif language in config.python_languages:
        found.append(check_python_files((source.path, source.content) for source in solution.sources))
        local = {source.path.split("/")[0].removesuffix(".py") for source in solution.sources}
        for source in solution.sources:
            if source.path.endswith(".py"):
                found.append(
                    check_python_source(source.path, source.content, config, language=language, local=local)
                )
    total = 0

    def counted() -> Iterator[PolicyViolation]:
        nonlocal total
        for violation in itertools.chain.from_iterable(found):
            total += 1
            yield violation

    # the first MAX_VIOLATIONS in (file, line, rule) order, as a stable sort would give them, keeping no more
    listed = heapq.nsmallest(MAX_VIOLATIONS, counted(), key=lambda v: (v.file, v.line, v.rule))
    if total > MAX_VIOLATIONS:
        last = listed[-1]
        listed[-1] = PolicyViolation(
            rule=last.rule,
            file=last.file,
            line=last.line,
            message=f"... and {total - MAX_VIOLATIONS + 1} more violations from this line on, not listed; "
            "fix the ones above first.",
        )
    return listed
