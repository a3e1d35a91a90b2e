"""The prompt's example kernels and helper headers as FIBServe solutions, built through the build cache.

An example names the helper headers it relies on with ``#include "ptx_tma.cuh"``; the model reads those headers
in the same prompt and pastes them in. Here the quoted includes are resolved (transitively) against
``prompts/headers``, ``prompts/examples`` and this folder's ``data``, and shipped as extra solution sources, so the
build is exactly kernel file + the headers shown. Builds go through ``fibserve.build.build_solution`` with its
default cache (``FIBSERVE_CACHE_DIR``), so every kernel is compiled once per run whichever test needs it.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from fibserve.analysis.ptx import parse_ptx
from fibserve.analysis.sass import dump_sass
from fibserve.build import BuildResult, build_solution
from fibserve.trace import Solution
from mini_ptx_agent.prompts.registry import PROMPTS_DIR

DATA = Path(__file__).resolve().parent / "data"
SEARCH = (PROMPTS_DIR / "headers", PROMPTS_DIR / "examples", DATA)
_QUOTED_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.MULTILINE)


def quoted_includes(text: str) -> list[str]:
    """File names of the ``#include "..."`` lines of a source, in order."""
    return _QUOTED_INCLUDE.findall(text)


def find_source(name: str) -> Path:
    """The file called ``name`` in the headers, examples or test data folders."""
    for folder in SEARCH:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{name} is in none of {[str(f) for f in SEARCH]}")


def included_closure(path: Path) -> dict[str, str]:
    """Every file ``path`` includes with quotes, transitively: name -> text."""
    found: dict[str, str] = {}
    pending = quoted_includes(path.read_text())
    while pending:
        name = pending.pop()
        if name not in found:
            found[name] = find_source(name).read_text()
            pending += quoted_includes(found[name])
    return found


def example_solution(path: Path, arch: str, extra_units: tuple[Path, ...] = ()) -> Solution:
    """``path`` as ``kernel.cu`` (entry ``run``, tvm-ffi binding) plus the headers it includes, plus further
    translation units compiled into the same library (device-only smoke kernels)."""
    sources = [{"path": "kernel.cu", "content": path.read_text()}]
    sources += [{"path": unit.name, "content": unit.read_text()} for unit in extra_units]
    headers: dict[str, str] = {}
    for unit in (path, *extra_units):
        headers.update(included_closure(unit))
    sources += [{"path": name, "content": text} for name, text in sorted(headers.items())]
    return Solution.model_validate(
        {
            "name": path.stem,
            "definition": "prompt_example",
            "author": "ptxbench-tests",
            "spec": {
                "language": "cuda",
                "target_hardware": [arch],
                "entry_point": "kernel.cu::run",
                "binding": "tvm-ffi",
            },
            "sources": sources,
        }
    )


@dataclass
class BuiltExample:
    """A successful build and what its PTX and SASS contain."""

    build: BuildResult
    ptx: str
    ptx_families: Counter[str]
    sass_opcodes: Counter[str]
    sass_variants: Counter[str]
    """Full opcodes with modifiers of the notable SASS instructions (``UTMALDG.2D.MULTICAST``)."""


def build_kernel(path: Path, arch: str, extra_units: tuple[Path, ...] = ()) -> BuildResult:
    """Build ``path`` (and ``extra_units``) for ``arch`` through the build cache; skips without nvcc."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    result = build_solution(example_solution(path, arch, extra_units), arch=arch)
    assert result.ok, f"{path.name} for {arch}: {result.status}\n{result.log}"
    return result


def build_example(path: Path, arch: str, extra_units: tuple[Path, ...] = ()) -> BuiltExample:
    """:func:`build_kernel`, then the PTX families and SASS opcodes of the build; skips without cuobjdump."""
    result = build_kernel(path, arch, extra_units)
    ptx = "\n".join(p.read_text() for p in result.ptx_paths)
    report = dump_sass(result.cubin_paths)
    if report.error is not None:
        pytest.skip(f"SASS not readable here: {report.error}")
    opcodes: Counter[str] = Counter()
    variants: Counter[str] = Counter()
    for kernel in report.kernels:
        opcodes.update(kernel.opcodes)
        variants.update(kernel.variants)
    return BuiltExample(result, ptx, Counter(parse_ptx(ptx).families), opcodes, variants)
