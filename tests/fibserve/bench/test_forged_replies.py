"""A worker's replies are the candidate's output: forged, failing or malformed, they are its status.

The candidate runs in the worker's own interpreter, so it can replace the worker's methods and answer the
trusted side with anything. Before, an error reply to ``alloc`` ended the task as ``evaluation_error`` (a
harness failure, rerun on resume and never counted against the kernel), and a malformed one raised inside the
evaluator. Now every reply is validated (:mod:`fibserve.bench.worker.protocol`) and anything that comes out of the
worker is a RUNTIME_ERROR naming the problem.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fibserve.bench import Evaluator
from fibserve.trace import EvaluationStatus, Solution

pytestmark = pytest.mark.slow

PATCH = """import sys

_worker = sys.modules["fibserve.bench.worker.entry"].Worker  # the module the worker serves from


def _forged(self, req):
    return {reply}


_worker.{op} = _forged


def run(x, y, z):
    z.copy_(x + y)
"""

FORGERIES = {
    "alloc error": ("alloc", '{"ok": False, "error": "out of memory (forged)"}', "out of memory (forged)"),
    "alloc malformed": ("alloc", '{"ok": True, "slots": "none"}', "reply to `alloc` is malformed"),
    "alloc too few": ("alloc", '{"ok": True, "slots": []}', "answered 0 slots where"),
    "call status": (
        "call",
        '{"ok": False, "status": "PASSED", "error": "x"}',
        "reply to `call` is malformed",
    ),
    "call timings": (
        "call",
        '{"ok": True, "ms": ["fast"], "bound_ms": [], "overwrite_ms": []}',
        "reply to `call`",
    ),
    "call extra": (
        "call",
        '{"ok": True, "ms": [0.1], "bound_ms": [0.1], "overwrite_ms": [0.0], "speedup": 100}',
        "reply to `call` is malformed",
    ),
    "call junk": ("call", '["not", "an", "object"]', "JSON that is not an object"),
    "call no timings": (
        "call",
        '{"ok": True, "ms": [], "bound_ms": [], "overwrite_ms": []}',
        "malformed timings",
    ),
}

# A reply nested deeper than the JSON parser recurses raised RecursionError, not the ValueError the reader
# caught: the evaluator's own internal error, rerun on resume and never counted against the kernel.
NESTED_TOO_DEEP = """import sys

_entry = sys.modules["fibserve.bench.worker.entry"]
_dumps = _entry.json.dumps


class _Json:
    loads = staticmethod(_entry.json.loads)

    @staticmethod
    def dumps(message):
        return "[" * 200000 + "]" * 200000 if "ms" in message else _dumps(message)


_entry.json = _Json


def run(x, y, z):
    z.copy_(x + y)
"""


@pytest.fixture(scope="module")
def evaluated(trace_set, tmp_path_factory: pytest.TempPathFactory) -> dict:
    config = tmp_path_factory.mktemp("config") / "no-policy.yaml"
    config.write_text("defaults:\n  enforce_source_policy: false\n")
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    reports = {}
    with Evaluator("cpu", warm_spare=False, config_path=config) as evaluator:
        for name, (op, reply, _) in FORGERIES.items():
            solution = Solution.model_validate(
                {
                    "name": name,
                    "definition": "vector_add_f32",
                    "author": "tests",
                    "spec": {
                        "language": "python",
                        "target_hardware": ["cpu"],
                        "entry_point": "kernel.py::run",
                    },
                    "sources": [{"path": "kernel.py", "content": PATCH.format(op=op, reply=reply)}],
                }
            )
            reports[name] = evaluator.evaluate(definition, solution, [workload])
    return reports


@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_forged_reply_is_the_candidates_runtime_error(evaluated: dict, name: str) -> None:
    report = evaluated[name]
    assert report.task_error is None, report.task_error
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.RUNTIME_ERROR, evaluation.log
    assert FORGERIES[name][2] in evaluation.log


def test_a_reply_nested_too_deep_to_parse_is_the_candidates_runtime_error(trace_set, tmp_path: Path) -> None:
    config = tmp_path / "no-policy.yaml"
    config.write_text("defaults:\n  enforce_source_policy: false\n")
    definition = trace_set.definition("vector_add_f32")
    workload = min(trace_set.workloads_for("vector_add_f32"), key=lambda w: w.axes["N"])
    solution = Solution.model_validate(
        {
            "name": "nested_too_deep",
            "definition": "vector_add_f32",
            "author": "tests",
            "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "kernel.py::run"},
            "sources": [{"path": "kernel.py", "content": NESTED_TOO_DEEP}],
        }
    )
    with Evaluator("cpu", warm_spare=False, config_path=config) as evaluator:
        report = evaluator.evaluate(definition, solution, [workload])
    assert report.task_error is None, report.task_error
    evaluation = report.traces[0].evaluation
    assert evaluation.status is EvaluationStatus.RUNTIME_ERROR, evaluation.log
    assert "worker sent a line that is not JSON" in evaluation.log


def test_the_probe_is_real(tmp_path: Path) -> None:
    """The forged method names are the worker's real request handlers (else the tests above prove nothing)."""
    from fibserve.bench.worker.entry import Worker

    assert all(callable(getattr(Worker, op)) for op, _, _ in FORGERIES.values())
