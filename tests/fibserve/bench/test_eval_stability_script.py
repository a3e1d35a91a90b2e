"""benchmarks/eval_stability.py without a GPU: which workloads an --axis names, and the table of a result."""

from __future__ import annotations

import pytest
from fibserve.datasets import default_root
from fibserve.trace.trace_set import TraceSet


@pytest.fixture(scope="module")
def script(load_benchmark):
    return load_benchmark("eval_stability.py")


@pytest.fixture(scope="module")
def gemm_workloads() -> list:
    return TraceSet.load([default_root()]).workloads_for("gemm_n7168_k5120")


def test_all_names_every_workload_and_a_value_names_its_own(script, gemm_workloads) -> None:
    assert [w.axes["M"] for w in script.select_workloads(gemm_workloads, "all")] == [70, 232, 972, 2379, 8192]
    assert [w.axes["M"] for w in script.select_workloads(gemm_workloads, "M=232")] == [232]
    assert [w.axes["M"] for w in script.select_workloads(gemm_workloads, "M=8192,232")] == [232, 8192]


@pytest.mark.parametrize(
    ("axis", "message"),
    [
        ("M=71", r"M=71 names no workload; M takes \[70, 232, 972, 2379, 8192\] here"),
        ("M=70,71", r"M=71 names no workload"),
        ("M=70,", "give NAME=VALUE"),
        ("M", "give NAME=VALUE"),
        ("seq_len=4096", "seq_len takes no value"),
    ],
)
def test_an_axis_that_names_no_workload_says_what_there_is(script, gemm_workloads, axis, message) -> None:
    with pytest.raises(ValueError, match=message):
        script.select_workloads(gemm_workloads, axis)


def _run() -> dict:
    """One run's row as the script keeps it."""
    return {
        "run": 0, "speedup": 1.004, "speedup_p10": 0.99, "speedup_p90": 1.01, "ratio_of_medians": 1.003,
        "candidate_ms": {"median": 0.03, "p10": 0.029, "p90": 0.031}, "reference_ms": {"median": 0.0301},
        "vs_reference": 40.0, "roofline_fraction": 0.4, "sm_clock_start": 1980, "sm_clock_end": 1980,
        "power_start_w": 120, "power_end_w": 300, "temp_start_c": 40, "temp_end_c": 45,
        "timing_basis": "device", "candidate_released": True, "reference_released": False, "wall_s": 3.1,
    }  # fmt: skip


def test_the_table_gives_one_verdict_line_per_workload_then_its_runs(script) -> None:
    run = _run()
    result = {
        "definition": "gemm_n7168_k5120",
        "axis": "all",
        "baseline": "torch_matmul",
        "band": [0.99, 1.01],
        "all_within_band": False,
        "workloads": [
            {"workload": "a" * 36, "axes": {"M": 70}, "speedup_min": 1.004, "speedup_max": 1.004,
             "all_within_band": True, "runs": [run]},
            {"workload": "b" * 36, "axes": {"M": 232}, "speedup_min": None, "speedup_max": None,
             "all_within_band": False, "runs": [{"run": 0, "error": "RUNTIME_ERROR"}]},
        ],
    }  # fmt: skip
    lines = script._table(result)
    assert lines[0].endswith(": FAIL") and "(all)" in lines[0]
    assert lines[4] == "| aaaaaaaa | M=70 | 1.004 | 1.004 | yes |"
    assert lines[5] == "| bbbbbbbb | M=232 | None | None | no |"
    assert "### M=70" in lines and "### M=232" in lines
    assert any(
        line.startswith("| 0 | 1.0040 |") and line.endswith("| device | True/False | 3.1 |") for line in lines
    )
    assert any(line.startswith("| 0 | error: RUNTIME_ERROR |") for line in lines)


def test_a_run_reads_the_basis_slots_release_and_events_over_span_from_the_timing_facts(
    script, capsys
) -> None:
    import types

    from fibserve.trace import Performance

    summary = {"median": 0.027, "p10": 0.0265, "p90": 0.028}
    extra = {
        "candidate_ms": summary, "reference_ms": summary, "speedup_p10": 0.97, "speedup_p90": 1.03,
        "timing_basis": "device", "events_over_span_ms": {"reference": 0.0025, "candidate": 0.0033}, "slots": 16,
        "l2_overwrite": {"candidate_released": False, "reference_released": True},
        "device_start": {"sm_clock_mhz": 1980.0}, "device_end": {"sm_clock_mhz": 1980.0},
    }  # fmt: skip
    performance = Performance(latency_ms=0.027, reference_latency_ms=0.027, speedup_factor=1.0, extra=extra)
    report = types.SimpleNamespace(
        traces=[types.SimpleNamespace(evaluation=types.SimpleNamespace(performance=performance))],
        timings_s={"reference": 1.5049, "timing": 12.2, "total": 20.0},
    )
    evaluator = types.SimpleNamespace(evaluate=lambda *args, **kwargs: report)
    row = script._measured(evaluator, None, None, None, None, 0)
    assert (row["timing_basis"], row["candidate_released"], row["reference_released"]) == (
        "device",
        False,
        True,
    )
    assert row["events_over_span_ms"] == {"reference": 0.0025, "candidate": 0.0033}
    assert row["wall_s"] >= 0.0  # how long the evaluation took: the CUPTI start-up showed there
    out = capsys.readouterr().out
    assert row["slots"] == 16  # the placements each side's latency is a median over
    # where the evaluation's time went, phase by phase (seq_len 16384 took 83 s, unexplained)
    assert row["phases_s"] == {"reference": 1.5, "timing": 12.2, "total": 20.0}
    assert "basis device, 16 slots, released False/True" in out and out.rstrip().endswith(
        f"{row['wall_s']} s (reference 1.5, timing 12.2, total 20.0)"
    )


def test_a_workload_passes_only_once_every_run_is_in_and_within_the_band(script) -> None:
    """The verdict is kept after every run (a step cut short keeps its runs), so a part must not pass."""
    within = [{"run": i, "speedup": 1.0 + 0.002 * i} for i in range(3)]
    assert script.summarise(within[:2], 3, 0.01) == {
        "speedup_min": 1.0,
        "speedup_max": 1.002,
        "all_within_band": False,
    }
    assert script.summarise(within, 3, 0.01)["all_within_band"] is True
    assert (
        script.summarise([*within[:2], {"run": 2, "error": "timeout"}], 3, 0.01)["all_within_band"] is False
    )
    assert script.summarise([*within[:2], {"run": 2, "speedup": 1.0101}], 3, 0.01)["all_within_band"] is False
    assert script.summarise([], 3, 0.01) == {
        "speedup_min": None,
        "speedup_max": None,
        "all_within_band": False,
    }


def test_a_result_cut_short_is_written_and_reads_as_a_fail(script, tmp_path) -> None:
    import argparse
    import json
    from types import SimpleNamespace

    args = argparse.Namespace(
        definition="gemm_n7168_k5120", axis="M=70", band=0.01, commit="43a0709", call="c1"
    )
    run = _run()
    entry = {"workload": "3817345d-2b16", "axes": {"M": 70}, "runs": [run]}
    entry.update(script.summarise(entry["runs"], 10, 0.01))
    result = script._result(args, SimpleNamespace(name="gemm_baseline"), [entry])
    lines = script._write(tmp_path, result)
    assert (
        json.loads((tmp_path / "eval_stability.json").read_text())["workloads"][0]["runs"][0]["speedup"]
        == 1.004
    )
    assert "FAIL" in lines[0] and (tmp_path / "eval_stability.md").read_text().startswith(lines[0])
    assert "commit 43a0709" in lines[0] and result["calls"] == ["c1"]


def _part(commit: str | None, speedups: list[float], axis: str = "seq_len=16384") -> dict:
    """A result of one device call as the script writes it: one workload, a run per speedup."""
    import uuid

    runs = [{**_run(), "run": i, "speedup": x} for i, x in enumerate(speedups)]
    return {
        "commit": commit,
        "calls": [uuid.uuid4().hex],
        "definition": "mha_with_lse_d128",
        "axis": axis,
        "baseline": "cudnn_sdpa",
        "band": [0.99, 1.01],
        "all_within_band": False,
        "workloads": [{"workload": "b6b86bc4", "axes": {"seq_len": 16384}, "runs": runs}],
    }


def test_two_calls_of_one_commit_join_into_one_verdict_over_all_their_runs(script) -> None:
    """Ten runs at seq_len 16384 do not fit one device call: seven and three, joined, pass as ten."""
    joined = script.join([_part("abc1234", [1.0] * 7), _part("abc1234", [1.001, 0.999, 1.002])], 10)
    (workload,) = joined["workloads"]
    assert [r["run"] for r in workload["runs"]] == list(range(10))
    assert [r["speedup"] for r in workload["runs"]][7:] == [1.001, 0.999, 1.002]
    assert workload["all_within_band"] is True and joined["all_within_band"] is True
    assert workload["speedup_min"] == 0.999 and workload["speedup_max"] == 1.002
    assert (
        script.join([_part("abc1234", [1.0] * 7), _part("abc1234", [1.0, 1.0])], 10)["all_within_band"]
        is False
    )
    outside = script.join([_part("abc1234", [1.0] * 7), _part("abc1234", [1.0, 1.0, 1.0, 1.011])], 10)
    assert outside["all_within_band"] is False  # eleven runs, one outside: more runs never hide one
    edge = script.join([_part("abc1234", [1.0] * 9), _part("abc1234", [1.01])], 10)
    assert (
        edge["all_within_band"] is script.summarise(edge["workloads"][0]["runs"], 10, 0.01)["all_within_band"]
    )


def test_an_error_among_more_than_enough_runs_still_fails(script) -> None:
    runs = [{"run": i, "speedup": 1.0} for i in range(10)] + [{"run": 10, "error": "timeout"}]
    assert script.summarise(runs, 10, 0.01)["all_within_band"] is False


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (_part("def5678", [1.0] * 3), "differ in commit"),
        (_part(None, [1.0] * 3), "names no commit"),
        ({**_part("abc1234", [1.0] * 3), "calls": []}, "names no commit or call"),
        ({**_part("abc1234", [1.0] * 3), "baseline": "torch_matmul"}, "differ in baseline"),
        ({**_part("abc1234", [1.0] * 3), "band": [0.98, 1.02]}, "differ in band"),
    ],
)
def test_results_of_another_commit_or_baseline_are_not_joined(script, second, message) -> None:
    with pytest.raises(ValueError, match=message):
        script.join([_part("abc1234", [1.0] * 7), second], 10)


def test_join_from_the_command_line_writes_one_result_and_says_why_it_refuses(tmp_path) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    script_path = Path(__file__).resolve().parents[3] / "benchmarks" / "eval_stability.py"
    first, second, bad = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    first.write_text(json.dumps(_part("abc1234", [1.0] * 7)))
    second.write_text(json.dumps(_part("abc1234", [1.001] * 3)))
    bad.write_text(json.dumps(_part("def5678", [1.0])))
    out = tmp_path / "joined"
    done = subprocess.run(
        [sys.executable, str(script_path), "--join", str(first), str(second), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "commit abc1234: PASS" in done.stdout
    assert len(json.loads((out / "eval_stability.json").read_text())["workloads"][0]["runs"]) == 10
    refused = subprocess.run(
        [sys.executable, str(script_path), "--join", str(first), str(bad), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "differ in commit" in refused.stderr
    assert "commit abc1234: PASS" in (out / "eval_stability.md").read_text()  # the refused join wrote nothing


def test_one_calls_runs_given_twice_are_refused_so_five_runs_never_count_as_ten(script) -> None:
    part = _part("abc1234", [1.0] * 5)
    with pytest.raises(ValueError, match="given twice"):
        script.join([part, part], 10)
    joined = script.join([part, _part("abc1234", [1.0] * 5)], 10)
    with pytest.raises(ValueError, match="given twice"):  # a joined result holds its parts' calls
        script.join([joined, part], 10)


def test_a_short_commit_joins_the_full_one_it_begins(script) -> None:
    joined = script.join([_part("43a0709", [1.0] * 5), _part("43a070938c3b2aeb", [1.0] * 5)], 10)
    assert joined["commit"] == "43a070938c3b2aeb" and joined["all_within_band"] is True
    with pytest.raises(ValueError, match="differ in commit"):
        script.join([_part("43a0709", [1.0] * 5), _part("43a0708ffff", [1.0] * 5)], 10)
    with pytest.raises(ValueError, match="differ in commit"):  # "4" begins every commit that begins with 4
        script.join([_part("4", [1.0] * 5), _part("43a0709", [1.0] * 5)], 10)


def test_results_with_no_workload_join_into_a_fail(script) -> None:
    empty = {**_part("43a0709", []), "workloads": []}
    assert script.join([empty], 10)["all_within_band"] is False
