"""Which cuobjdump disassembled the SASS, and a warning when its CUDA release is not the compiler's.

The stand-in cuobjdump is a real executable on PATH: it answers ``--version`` with the release the test picks
and hands every other call to the server's real cuobjdump, so the opcodes still come from a real disassembly.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

import fibserve
import pytest
from fibserve.analysis.sass import find_cuobjdump, sass_tool
from fibserve.build.toolchain import cuda_release, find_nvcc, nvcc_version
from fibserve.cli.tables import print_analysis
from kernel_fixtures import fixture_solution
from rich.console import Console

REAL_CUOBJDUMP = find_cuobjdump()

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(REAL_CUOBJDUMP is None, reason="no cuobjdump on PATH or in the Triton wheel"),
]


@pytest.fixture
def cuobjdump_of_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Path]]:
    """Put a cuobjdump claiming CUDA ``release`` first on PATH; returns its path."""

    def install(release: str) -> Path:
        tool = tmp_path / f"cuda-{release}" / "cuobjdump"
        tool.parent.mkdir()
        tool.write_text(
            "#!/bin/sh\n"
            f'if [ "$1" = --version ]; then echo "Cuda compilation tools, release {release}, V{release}.1"; exit 0; fi\n'
            f'exec {shlex.quote(str(REAL_CUOBJDUMP))} "$@"\n'
        )
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
        find_cuobjdump.cache_clear()
        return tool

    yield install
    find_cuobjdump.cache_clear()  # the next lookup sees the restored PATH


def _nvcc_release() -> str:
    release = cuda_release(nvcc_version(find_nvcc()))
    assert release is not None
    return release


def test_the_disassembler_is_named_by_path_and_cuda_release() -> None:
    tool, version = sass_tool()
    assert tool == REAL_CUOBJDUMP and Path(tool).is_absolute()
    assert cuda_release(version) is not None, version  # the release line, not "Build cuda_12.8.r12.8/..."


def test_a_disassembler_of_another_release_gets_a_warning(
    cuobjdump_of_release: Callable[[str], Path], build_cache: Path
) -> None:
    tool = cuobjdump_of_release("9.9")
    analysis = fibserve.check(fixture_solution("simt_add.cu"), cache_dir=build_cache)
    assert analysis.status == "clean" and analysis.sass_opcodes  # still disassembled, by the real tool
    assert analysis.sass_tool == str(tool) and "release 9.9" in (analysis.sass_tool_version or "")
    warnings = [note for note in analysis.notes if note.startswith("warning: SASS disassembled by")]
    assert len(warnings) == 1, analysis.notes
    assert f"cuobjdump 9.9 ({tool})" in warnings[0] and f"nvcc {_nvcc_release()}" in warnings[0]

    console = Console(record=True, width=200)
    print_analysis(analysis, console)
    text = console.export_text()
    assert f"SASS from {tool} (Cuda compilation tools, release 9.9, V9.9.1)" in text
    assert "warning: SASS disassembled by cuobjdump 9.9" in text
    release = _nvcc_release()
    # Where no cuobjdump of the compiler's release is installed, the warning says what to install ...
    assert (
        f"install the CUDA {release} cuobjdump (NVIDIA's package cuda-cuobjdump-{release.replace('.', '-')}"
        in " ".join(text.split())
    )
    # ... and says it once per process: the next kernel printed (same machine, same tools) keeps quiet.
    again = Console(record=True, width=200)
    print_analysis(analysis, again)
    second = again.export_text()
    assert "SASS disassembled by" not in second and "SASS from" in second
    assert (
        len([note for note in analysis.notes if "SASS disassembled by" in note]) == 1
    )  # the record keeps it


def test_a_disassembler_of_the_compilers_release_gets_none(
    cuobjdump_of_release: Callable[[str], Path], build_cache: Path
) -> None:
    tool = cuobjdump_of_release(_nvcc_release())
    analysis = fibserve.check(fixture_solution("simt_add.cu"), cache_dir=build_cache)
    assert analysis.sass_tool == str(tool)  # the analysis cached with another tool was not reused
    assert not [note for note in analysis.notes if "SASS disassembled by" in note], analysis.notes
