"""PyTorch compute in a Triton solution is judged by what runs, not by how it is spelled.

The static rule reads names, so operators and tensor methods passed it: ``z[:] = x + y`` PASSED every CPU
definition with no Triton kernel at all. Now each correctness call of a Triton candidate runs under the
worker's operator audit (:mod:`fibserve.bench.worker.torch_audit`): the candidate's own PyTorch compute fails with
the source-policy rule ``python.torch-at-run-time``, while allocation, views and Triton's own use of torch
(the CPU interpreter moves tensors with it) pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fibserve.bench import Evaluator
from fibserve.build import check_policy
from fibserve.trace import EvaluationStatus, Solution

KERNELS = Path(__file__).resolve().parent / "kernels"

pytestmark = pytest.mark.slow

OPERATOR_ADD = "import torch\n\n\ndef run(x, y, z):\n    z[:] = x + y\n"

HELPER_FILE = (
    "kernel.py",
    "import torch\nfrom scale import doubled\n\n\ndef run(x, y, z):\n    z[:] = doubled(x) - x + y\n",
    "scale.py",
    "def doubled(t):\n    return t * 2\n",
)

VIEWS_AND_ALLOCATION = (
    (KERNELS / "add_correct.py")
    .read_text()
    .replace(
        "def run(x, y, z):\n    n = x.numel()\n",
        "def run(x, y, z):\n    n = x.numel()\n    flat = z.view(-1)\n    scratch = torch.zeros_like(x)\n"
        "    assert flat.shape == scratch.shape\n",
    )
    .replace("import triton\n", "import torch\nimport triton\n", 1)
)


def _solution(name: str, *files: str) -> Solution:
    pairs = list(zip(files[::2], files[1::2], strict=True))
    return Solution.model_validate(
        {
            "name": name,
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {"language": "triton", "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
            "sources": [{"path": path, "content": content} for path, content in pairs],
        }
    )


CANDIDATES = {
    "operator add": (_solution("operator add", "kernel.py", OPERATOR_ADD), "aten.add"),
    "helper module": (_solution("helper module", *HELPER_FILE), "aten.mul"),
    "honest": (_solution("honest", "kernel.py", VIEWS_AND_ALLOCATION), None),
}


@pytest.fixture(scope="module")
def reports(trace_set) -> dict:
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    with Evaluator("cpu", warm_spare=False) as evaluator:
        return {
            name: evaluator.evaluate(definition, sol, [workload]) for name, (sol, _) in CANDIDATES.items()
        }


def test_the_static_rule_alone_passes_them() -> None:
    """The precondition: these candidates pass the name-based policy, so only the run-time audit stops them."""
    assert all(check_policy(solution) == [] for solution, _ in CANDIDATES.values())


@pytest.mark.parametrize("name", ["operator add", "helper module"])
def test_pytorch_compute_in_the_candidates_code_is_refused_with_the_operator(
    reports: dict, name: str
) -> None:
    evaluation = reports[name].traces[0].evaluation
    assert evaluation.status is EvaluationStatus.COMPILE_ERROR, evaluation.log
    assert "[python.torch-at-run-time]" in evaluation.log and CANDIDATES[name][1] in evaluation.log


def test_allocation_views_and_tritons_own_tensor_moves_pass(reports: dict) -> None:
    evaluation = reports["honest"].traces[0].evaluation
    assert evaluation.status is EvaluationStatus.PASSED, evaluation.log
