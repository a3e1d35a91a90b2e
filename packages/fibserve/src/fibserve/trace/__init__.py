"""FlashInfer Trace data model: definitions, workloads, solutions, traces and evaluations.

The models carry no I/O and import nothing heavy (no torch). Loading and merging trace sets lives in
:mod:`fibserve.trace.trace_set`; the migration of the 2025 public snapshot in :mod:`fibserve.trace.legacy`.
"""

from .comparisons import BaselineComparison, Comparisons, ReferenceComparison, Roofline
from .correctness_facts import CorrectnessFacts, OutputFacts, Plausibility
from .definition import Axis, AxisConst, AxisVar, Definition, DType, TensorSpec
from .evaluation import Correctness, Environment, Evaluation, EvaluationStatus, Performance
from .problems import LoadProblem, TraceSetError
from .schema import all_json_schemas, json_schema
from .solution import Binding, BuildSpec, Language, Solution, SourceFile
from .timing_facts import L2Overwrite, LatencySummary, TimingFacts
from .trace import Trace
from .trace_set import TraceSet
from .workload import InputSpec, RandomInput, SafetensorsInput, ScalarInput, Workload

__all__ = [
    "Axis",
    "AxisConst",
    "AxisVar",
    "BaselineComparison",
    "Binding",
    "BuildSpec",
    "Comparisons",
    "Correctness",
    "CorrectnessFacts",
    "DType",
    "Definition",
    "Environment",
    "Evaluation",
    "EvaluationStatus",
    "InputSpec",
    "L2Overwrite",
    "Language",
    "LatencySummary",
    "LoadProblem",
    "OutputFacts",
    "Performance",
    "Plausibility",
    "RandomInput",
    "ReferenceComparison",
    "Roofline",
    "SafetensorsInput",
    "ScalarInput",
    "Solution",
    "SourceFile",
    "TensorSpec",
    "TimingFacts",
    "Trace",
    "TraceSet",
    "TraceSetError",
    "Workload",
    "all_json_schemas",
    "json_schema",
]
