"""Explicit migration of the 2025 snapshot format: what changes, the warnings, and that semantics survive."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from fibserve.trace import Definition, Solution
from fibserve.trace.legacy import LegacyMigrationWarning, Migrator, as_legacy, workload_uuid
from fibserve.trace.trace_set import TraceSet
from trace_helpers import GEMM_DEFINITION, make_root, shared


def _load_reference(source: str):
    namespace: dict = {}
    exec(compile(source, "<reference>", "exec"), namespace)
    return namespace["run"]


def test_warns_once_per_kind_of_change_with_counts() -> None:
    root = shared("flashinfer-trace-2025")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TraceSet.load(root, migrate_legacy=True)
    messages = sorted(str(w.message) for w in caught if w.category is LegacyMigrationWarning)
    assert len(messages) == 6
    assert any("'type' renamed to 'op_type' (10x)" in m for m in messages)
    assert any("returning a dict" in m and "(10x)" in m for m in messages)
    assert any("'device' renamed to 'hardware' (301x)" in m for m in messages)
    assert any("'log_file' moved into 'log' (301x)" in m for m in messages)
    assert any("without uuid given a uuid (301x)" in m for m in messages)
    assert any("workload trace (223x)" in m for m in messages)
    assert all(w.filename == __file__ for w in caught)  # attributed to the caller of TraceSet.load


def test_dict_return_reference_is_adapted_and_computes_the_same() -> None:
    root = shared("flashinfer-trace-2025")
    raw = json.loads((root / "definitions" / "gqa" / "gqa_ragged_prefill_h32_kv8_d128.json").read_text())
    migrated = Definition.model_validate(Migrator().definition(raw))
    assert migrated.op_type == raw["type"]
    assert migrated.reference.startswith(raw["reference"].rstrip("\n"))  # original text kept
    gemm_raw = json.loads((root / "definitions" / "gemm" / "gemm_n_4096_k_4096.json").read_text())
    gemm = Definition.model_validate(Migrator().definition(gemm_raw))
    a, b = torch.randn(3, 4096, dtype=torch.float16), torch.randn(4096, 4096, dtype=torch.float16)
    original = _load_reference(gemm_raw["reference"])(a, b)
    adapted = _load_reference(gemm.reference)(a, b)
    assert isinstance(original, dict) and torch.equal(adapted, original["C"])


def test_multi_output_dict_return_becomes_a_tuple_in_output_order() -> None:
    raw = {
        **GEMM_DEFINITION,
        "type": "toy",
        "outputs": {
            "first": {"shape": ["M"], "dtype": "float32"},
            "second": {"shape": ["M"], "dtype": "float32"},
        },
        "reference": "def run(A, B):\n    return {'second': A * 2, 'first': A + 1}\n",
    }
    del raw["op_type"]
    migrated = Definition.model_validate(Migrator().definition(raw))
    first, second = _load_reference(migrated.reference)(torch.ones(2), None)
    assert torch.equal(first, torch.full((2,), 2.0)) and torch.equal(second, torch.full((2,), 2.0))


def test_current_definitions_are_left_alone() -> None:
    migrator = Migrator()
    assert migrator.definition(dict(GEMM_DEFINITION)) == GEMM_DEFINITION
    assert not migrator.changes


def test_workload_uuids_are_deterministic_and_content_based() -> None:
    workload = {"axes": {"M": 3}, "inputs": {"A": {"type": "random"}}}
    first = workload_uuid("gemm", workload)
    assert first == workload_uuid("gemm", json.loads(json.dumps(workload)))
    assert first != workload_uuid("gemm", {**workload, "axes": {"M": 4}})
    assert first != workload_uuid("other", workload)
    assert len(first) == 36 and first[14] == "5"  # a version-5 UUID


def test_trace_without_matching_workload_gets_uuid5_and_solution_languages_are_lowered(
    tmp_path: Path,
) -> None:
    solution = {
        "name": "s",
        "definition": "gemm_small",
        "author": "a",
        "spec": {"language": "Triton", "target_hardware": ["B200"], "entry_point": "main.py::run"},
        "sources": [{"path": "main.py", "content": "def run(A, B):\n    pass\n"}],
    }
    trace = {
        "definition": "gemm_small",
        "solution": "s",
        "workload": {"axes": {"M": 5}, "inputs": {"A": {"type": "random"}, "B": {"type": "random"}}},
        "evaluation": {
            "status": "RUNTIME_ERROR",
            "log_file": "x.log",
            "timestamp": "t",
            "environment": {"device": "NVIDIA B200", "libs": {}},
        },
    }
    root = make_root(
        tmp_path / "r",
        definitions={"g.json": GEMM_DEFINITION},
        solutions={"s.json": solution},
        traces={"t.jsonl": json.dumps(trace) + "\n"},
    )
    with pytest.raises(Exception, match="language"):
        TraceSet.load(root)
    with pytest.warns(LegacyMigrationWarning):
        ts = TraceSet.load(root, migrate_legacy=True)
    assert ts.solution("s").spec.language.value == "triton"
    (loaded,) = ts.traces
    assert loaded.workload.uuid == workload_uuid("gemm_small", trace["workload"])
    assert loaded.evaluation.log == "legacy log_file: x.log"
    assert loaded.evaluation.environment.hardware == "NVIDIA B200"


def _legacy_solution(content: str, language: str = "Triton", **spec) -> dict:
    return {
        "name": "o3_gemm",
        "definition": "gemm_small",
        "author": "gpt-o3",
        "spec": {"language": language, "target_hardware": ["B200"], "entry_point": "main.py::run", **spec},
        "sources": [{"path": "main.py", "content": content}],
    }


def test_a_2025_solution_returning_a_dict_becomes_value_returning_with_outputs_read_by_name() -> None:
    migrator = Migrator()
    migrator.definition(dict(GEMM_DEFINITION))  # a trace set's definitions load first: its signature is known
    content = "def run(A, B):\n    return {'C': A @ B.T}\n"
    migrated = Solution.model_validate(migrator.solution(_legacy_solution(content)))
    assert migrated.spec.destination_passing_style is False
    assert migrated.sources[0].content.startswith(
        content.rstrip("\n")
    )  # original text kept, adapter appended
    run = _load_reference(migrated.sources[0].content)
    a, b = torch.randn(3, 4), torch.randn(8, 4)
    assert torch.equal(run(a, b), a @ b.T)
    assert migrator.changes["value_returning"] == 1
    lacking = _load_reference(Migrator().solution(_legacy_solution("def run(A, B):\n    return {'D': A}\n"),
                                                  signature=(2, ["C"]))["sources"][0]["content"])  # fmt: skip
    with pytest.raises(KeyError, match=r"without the outputs \['C'\]"):
        lacking(a, b)


def test_a_2025_solution_that_takes_its_outputs_stays_destination_passing_and_cuda_is_untouched() -> None:
    dps = _legacy_solution("def run(A, B, C):\n    C.copy_(A @ B.T)\n")
    assert Migrator().solution(dps, signature=(2, ["C"]))["spec"] == {**dps["spec"], "language": "triton"}
    set_explicitly = _legacy_solution("def run(A, B):\n    return A @ B.T\n", destination_passing_style=True)
    assert Migrator().solution(set_explicitly, signature=(2, ["C"]))["spec"]["destination_passing_style"]
    cuda = _legacy_solution("void run() {}", language="cuda", entry_point="kernel.cu::run")
    cuda["sources"][0]["path"] = "kernel.cu"
    migrator = Migrator()
    assert migrator.solution(cuda, signature=(2, ["C"])) == cuda and not migrator.changes


def test_a_request_solution_is_read_as_2025_only_when_it_did_not_choose_its_calling_style() -> None:
    definition = Definition.model_validate(GEMM_DEFINITION)
    body = _legacy_solution("def run(A, B):\n    return {'C': A @ B.T}\n", language="triton")
    legacy = as_legacy(Solution.model_validate(body), definition)  # what `fibserve serve --legacy` stores
    assert legacy.spec.destination_passing_style is False and "_legacy_run = run" in legacy.sources[0].content
    chosen = Solution.model_validate({**body, "spec": {**body["spec"], "destination_passing_style": True}})
    assert as_legacy(chosen, definition) is chosen
