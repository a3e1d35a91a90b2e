"""The hand-written kernels in tests/fibserve/kernels, wrapped as solutions (for the analysis and build tests),
and CUDA solutions made from a source text.

Imported as ``from kernel_fixtures import ...``: tests/fibserve is on ``sys.path`` because pytest (default
``prepend`` import mode) inserts the directory of tests/fibserve/conftest.py before it imports any test below.
"""

from __future__ import annotations

from pathlib import Path

from fibserve.trace import Solution

KERNELS = Path(__file__).resolve().parent / "kernels"


def fixture_solution(file_name: str, *, entry_file: str | None = None) -> Solution:
    """Wrap tests/fibserve/kernels/<file_name> as a Solution the way `fibserve check FILE` does."""
    from fibserve.static_analysis import solution_from_path

    solution = solution_from_path(KERNELS / file_name, "test_definition")
    if entry_file is not None:
        solution = solution.model_copy(update={"name": entry_file})
    return solution


def cuda_solution(
    content: str, *, name: str = "s", definition: str = "d", dependencies: list[str] | None = None
) -> Solution:
    """A tvm-ffi CUDA Solution whose one source ``kernel.cu`` is ``content``."""
    return Solution.model_validate(
        {
            "name": name,
            "definition": definition,
            "author": "fibserve tests",
            "spec": {
                "language": "cuda",
                "target_hardware": ["sm_90a"],
                "entry_point": "kernel.cu::run",
                "binding": "tvm-ffi",
                "dependencies": dependencies or [],
            },
            "sources": [{"path": "kernel.cu", "content": content}],
        }
    )


PLANTED_PTXAS_LOG = (
    "#warning ptxas info    : Compiling entry function 'x' for 'sm_90a'\n"
    f"#warning ptxas info    : Used {'9' * 4400} registers\n"
)
"""Lines that make the host compiler echo ptxas's words into the build log, with a register count of 4,400 digits:
int() refused it with a ValueError that ended the static analysis before the binary policy ran."""


PLANTED_PTXAS_MESSAGE = (
    '#pragma message("planted\\n'
    "ptxas info    : Compiling entry function 'x' for 'sm_90a'\\n"
    "ptxas info    : Function properties for x\\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\\n"
    "ptxas info    : Used 77 registers, used 0 barriers\\n"
    "ptxas info    : Compiling entry function '_Z10add_kernelPKfS0_Pfl' for 'sm_90a'\\n"
    'ptxas info    : Used 200 registers, used 3 barriers, 9000 bytes smem")\n'
)
"""A ``#pragma message`` whose newlines start log lines with ptxas's words: nvcc's front end prints it before
ptxas runs and the host compiler after, planting a kernel ``x`` and 200 registers for simt_add.cu's kernel."""


def with_planted_ptxas_log(solution: Solution, lines: str = PLANTED_PTXAS_LOG) -> Solution:
    """``solution`` with ``lines`` (default :data:`PLANTED_PTXAS_LOG`) after its first source."""
    first = solution.sources[0]
    planted = first.model_copy(update={"content": first.content + "\n" + lines})
    return solution.model_copy(update={"sources": [planted, *solution.sources[1:]]})
