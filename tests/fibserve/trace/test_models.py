"""Validation rules of the FlashInfer Trace models."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from fibserve.trace import (
    BuildSpec,
    Correctness,
    Definition,
    DType,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    Solution,
    SourceFile,
    Trace,
    Workload,
    all_json_schemas,
    json_schema,
)
from pydantic import ValidationError
from trace_helpers import GEMM_DEFINITION


def _definition(**changes: object) -> dict:
    return json.loads(json.dumps({**GEMM_DEFINITION, **changes}))


def _solution(**changes: object) -> dict:
    base = {
        "name": "gemm_small_cuda",
        "definition": "gemm_small",
        "author": "tester",
        "spec": {
            "language": "cuda",
            "target_hardware": ["sm_90a"],
            "entry_point": "kernel.cu::run",
            "binding": "tvm-ffi",
        },
        "sources": [
            {"path": "kernel.cu", "content": "// kernel\n"},
            {"path": "include/util.cuh", "content": ""},
        ],
    }
    base.update(changes)
    return base


def _env() -> Environment:
    return Environment(hardware="NVIDIA H200", libs={"torch": "2.11.0"})


def test_definition_helpers_resolve_shapes() -> None:
    definition = Definition.model_validate(_definition())
    assert definition.input_names == ["A", "B"]
    assert definition.output_names == ["C"]
    assert definition.var_axes == ["M"]
    assert definition.const_axes == {"N": 8, "K": 4}
    assert definition.resolve_shape("A", {"M": 3}) == (3, 4)
    assert definition.resolve_shape("C", {"M": 5}) == (5, 8)
    with pytest.raises(ValueError, match="'M'"):
        definition.resolve_shape("A", {})
    with pytest.raises(KeyError, match="Z"):
        definition.resolve_shape("Z", {"M": 1})


def test_scalar_and_zero_d_shapes() -> None:
    definition = Definition.model_validate(
        _definition(
            inputs={
                **GEMM_DEFINITION["inputs"],
                "eps": {"shape": None, "dtype": "float32"},
                "scale": {"shape": [], "dtype": "float32"},
            }
        )
    )
    assert definition.resolve_shape("eps", {"M": 1}) is None
    assert definition.resolve_shape("scale", {"M": 1}) == ()
    assert definition.tensor("eps").is_scalar


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"inputs": {"A": {"shape": ["M", "Q"], "dtype": "float32"}}}, "axis 'Q' that is not declared"),
        ({"inputs": {"A": {"shape": ["M", "K"], "dtype": "float31"}}}, "dtype"),
        ({"outputs": {"A": {"shape": ["M", "N"], "dtype": "float32"}}}, "both input and output"),
        ({"outputs": {}}, "no outputs"),
        (
            {"reference": "import torch\n\ndef forward(A, B):\n    return A\n"},
            "does not define a module-level function `run`",
        ),
        ({"reference": "def run(A, B)\n    return A\n"}, "not valid Python"),
        ({"reference": "class X:\n    def run(self):\n        pass\n"}, "module-level function `run`"),
        (
            {
                "axes": {
                    "M": {"type": "var"},
                    "N": {"type": "const", "value": -1},
                    "K": {"type": "const", "value": 4},
                }
            },
            "greater than or equal",
        ),
        (
            {
                "axes": {
                    "M": {"type": "dynamic"},
                    "N": {"type": "const", "value": 8},
                    "K": {"type": "const", "value": 4},
                }
            },
            "type",
        ),
        ({"type": "gemm"}, "Extra inputs are not permitted"),
    ],
)
def test_definition_rejects(changes: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Definition.model_validate(_definition(**changes))


def test_every_design_dtype_is_accepted() -> None:
    names = [
        "float32",
        "float16",
        "bfloat16",
        "float8_e4m3fn",
        "float8_e5m2",
        "float4_e2m1",
        "int64",
        "int32",
        "int16",
        "int8",
        "bool",
    ]
    assert [d.value for d in DType] == names
    assert DType("float4_e2m1").bits == 4
    assert DType.BFLOAT16.is_floating_point and not DType.INT8.is_floating_point


def test_definition_json_round_trip_is_stable() -> None:
    definition = Definition.model_validate(_definition(description="d", tags=["t"]))
    text = definition.model_dump_json()
    again = Definition.model_validate_json(text)
    assert again == definition
    assert again.model_dump_json() == text
    assert "null" not in text  # absent optionals are left out, as FlashInfer files do


@pytest.mark.parametrize(
    "path",
    ["../evil.cu", "a/../../b.cu", "/etc/passwd", "C:\\x.cu", "a//b.cu", "./k.cu", "", "x" * 5000 + ".cu",
     "d/" + "x" * 300 + ".cu", "k\ud800.cu"],
)  # fmt: skip
def test_source_paths_must_be_safe_and_relative(path: str) -> None:
    with pytest.raises(ValidationError, match="path"):
        SourceFile(path=path, content="")


def test_solution_rules() -> None:
    solution = Solution.model_validate(_solution())
    assert solution.spec.entry_file == "kernel.cu" and solution.spec.entry_symbol == "run"
    assert solution.spec.destination_passing_style is True
    assert solution.entry_source().content == "// kernel\n"
    with pytest.raises(ValidationError, match="duplicate source path"):
        Solution.model_validate(
            _solution(sources=[{"path": "kernel.cu", "content": "a"}, {"path": "kernel.cu", "content": "b"}])
        )
    with pytest.raises(ValidationError, match=r"'a\.cu' is a file, but 'a\.cu/b\.cu' uses it as a folder"):
        Solution.model_validate(
            _solution(sources=[{"path": p, "content": ""} for p in ("kernel.cu", "a.cu/b.cu", "a.cu")])
        )
    with pytest.raises(ValidationError, match=r"entry file 'kernel\.cu' is not among the sources"):
        Solution.model_validate(_solution(sources=[{"path": "main.cu", "content": ""}]))
    with pytest.raises(ValidationError, match="entry_point"):
        BuildSpec(language="cuda", target_hardware=["sm_90a"], entry_point="kernel.cu")
    with pytest.raises(ValidationError, match=r"\.py"):
        BuildSpec(language="triton", target_hardware=["sm_90a"], entry_point="kernel.cu::run")
    with pytest.raises(ValidationError, match="language"):
        BuildSpec(language="CUDA", target_hardware=["sm_90a"], entry_point="kernel.cu::run")
    with pytest.raises(ValidationError, match="binding"):
        BuildSpec(language="cuda", target_hardware=["sm_90a"], entry_point="kernel.cu::run", binding="pybind")


def test_solution_hash_is_stable_and_content_addressed() -> None:
    solution = Solution.model_validate(_solution())
    renamed = Solution.model_validate(_solution(name="other", author="someone else"))
    reordered = Solution.model_validate(_solution(sources=list(reversed(_solution()["sources"]))))
    edited = Solution.model_validate(_solution(sources=[{"path": "kernel.cu", "content": "// changed\n"}]))
    assert len(solution.hash()) == 64
    assert solution.hash() == Solution.model_validate_json(solution.model_dump_json()).hash()
    assert solution.hash() == renamed.hash() == reordered.hash()
    assert solution.hash() != edited.hash()
    # The documented scheme, recomputed independently: an accidental change (orphaning build caches) fails here.
    payload = {
        "definition": "gemm_small",
        "spec": {
            "language": "cuda",
            "target_hardware": ["sm_90a"],
            "entry_point": "kernel.cu::run",
            "dependencies": [],
            "destination_passing_style": True,
            "binding": "tvm-ffi",
        },
        "sources": [["include/util.cuh", ""], ["kernel.cu", "// kernel\n"]],
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert solution.hash() == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.parametrize(
    ("status", "correctness", "performance", "ok"),
    [
        ("PASSED", True, True, True),
        ("PASSED", True, False, False),
        ("PASSED", False, True, False),
        ("INCORRECT_NUMERICAL", True, False, True),
        ("INCORRECT_NUMERICAL", True, True, False),
        ("INCORRECT_NUMERICAL", False, False, False),
        ("RUNTIME_ERROR", False, False, True),
        ("RUNTIME_ERROR", True, False, False),
        ("COMPILE_ERROR", False, True, False),
        ("TIMEOUT", False, False, True),
        ("INCORRECT_SHAPE", False, False, True),
        ("INCORRECT_DTYPE", False, False, True),
    ],
)
def test_status_must_match_fields(status: str, correctness: bool, performance: bool, ok: bool) -> None:
    kwargs = {
        "status": status,
        "environment": _env(),
        "timestamp": "2026-11-30T06:00:00Z",
        "correctness": Correctness(max_relative_error=0.01, max_absolute_error=0.001)
        if correctness
        else None,
        "performance": Performance(latency_ms=1.0, reference_latency_ms=2.0, speedup_factor=2.0)
        if performance
        else None,
    }
    if ok:
        assert Evaluation(**kwargs).status == EvaluationStatus(status)
    else:
        with pytest.raises(ValidationError, match=status):
            Evaluation(**kwargs)


def test_non_finite_errors_serialise_as_strings_and_read_back() -> None:
    evaluation = Evaluation(
        status="INCORRECT_NUMERICAL",
        environment=_env(),
        timestamp="t",
        correctness=Correctness(max_relative_error=math.inf, max_absolute_error=math.nan),
    )
    text = evaluation.model_dump_json()
    assert json.loads(text)["correctness"] == {"max_relative_error": "Infinity", "max_absolute_error": "NaN"}
    back = Evaluation.model_validate_json(text)
    assert back.correctness is not None
    assert math.isinf(back.correctness.max_relative_error) and math.isnan(back.correctness.max_absolute_error)
    assert back.model_dump_json() == text
    # Bare NaN/Infinity tokens (Python's json.dumps) are read too.
    bare = Correctness.model_validate_json('{"max_relative_error": Infinity, "max_absolute_error": NaN}')
    assert math.isinf(bare.max_relative_error)
    with pytest.raises(ValidationError, match="non-negative"):
        Correctness(max_relative_error=-1.0)
    with pytest.raises(ValidationError):
        Performance(latency_ms=-0.5)


def test_trace_round_trip_and_workload_trace() -> None:
    workload = Workload(
        uuid="u1",
        axes={"M": 2},
        inputs={
            "A": {"type": "random"},
            "B": {"type": "safetensors", "path": "blob/b.safetensors", "tensor_key": "B"},
        },
    )
    trace = Trace(definition="gemm_small", workload=workload)
    assert trace.is_workload_trace and not trace.passed
    text = trace.model_dump_json()
    assert json.loads(text)["solution"] is None and json.loads(text)["evaluation"] is None
    assert Trace.model_validate_json(text) == trace
    evaluated = Trace(
        definition="gemm_small",
        workload=workload,
        solution="s",
        evaluation=Evaluation(
            status="PASSED",
            environment=_env(),
            timestamp="t",
            correctness=Correctness(),
            performance=Performance(latency_ms=1.0),
        ),
    )
    assert evaluated.passed
    assert (
        Trace.model_validate_json(evaluated.model_dump_json()).model_dump_json()
        == evaluated.model_dump_json()
    )
    with pytest.raises(ValidationError, match="must name its solution"):
        Trace(definition="gemm_small", workload=workload, evaluation=evaluated.evaluation)
    with pytest.raises(ValidationError, match="greater than or equal"):
        Workload(uuid="u", axes={"M": -1}, inputs={})
    with pytest.raises(ValidationError):
        Workload(uuid="", axes={}, inputs={})


def test_json_schema_for_every_kind() -> None:
    schemas = all_json_schemas()
    assert set(schemas) == {"definition", "workload", "solution", "trace"}
    definition = json_schema("definition")
    assert definition["additionalProperties"] is False
    assert {"name", "op_type", "axes", "inputs", "outputs", "reference"} <= set(definition["required"])
    assert "bfloat16" in json.dumps(definition)
    # The serialization schema (what FastAPI publishes in OpenAPI) lists the fields too.
    serialized = Trace.model_json_schema(mode="serialization")
    assert {"definition", "workload", "solution", "evaluation"} <= set(serialized["properties"])
    with pytest.raises(KeyError, match="unknown kind"):
        json_schema("nope")  # type: ignore[arg-type]


def test_models_import_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, fibserve.trace, fibserve.trace.trace_set; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
