"""TraceSet loading: the public data loads exactly; bad input is reported with its file and loses nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fibserve.datasets import load_trace_set
from fibserve.trace import EvaluationStatus
from fibserve.trace.problems import TraceSetError
from fibserve.trace.trace_set import TraceSet
from trace_helpers import GEMM_DEFINITION, make_root, shared, workload_line


def test_flashinfer_bench_example_loads_exactly() -> None:
    root = shared("flashinfer-bench-example")
    ts = TraceSet.load(root)
    assert ts.counts() == {
        "definitions": 1,
        "solutions": 0,
        "workloads": 43,
        "traces": 0,
        "errors": 0,
        "warnings": 0,
    }
    workloads = ts.workloads_for("gemm_n4096_k4096")
    assert len(workloads) == 43
    first = ts.workload("280860e6-08f0-427c-b7c5-9cffcfab1a10")
    assert first.axes == {"M": 256}
    assert ts.definition("gemm_n4096_k4096").resolve_shape("C", first.axes) == (256, 4096)
    assert ts.origin("workload", first.uuid).endswith("gemm_n4096_k4096.jsonl:1")


def test_2025_snapshot_needs_migration_and_current_schema_rejects_it() -> None:
    root = shared("flashinfer-trace-2025")
    with pytest.raises(TraceSetError) as info:
        TraceSet.load(root)
    messages = [str(p) for p in info.value.problems]
    assert any("gemm_n_4096_k_4096.json" in m and "op_type: Field required" in m for m in messages)
    assert any(".jsonl:1:" in m and "log_file" in m for m in messages)


@pytest.mark.filterwarnings("ignore::fibserve.trace.legacy.LegacyMigrationWarning")
def test_2025_snapshot_loads_through_migration_with_exact_counts() -> None:
    root = shared("flashinfer-trace-2025")
    ts = TraceSet.load(root, migrate_legacy=True)
    assert ts.counts() == {
        "definitions": 10,
        "solutions": 0,
        "workloads": 223,
        "traces": 301,
        "errors": 0,
        "warnings": 6,
    }
    assert len(ts.workloads_for("gemm_n_4096_k_4096")) == 43
    assert len(ts.workloads_for("mla_paged_decode_h128_ckv512_kpe64_ps1")) == 51
    assert len(ts.traces_for("gemm_n_4096_k_4096")) == 129
    assert len(ts.traces_for("gemm_n_4096_k_4096", "gemm_n_4096_k_4096_triton_gpt_o3")) == 86
    assert all(t.passed for t in ts.traces)
    # Traces without a uuid are linked to the workload with the same content declared under traces/workloads.
    assert all(t.workload.uuid in ts.workload_traces for t in ts.traces)
    assert all(ts.workload(t.workload.uuid).axes == t.workload.axes for t in ts.traces)
    # Only the solutions (not shipped in the snapshot) and one definition are missing: warnings, not errors.
    assert {p.severity for p in ts.problems} == {"warning"}


@pytest.mark.filterwarnings("ignore::fibserve.trace.legacy.LegacyMigrationWarning")
def test_2025_passed_traces_keep_their_numbers() -> None:
    root = shared("flashinfer-trace-2025")
    ts = TraceSet.load(root, migrate_legacy=True)
    loaded = {(t.definition, t.solution, t.evaluation.timestamp): t for t in ts.traces}
    seen = 0
    for path in sorted((root / "traces").glob("gemm/*.jsonl")):
        for text in path.read_text().splitlines():
            raw = json.loads(text)
            evaluation = raw["evaluation"]
            trace = loaded[(raw["definition"], raw["solution"], evaluation["timestamp"])]
            assert trace.evaluation.status is EvaluationStatus.PASSED
            assert trace.evaluation.performance.model_dump(exclude={"extra"}) == evaluation["performance"]
            assert trace.evaluation.correctness.model_dump(exclude={"extra"}) == evaluation["correctness"]
            assert trace.evaluation.environment.hardware == evaluation["environment"]["device"]
            assert trace.evaluation.environment.libs == evaluation["environment"]["libs"]
            assert trace.workload.axes == raw["workload"]["axes"]
            seen += 1
    assert seen == 301


def test_bad_files_are_reported_with_file_and_line_and_lose_nothing_else(tmp_path: Path) -> None:
    bad_dtype = {
        **GEMM_DEFINITION,
        "name": "bad_dtype",
        "inputs": {**GEMM_DEFINITION["inputs"], "A": {"shape": ["M", "K"], "dtype": "float64"}},
    }
    bad_axis = {
        **GEMM_DEFINITION,
        "name": "bad_axis",
        "outputs": {"C": {"shape": ["M", "P"], "dtype": "float32"}},
    }
    evil_solution = {
        "name": "evil",
        "definition": "gemm_small",
        "author": "x",
        "spec": {"language": "cuda", "target_hardware": ["sm_90a"], "entry_point": "kernel.cu::run"},
        "sources": [{"path": "kernel.cu", "content": ""}, {"path": "../../escape.cu", "content": ""}],
    }
    good_solution = {**evil_solution, "name": "good", "sources": [{"path": "kernel.cu", "content": ""}]}
    lines = [
        workload_line("w1", 1),
        '{"definition": "gemm_small", "workload": {',
        workload_line("w2", 2),
        workload_line("w3", -4),
        workload_line("w4", 4),
    ]
    root = make_root(
        tmp_path / "root",
        definitions={
            "gemm_small.json": GEMM_DEFINITION,
            "broken.json": '{"name": "x",',
            "bad_dtype.json": bad_dtype,
            "bad_axis.json": bad_axis,
        },
        workloads={"gemm_small.jsonl": "\n".join(lines) + "\n"},
        solutions={"evil.json": evil_solution, "good.json": good_solution},
    )
    ts = TraceSet.load(root, strict=False)
    errors = {(Path(p.path).name, p.line): p.message for p in ts.errors}
    assert set(errors) == {
        ("broken.json", None),
        ("bad_dtype.json", None),
        ("bad_axis.json", None),
        ("evil.json", None),
        ("gemm_small.jsonl", 2),
        ("gemm_small.jsonl", 4),
    }
    assert "malformed JSON" in errors[("broken.json", None)]
    assert "float64" in errors[("bad_dtype.json", None)] and "dtype" in errors[("bad_dtype.json", None)]
    assert "axis 'P' that is not declared" in errors[("bad_axis.json", None)]
    assert "'..'" in errors[("evil.json", None)]
    assert "malformed JSON" in errors[("gemm_small.jsonl", 2)]
    assert "greater than or equal to 0" in errors[("gemm_small.jsonl", 4)]
    # Nothing else was lost.
    assert sorted(ts.definitions) == ["gemm_small"]
    assert sorted(ts.solutions) == ["good"]
    assert [w.uuid for w in ts.workloads_for("gemm_small")] == ["w1", "w2", "w4"]
    with pytest.raises(TraceSetError, match="6 problem"):
        TraceSet.load(root)


def test_same_name_different_content_in_two_roots_is_a_conflict_naming_both(tmp_path: Path) -> None:
    one = make_root(
        tmp_path / "one",
        definitions={"g.json": GEMM_DEFINITION},
        workloads={"g.jsonl": workload_line("w1", 1) + "\n"},
    )
    changed = {**GEMM_DEFINITION, "axes": {**GEMM_DEFINITION["axes"], "N": {"type": "const", "value": 16}}}
    two = make_root(
        tmp_path / "two",
        definitions={"sub/g.json": changed},
        workloads={"g.jsonl": workload_line("w1", 7) + "\n" + workload_line("w2", 2) + "\n"},
    )
    ts = TraceSet.load(f"{one}:{two}", strict=False)
    assert len(ts.errors) == 2
    definition_error, workload_error = ts.errors
    assert definition_error.path == str(two / "definitions" / "sub" / "g.json")
    assert str(one / "definitions" / "g.json") in definition_error.message
    assert "conflicting definition 'gemm_small'" in definition_error.message
    assert workload_error.line == 1 and f"{one / 'workloads' / 'g.jsonl'}:1" in workload_error.message
    # First one kept, the rest of root two still loaded.
    assert ts.definition("gemm_small").const_axes["N"] == 8
    assert ts.workload("w1").axes == {"M": 1}
    assert ts.workload("w2").axes == {"M": 2}


def test_identical_duplicates_across_roots_are_dropped(tmp_path: Path) -> None:
    files = {
        "definitions": {"g.json": GEMM_DEFINITION},
        "workloads": {"g.jsonl": workload_line("w1", 1) + "\n"},
    }
    one = make_root(tmp_path / "one", **files)
    two = make_root(tmp_path / "two", **files)
    ts = TraceSet.load([one, two])
    assert ts.counts()["definitions"] == 1 and ts.counts()["workloads"] == 1 and not ts.problems
    assert ts.workload_root("w1") == one


def test_workload_must_fit_its_definition(tmp_path: Path) -> None:
    def line(uuid: str, axes: dict, inputs: tuple[str, ...] = ("A", "B")) -> str:
        workload = {"uuid": uuid, "axes": axes, "inputs": {name: {"type": "random"} for name in inputs}}
        return json.dumps({"definition": "gemm_small", "workload": workload})

    lines = [
        workload_line("w1", 1),
        line("w9", {"Q": 1}),
        line("w8", {"M": 1}, ("A",)),
        line("w7", {"M": 1, "N": 8}),  # a const axis with its own value is fine
        line("w6", {"M": 2, "N": 8}),
        line("w5", {"M": 3, "N": 9}),  # ...with another value it is not, even right after a valid line
    ]
    root = make_root(
        tmp_path / "r", definitions={"g.json": GEMM_DEFINITION}, workloads={"g.jsonl": "\n".join(lines)}
    )
    ts = TraceSet.load(root, strict=False)
    messages = {p.line: p.message for p in ts.errors}
    assert set(messages) == {2, 3, 6}
    assert "lacks values for var axes ['M']" in messages[2] and "does not declare" in messages[2]
    assert "inputs ['A'] differ" in messages[3]
    assert "const axes ['N']" in messages[6]
    assert list(ts.workload_traces) == ["w1", "w7", "w6"]


def test_safetensors_paths_resolve_against_their_own_root(tmp_path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    definition = {**GEMM_DEFINITION, "name": "g2"}
    line = json.dumps(
        {
            "definition": "g2",
            "workload": {
                "uuid": "blobbed",
                "axes": {"M": 2},
                "inputs": {
                    "A": {"type": "safetensors", "path": "blob/g2/a.safetensors", "tensor_key": "A"},
                    "B": {"type": "random"},
                },
            },
        }
    )
    escaping = line.replace("blobbed", "escaping").replace("blob/g2/a.safetensors", "../a.safetensors")
    missing = line.replace("blobbed", "missing").replace("a.safetensors", "nope.safetensors")
    one = make_root(tmp_path / "one", definitions={"g.json": GEMM_DEFINITION})
    two = make_root(
        tmp_path / "two",
        definitions={"g2.json": definition},
        workloads={"g2.jsonl": "\n".join([line, escaping, missing])},
    )
    (two / "blob" / "g2").mkdir(parents=True)
    save_file({"A": np.ones((2, 4), dtype=np.float32)}, str(two / "blob" / "g2" / "a.safetensors"))
    ts = TraceSet.load([one, two], strict=False)
    assert ts.blob_path("blobbed", "blob/g2/a.safetensors") == two / "blob" / "g2" / "a.safetensors"
    assert ts.blob_path("blobbed", "blob/g2/a.safetensors").is_file()
    messages = {p.line: p.message for p in ts.errors}
    assert "'..'" in messages[2]
    assert "not found under" in messages[3]
    with pytest.raises(ValueError, match=r"'\.\.'"):
        ts.blob_path("blobbed", "../x.safetensors")


def test_lookups_raise_clear_key_errors(tmp_path: Path) -> None:
    ts = TraceSet.load(make_root(tmp_path / "r", definitions={"g.json": GEMM_DEFINITION}))
    with pytest.raises(KeyError, match="unknown definition 'nope'"):
        ts.definition("nope")
    with pytest.raises(KeyError, match="unknown workload uuid"):
        ts.workload("nope")
    with pytest.raises(KeyError, match="unknown solution"):
        ts.solution("nope")
    assert ts.workloads_for("nope") == []


def test_missing_root_is_an_error(tmp_path: Path) -> None:
    ts = TraceSet.load(tmp_path / "absent", strict=False)
    assert [p.message for p in ts.errors] == ["trace-set root does not exist or is not a folder"]


def test_fast_path_matches_full_validation(tmp_path: Path) -> None:
    """Lines taken on the fast path build the same models as pydantic builds from their text."""
    from fibserve.trace import Trace

    lines = [workload_line(f"w{i}", i) for i in range(50)]
    lines.append(workload_line("wbool", 1).replace('"M": 1', '"M": true'))  # a bool is not an axis value
    root = make_root(
        tmp_path / "r", definitions={"g.json": GEMM_DEFINITION}, workloads={"g.jsonl": "\n".join(lines)}
    )
    ts = TraceSet.load(root, strict=False)
    for text in lines[:50]:
        expected = Trace.model_validate_json(text)
        assert ts.workload_trace(expected.workload.uuid) == expected
    assert [p.line for p in ts.errors] == [51]


def test_load_trace_set_uses_dataset_roots_or_the_bundled_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path / "r", definitions={"g.json": GEMM_DEFINITION})
    monkeypatch.setenv("DATASET_ROOTS", str(root))
    assert list(load_trace_set().definitions) == ["gemm_small"]
    monkeypatch.delenv("DATASET_ROOTS")
    assert "gemm_n7168_k5120" in load_trace_set().definitions


def test_a_line_with_two_objects_is_an_error_not_a_shift(tmp_path: Path) -> None:
    lines = [
        workload_line("w1", 1),
        workload_line("w2", 2) + ", " + workload_line("w3", 3),
        workload_line("w4", 4),
    ]
    root = make_root(
        tmp_path / "r", definitions={"g.json": GEMM_DEFINITION}, workloads={"g.jsonl": "\n".join(lines)}
    )
    ts = TraceSet.load(root, strict=False)
    assert [(p.line, "malformed JSON" in p.message) for p in ts.errors] == [(2, True)]
    assert list(ts.workload_traces) == ["w1", "w4"]
    assert ts.origin("workload", "w4").endswith("g.jsonl:3")


def _python_solution(name: str, definition: str) -> dict:
    return {
        "name": name,
        "definition": definition,
        "author": "test",
        "spec": {"language": "python", "target_hardware": ["any"], "entry_point": "b.py::run"},
        "sources": [{"path": "b.py", "content": "def run(A, B):\n    return A @ B.T\n"}],
    }


def test_a_definition_names_its_baseline_solution_by_tag(tmp_path: Path) -> None:
    tagged = {**GEMM_DEFINITION, "tags": ["baseline:gemm_small_matmul"]}
    other = {**GEMM_DEFINITION, "name": "gemm_other", "tags": ["baseline:gemm_small_matmul"]}
    missing = {**GEMM_DEFINITION, "name": "gemm_missing", "tags": ["baseline:not_there"]}
    root = make_root(
        tmp_path / "r",
        definitions={"g.json": tagged, "o.json": other, "m.json": missing},
        solutions={"s.json": _python_solution("gemm_small_matmul", "gemm_small")},
    )
    ts = TraceSet.load(root)
    assert ts.definition("gemm_small").baseline == "gemm_small_matmul"
    assert ts.baseline_for("gemm_small").name == "gemm_small_matmul"
    # a baseline for another definition, or none at all, is not used, and loading says so (a warning)
    assert ts.baseline_for("gemm_other") is None and ts.baseline_for("gemm_missing") is None
    warnings = sorted(p.message for p in ts.warnings)
    assert len(warnings) == 2 and not ts.errors
    assert "'gemm_small_matmul' of 'gemm_other' is for 'gemm_small'" in warnings[0]
    assert "'not_there' of 'gemm_missing' is not in the trace set" in warnings[1]
