"""Feedback text for each feedback option, from scripted evaluation results (KernelReport built directly).

Also the environment's part: a correct kernel is profiled once per kernel hash (the cache in the run's
``exp_000/ncu``), and a failure gets the BM25 fix notes.
"""

from __future__ import annotations

from pathlib import Path

from eval_reports import report
from mini_ptx_agent.environment.answers import ncu_result_from, sanitizer_verdict_from
from mini_ptx_agent.environment.evaluation import EvaluationEnvironment
from mini_ptx_agent.environment.report import FixNote, KernelReport, NcuResult, NotEvaluated, StaticAnalysis
from mini_ptx_agent.environment.stop import submits
from mini_ptx_agent.environment.verdict import build_report
from mini_ptx_agent.feedback import format_feedback
from mini_ptx_agent.feedback_options import FeedbackOptions
from mini_ptx_agent.task import TaskConfig

CUDA_TASK = TaskConfig(definition="vector_add_f32", language="cuda", target_speedup=1.0)
SOURCE = "#include <cuda_runtime.h>\n__global__ void k(float* z, long n) {\n  z[threadIdx.x] = 1.0f;\n}\n"


def fast_cuda(families: list[str] | None, target: str = "sm_90a", speedup: float = 1.5) -> KernelReport:
    """A CUDA kernel that passed on an H200 at ``speedup``, whose static verdict found ``families``."""
    fast = report(["PASSED"], speedups=[speedup], language="cuda")
    opcodes = {"wgmma": "HGMMA", "TMA": "UTMALDG", "tcgen05": "UTCHMMA"}
    fast.static_analysis = StaticAnalysis(
        compiled=True,
        target=target,
        architecture_families=families,
        sass_families=sorted(["SYNCS", *(opcodes[f] for f in families or [])]),
        raw={"sass_tool": "/usr/local/cuda/bin/cuobjdump", "kernels": [{"name": "k"}]},
    )
    return fast


def test_the_architecture_warning_names_what_the_target_calls_for() -> None:
    text = format_feedback(fast_cuda([]))
    assert (
        "ARCHITECTURE WARNING: the target sm_90a calls for wgmma (HGMMA) or TMA (UTMALDG/UTMASTG), and this "
        "kernel's SASS has none of them" in text
    )
    blackwell = format_feedback(fast_cuda(["TMA"], target="sm_100a"))
    assert "the target sm_100a calls for tcgen05 (UTC*)" in blackwell
    assert "ARCHITECTURE WARNING" not in format_feedback(fast_cuda(["TMA"]))  # TMA alone satisfies Hopper
    assert "ARCHITECTURE WARNING" not in format_feedback(
        fast_cuda([]), options=FeedbackOptions(architecture_warning=False)
    )
    assert "ARCHITECTURE WARNING" not in format_feedback(
        fast_cuda(None)
    )  # no verdict (Triton): nothing to say


def test_require_architecture_keeps_a_fast_kernel_without_the_families_from_submitting() -> None:
    options = FeedbackOptions(require_architecture=True)
    plain = fast_cuda([])
    assert plain.target_met and submits(plain, FeedbackOptions(), "sm_90a")
    assert not submits(plain, options, "sm_90a")
    text = format_feedback(plain, options=options, arch="sm_90a")
    assert "This run requires them: it does not end as Submitted without them." in text
    assert text.splitlines()[-1] == (
        "VERDICT: FAST ENOUGH, ARCHITECTURE MISSING: minimum speedup 1.500x >= target 1.00x, but no wgmma "
        "(HGMMA) or TMA (UTMALDG/UTMASTG) was compiled in; this run requires it. Use the architecture's instructions."
    )
    with_wgmma = fast_cuda(["wgmma", "TMA"])
    assert submits(with_wgmma, options, "sm_90a")
    assert format_feedback(with_wgmma, options=options).splitlines()[-1].startswith("VERDICT: TARGET MET")
    assert not submits(fast_cuda(["wgmma"], speedup=0.5), options, "sm_90a")  # the speedup still counts


def test_require_architecture_with_evidence_judges_the_executed_families() -> None:
    options = FeedbackOptions(require_architecture=True, instruction_evidence=True)
    compiled_only = fast_cuda(["wgmma"])
    assert not submits(compiled_only, options, "sm_90a")  # no Nsight Compute result: unknown is not met
    compiled_only.ncu = NcuResult(workload="w0", kernel_hash="h", executed_opcodes={"FFMA": 10})
    assert not submits(compiled_only, options, "sm_90a")
    assert "but no wgmma (HGMMA) or TMA (UTMALDG/UTMASTG) was executed" in format_feedback(
        compiled_only, options=options
    )
    compiled_only.ncu = NcuResult(workload="w0", kernel_hash="h", executed_families=["wgmma"])
    assert submits(compiled_only, options, "sm_90a")


def test_sanitizer_findings_are_quoted_with_their_source_lines() -> None:
    runs = [
        {"tool": "memcheck", "workload": "fea76944-a9e9-5a63", "passed": False, "verdict": "errors", "exit_code": 86,
         "output": "raw report", "findings": [
            {"message": "Invalid __global__ write of size 4 bytes", "count": 50,
             "locations": [{"file": "kernel.cu", "line": 3, "function": "k(float *, long)",
                            "source": "z[threadIdx.x] = 1.0f;"}],
             "thread": "thread (64,0,0) in block (3,0,0)",
             "details": ["Address 0x7f2a4e201000 is out of bounds", "and is 1 bytes after the nearest allocation"]}]},
        {"tool": "racecheck", "workload": "fea76944-a9e9-5a63", "passed": True, "verdict": "clean", "exit_code": 0},
    ]  # fmt: skip
    verdict = sanitizer_verdict_from(runs)
    rejected = build_report(CUDA_TASK, solution_name="s", traces=[], sanitizer=verdict)
    text = format_feedback(rejected)
    assert "Sanitizer (memcheck, racecheck): errors found:" in text
    assert (
        "  - memcheck, workload fea76944-a9e: Invalid __global__ write of size 4 bytes (50 reports)" in text
    )
    assert "      at kernel.cu:3 (k(float *, long)): z[threadIdx.x] = 1.0f;" in text
    assert "      first by thread (64,0,0) in block (3,0,0)" in text
    assert "Address 0x7f2a4e201000 is out of bounds" in text
    assert text.splitlines()[-1].startswith("VERDICT: REJECTED: compute-sanitizer reported errors")
    clean = sanitizer_verdict_from([runs[1]])
    assert "Sanitizer (racecheck): clean." in format_feedback(
        build_report(CUDA_TASK, solution_name="s", traces=[], sanitizer=clean)
    )


def test_executed_instruction_evidence_names_the_families_that_ran() -> None:
    run = {"workload": "w0", "ok": True, "exit_code": 0,
           "executed_opcodes": {"HGMMA": 4096, "IMAD": 99_000, "SYNCS": 300, "UTMALDG": 128}}  # fmt: skip
    ncu = ncu_result_from(run, workload="w0", kernel_hash="abc", target="sm_90a")
    assert ncu.executed_families == ["wgmma", "TMA"]  # fibserve's verdict, applied to executed opcodes
    assert ncu.sass_families == [
        "HGMMA",
        "SYNCS",
        "UTMALDG",
    ]  # the static analysis's rule: notable opcodes only
    fast = fast_cuda(["wgmma", "TMA"])
    fast.ncu = ncu
    text = format_feedback(fast, options=FeedbackOptions(instruction_evidence=True))
    assert (
        "Executed instructions (Nsight Compute, workload w0; warp instructions): HGMMA 4,096, SYNCS 300, "
        "UTMALDG 128. Target families that executed: wgmma, TMA." in text
    )
    assert "IMAD" not in text and "Profile (Nsight Compute" not in text
    simt = ncu_result_from(
        run | {"executed_opcodes": {"FFMA": 5000, "LDG": 64}}, workload="w0", kernel_hash="a", target="sm_90a"
    )
    fast.ncu = simt
    text = format_feedback(fast, options=FeedbackOptions(instruction_evidence=True))
    assert "none of the tracked opcodes. Target families that executed: none." in text
    assert "Compiled in but never executed: wgmma, TMA." in text
    failed = ncu_result_from(
        {"ok": False, "note": "the candidate failed: CUDA error"},
        workload="w0",
        kernel_hash="a",
        target="sm_90a",
    )
    fast.ncu = failed
    assert "Nsight Compute (workload w0): no profile: the candidate failed: CUDA error" in format_feedback(
        fast, options=FeedbackOptions(instruction_evidence=True)
    )


def test_the_profile_summary_line() -> None:
    fast = fast_cuda(["wgmma", "TMA"])
    fast.ncu = NcuResult(
        workload="w0", kernel_hash="h", cached=True,
        summary=dict(
            kernel="gemm_kernel", sol_compute_pct=71.24, sol_memory_pct=38.0, achieved_occupancy_pct=18.7,
            theoretical_occupancy_pct=18.75, top_stalls=[["long_scoreboard", 2.51], ["barrier", 0.8]],
        ),
    )  # fmt: skip
    text = format_feedback(fast, options=FeedbackOptions(profile_in_loop=True))
    assert (
        "Profile (Nsight Compute, workload w0, cached result, kernel gemm_kernel): SOL compute 71.2%, memory "
        "38.0%; achieved occupancy 18.7% (theoretical 18.8%); top stalls (warps per issued instruction): "
        "long_scoreboard 2.51, barrier 0.80." in text
    )
    assert "Executed instructions" not in text


def test_fix_notes_are_appended_before_the_verdict() -> None:
    failing = report(["TIMEOUT"], language="cuda")
    failing.fix_notes = [
        FixNote(name="mbarrier-deadlock.md", title="mbarrier deadlock", text="Count arrivals.", score=3.2)
    ]
    lines = format_feedback(failing).splitlines()
    at = lines.index("Fix notes that may apply (BM25 search of the notes folder):")
    assert lines[at + 1 : at + 3] == ["--- mbarrier deadlock (mbarrier-deadlock.md)", "Count arrivals."]
    assert lines[-1].startswith("VERDICT: INCORRECT")


class ProfilingBackend:
    """Answers every evaluation with ``answer`` and counts profile calls."""

    def __init__(self, answer: KernelReport):
        self.answer = answer
        self.profiled: list[str] = []

    def evaluate(self, solution, task):
        return self.answer.model_copy(deep=True)

    def profile(self, solution, task, workload, kernel_hash):
        self.profiled.append(kernel_hash)
        return NcuResult(workload=workload, kernel_hash=kernel_hash, executed_families=["wgmma"],
                         executed_opcodes={"HGMMA": 64})  # fmt: skip

    def describe(self):
        return {"backend": "profiling"}


def test_a_correct_kernel_is_profiled_once_per_kernel_hash(tmp_path: Path) -> None:
    backend = ProfilingBackend(report(["PASSED", "PASSED"], speedups=[1.2, 0.9], language="cuda"))
    env = EvaluationEnvironment(
        backend, CUDA_TASK, FeedbackOptions(instruction_evidence=True), ncu_cache_dir=tmp_path / "ncu"
    )
    first = env.execute({"solution": CUDA_TASK.solution(SOURCE, name="t1"), "turn": 1})
    again = env.execute(
        {"solution": CUDA_TASK.solution(SOURCE, name="t2"), "turn": 2}
    )  # same kernel, new name
    other = env.execute({"solution": CUDA_TASK.solution(SOURCE + "// v2\n", name="t3"), "turn": 3})
    assert len(backend.profiled) == 2 and backend.profiled[0] != backend.profiled[1]
    assert first["extra"]["report"].ncu.workload == "w1"  # the workload with the lowest speedup
    assert not first["extra"]["report"].ncu.cached and again["extra"]["report"].ncu.cached
    assert "cached result" in again["output"] and "HGMMA 64" in other["output"]
    assert sorted(p.name for p in (tmp_path / "ncu").iterdir()) == sorted(
        f"{h}.json" for h in backend.profiled
    )


def test_a_family_the_binary_lacks_is_not_counted_whatever_the_profile_says(tmp_path: Path) -> None:
    backend = ProfilingBackend(fast_cuda([]))  # its compiled SASS has no HGMMA; the profile claims some ran
    options = FeedbackOptions(instruction_evidence=True, require_architecture=True)
    out = EvaluationEnvironment(backend, CUDA_TASK, options, ncu_cache_dir=tmp_path).execute(
        {"solution": CUDA_TASK.solution(SOURCE, name="t1"), "turn": 1}
    )
    ncu = out["extra"]["report"].ncu
    assert (ncu.executed_families, ncu.not_compiled, ncu.executed_opcodes) == ([], ["HGMMA"], {})
    assert "Not counted: the profile claims HGMMA executed, but the compiled SASS has none." in out["output"]
    assert out["extra"]["submit"] is False


def test_an_incorrect_kernel_is_not_profiled_and_gets_fix_notes(tmp_path: Path) -> None:
    failing = report(["RUNTIME_ERROR"], language="cuda")
    failing.workloads[
        0
    ].log = "CUDA error: misaligned address; cuTensorMapEncodeTiled returned CUDA_ERROR_INVALID_VALUE"
    backend = ProfilingBackend(failing)
    env = EvaluationEnvironment(
        backend,
        CUDA_TASK,
        FeedbackOptions(instruction_evidence=True, notes_dir="bundled"),
        ncu_cache_dir=tmp_path,
    )
    out = env.execute({"solution": CUDA_TASK.solution(SOURCE, name="t1"), "turn": 1})
    assert backend.profiled == [] and out["extra"]["report"].ncu is None
    notes = out["extra"]["report"].fix_notes
    assert notes and notes[0].name == "misaligned-tensor-map.md"
    assert "--- Misaligned tensor map (TMA) (misaligned-tensor-map.md)" in out["output"]
    unknown = failing.model_copy(
        update={"status": NotEvaluated.NOT_EXECUTED, "workloads": []}
    )  # built, never run
    quiet = EvaluationEnvironment(ProfilingBackend(unknown), CUDA_TASK, FeedbackOptions(notes_dir="bundled"))
    assert (
        quiet.execute({"solution": CUDA_TASK.solution(SOURCE, name="t3")})["extra"]["report"].fix_notes == []
    )
    passing = EvaluationEnvironment(
        ProfilingBackend(fast_cuda(["wgmma"])), CUDA_TASK, FeedbackOptions(notes_dir="bundled")
    )
    assert (
        passing.execute({"solution": CUDA_TASK.solution(SOURCE, name="t2")})["extra"]["report"].fix_notes
        == []
    )


def test_the_families_come_from_the_services_architecture_verdict() -> None:
    from fibserve.analysis.report import Analysis
    from fibserve.analysis.verdict import Verdict
    from mini_ptx_agent.environment.answers import static_analysis_from

    analysis = Analysis(
        solution="s", definition="d", language="cuda", arch="sm_90a", status="clean",
        verdict=Verdict(target="sm_90a", uses_hopper_tensor_cores=True, uses_tma=True, uses_mbarrier=True),
    )  # fmt: skip
    read = static_analysis_from(analysis.model_dump(mode="json"))
    assert read is not None and (read.target, read.architecture_families) == ("sm_90a", ["wgmma", "TMA"])
    bare = static_analysis_from(analysis.model_copy(update={"verdict": None}).model_dump(mode="json"))
    assert bare is not None and bare.architecture_families is None  # no verdict: no warning either way


def test_the_per_turn_table_gets_the_executed_opcodes() -> None:
    from mini_ptx_agent.runs.turns import _evaluated

    fast = fast_cuda(["wgmma", "TMA"])
    assert _evaluated(fast)["executed_families"] is None  # not profiled
    fast.ncu = NcuResult(
        workload="w0", kernel_hash="h", executed_opcodes={"HGMMA": 8, "IMAD": 90, "UTMALDG": 2}
    )
    assert _evaluated(fast)["executed_families"] == ["HGMMA", "UTMALDG"]
    fast.ncu = NcuResult(workload="w0", kernel_hash="h", error="the candidate failed")
    assert _evaluated(fast)["executed_families"] is None
