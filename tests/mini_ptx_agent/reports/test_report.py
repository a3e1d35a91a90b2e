"""`ptxbench report` on synthetic rows and run directories whose answers were computed by hand (synthetic.py)."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
from mini_ptx_agent.cli import app
from mini_ptx_agent.reports.inputs import ReportError, read_source
from mini_ptx_agent.reports.metrics import metrics_by_group, trajectories
from mini_ptx_agent.reports.report import build_report, parse_turn_limits
from mini_ptx_agent.reports.stats import bootstrap, geometric_mean, wilson
from synthetic import alpha_beta_rows, row, write_experiment_plan, write_run_dir, write_turns_csv
from typer.testing import CliRunner


def test_wilson_intervals_match_hand_computed_bounds():
    # p = 1/4, z = 1.96: center (0.25 + z^2/8) / (1 + z^2/4) = 0.37247, half-width 0.32688.
    e = wilson(1, 4)
    assert (e.value, round(e.low, 4), round(e.high, 4), e.n) == (0.25, 0.0456, 0.6994, 4)
    # 0 of 1: the lower bound is 0 and the upper (z^2/2 + z*sqrt(z^2/4)) / (1 + z^2) = z^2 / (1 + z^2) = 0.7935.
    assert (wilson(0, 1).low, round(wilson(0, 1).high, 4)) == (0.0, 0.7935)
    assert wilson(0, 0).value is None and wilson(0, 0).n == 0
    with pytest.raises(ValueError, match=r"in 0\.\.n"):
        wilson(5, 4)


def test_bootstrap_is_seeded_and_brackets_the_statistic():
    values = [0.8, 1.5, 2.0]
    median, geo = bootstrap(values, np.median, geometric_mean)
    assert median.value == 1.5 and 0.8 <= median.low <= 1.5 <= median.high <= 2.0 and median.n == 3
    assert bootstrap(values, np.median) == (median,)  # same seed, same interval
    assert math.isclose(geo.value, 2.4 ** (1 / 3))
    assert bootstrap([1.7], np.median)[0].model_dump() == {"value": 1.7, "low": 1.7, "high": 1.7, "n": 1}
    assert bootstrap([], np.median)[0].value is None


def test_metrics_of_the_synthetic_rows_are_the_hand_computed_ones():
    metrics = {
        (m.group, m.turn_limit): m
        for m in metrics_by_group(trajectories(alpha_beta_rows()), "model", [1, 4, 8])
    }
    alpha = {t: metrics["alpha", t] for t in (1, 4, 8)}
    assert [alpha[t].correct.value for t in (1, 4, 8)] == [0.25, 0.5, 0.75]
    assert {alpha[t].correct.n for t in (1, 4, 8)} == {4} and alpha[8].unknown == 0
    assert [alpha[t].speedup_median.value for t in (1, 4, 8)] == [0.8, 1.15, 1.5]
    assert [alpha[t].speedup_median.n for t in (1, 4, 8)] == [1, 2, 3]
    assert math.isclose(alpha[4].speedup_geomean.value, math.sqrt(0.5 * 0 + 1.5 * 0.8))
    assert math.isclose(alpha[8].speedup_geomean.value, (1.5 * 2.0 * 0.8) ** (1 / 3))
    assert [alpha[t].target.value for t in (1, 4, 8)] == [0.0, 0.25, 0.5]
    # a2 reached 2.0x with HGMMA but no UTMALDG: correct, not verified. a1's 1.5x turn was confirmed by Nsight.
    assert [alpha[t].verified.value for t in (1, 4, 8)] == [0.25, 0.5, 0.5]
    assert [alpha[t].nsight_confirmed for t in (1, 4, 8)] == [0, 1, 1]
    # beta: b1 (not executed, then incorrect) and b2 (outage) are unknown, never counted against the model.
    beta = metrics["beta", 8]
    assert (beta.trajectories, beta.unknown, beta.correct.value, beta.correct.n) == (3, 2, 0.0, 1)
    assert beta.speedup_median.value is None and beta.speedup_median.n == 0


def test_a_turn_repeated_is_refused():
    with pytest.raises(ValueError, match="given twice"):
        trajectories([row("a1", 1, "format"), row("a1", 1, "format")])


@pytest.fixture(scope="module")
def experiment_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("experiment")
    write_turns_csv(root / "exp" / "turns.csv", alpha_beta_rows())
    manifest = {  # the parts of a ptxbench.experiment-manifest/1 a report reads
        "schema_version": "ptxbench.experiment-manifest/1", "packages": {"fibserve": "0.1.0", "litellm": None},
        "git": {"commit": "abc123", "dirty": True},
        "service": {"health": {"version": "0.1.0"}, "traces": {"hardware": ["NVIDIA H200"], "libs": {"torch": "2.9.1"}},
                    "devices": {"cuda:0": {"device": "cuda:0", "name": "NVIDIA H200", "driver": "570.86",
                                           "start": {"sm_clock_mhz": 1980.0, "max_sm_clock_mhz": 1980.0}}}},
        "config": {"models": [{"name": "alpha", "release_date": "2025-03-01"},
                              {"name": "beta", "release_date": "2025-09-15"}]},
    }  # fmt: skip
    (root / "exp" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return build_report([root / "exp"], root / "out"), root / "out"


def test_an_experiment_report_writes_the_page_figures_and_their_tables(experiment_report):
    result, out = experiment_report
    names = {p.name for p in out.iterdir()}
    for figure in ("metrics_vs_turn_limit", "metrics_vs_release_date", "definition_model_heatmap",
                   "prompt_tag_comparison", "tokens_vs_speedup"):  # fmt: skip
        assert {f"{figure}.png", f"{figure}.csv"} <= names, figure
        assert (out / f"{figure}.png").read_bytes().startswith(b"\x89PNG")
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 5
    assert "http://" not in page and "https://" not in page and "<script" not in page  # opens offline
    for words in ("correct@T", "best speedup@T", "verified@T", "tokens vs speedup", "Wilson", "bootstrap"):
        assert words in page
    assert "75% [30%, 95%] n=4" in page and "1.50x [" in page
    assert (
        "NVIDIA H200" in page and "570.86" in page and "cuda:0: SM 1980 MHz at start (max 1980 MHz)" in page
    )
    assert result.provenance.versions == {"FIBServe service": "0.1.0", "fibserve": "0.1.0",
                                          "git commit": "abc123 (dirty)", "torch": "2.9.1"}  # fmt: skip
    with (out / "metrics.csv").open(encoding="utf-8") as handle:
        rows = {(r["group"], r["turn_limit"]): r for r in csv.DictReader(handle)}
    assert float(rows["alpha", "8"]["correct"]) == 0.75 and rows["alpha", "8"]["correct_n"] == "4"
    assert rows["beta", "8"]["speedup_median"] == "" and rows["beta", "8"]["unknown"] == "2"
    with (out / "metrics_vs_release_date.csv").open(encoding="utf-8") as handle:
        assert [r["release_date"] for r in csv.DictReader(handle)] == ["2025-03-01", "2025-09-15"]
    assert result.trajectories == 7 and result.turns == 21
    assert any("1 turns were built but not executed" in w for w in result.provenance.warnings)


def test_run_directories_are_read_through_their_turns_with_hardware_and_baselines(tmp_path):
    exp = tmp_path / "exp"
    write_run_dir(exp, "t1", [("INCORRECT_NUMERICAL", None), ("PASSED", 1.3)])
    write_run_dir(exp, "t2", [("FORMAT_ERROR", None), ("PASSED", 0.9)])
    result = build_report([exp], tmp_path / "out", turn_limits=[1, 2])
    at = {m.turn_limit: m for m in result.metrics}
    assert (at[1].correct.value, at[2].correct.value, at[2].speedup_median.value) == (0.0, 1.0, 1.1)
    assert at[2].target.value == 0.5 and at[2].verified.value == 1.0
    assert result.provenance.gpus == ["NVIDIA H200"]
    assert result.provenance.baselines == {
        "gemm_n7168_k5120": ["gemm_baseline: cuBLAS-free tiled wgmma GEMM"]
    }
    assert result.provenance.driver == "unknown" and result.provenance.warnings == []
    # The same trajectories as single run directories: the same numbers.
    again = build_report([exp / "t1", exp / "t2"], tmp_path / "out2", turn_limits=[1, 2])
    assert [m.correct for m in again.metrics] == [m.correct for m in result.metrics]
    with pytest.raises(ReportError, match="given twice"):
        build_report([exp / "t1", exp / "t1"], tmp_path / "out3")


def test_a_half_finished_experiment_reports_what_finished_and_says_what_did_not(tmp_path):
    exp = tmp_path / "exp"
    write_run_dir(exp, "t1", [("PASSED", 1.3)])
    write_run_dir(exp, "t2", [])  # started, no reply yet
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    with pytest.raises(ReportError, match=r"cannot write the report into .*a-file.*give another --out"):
        build_report([exp], tmp_path / "a-file")
    result = build_report([exp], tmp_path / "out")
    assert result.trajectories == 1
    assert any("1 trajectory directories have no finished turn yet" in w for w in result.provenance.warnings)
    # Laid out as `ptxbench experiment` does: plan.json names the trajectories (one not started), runs/<id>/.
    exp2 = tmp_path / "exp2"
    write_run_dir(exp2 / "runs", "t0001", [("PASSED", 1.3)])
    write_experiment_plan(exp2, "gemm-smoke", {"t0001": 3, "t0002": 0})
    result = build_report([exp2], tmp_path / "out2")
    assert {(r.experiment, r.trajectory, r.replica) for r in read_source(exp2).rows} == {
        ("gemm-smoke", "t0001", 3)
    }
    assert result.provenance.inputs == [
        f"{exp2} (experiment: 1 trajectories, 1 turns, 1 without a finished turn)"
    ]
    assert any("1 trajectory directories have no finished turn yet" in w for w in result.provenance.warnings)


def test_an_empty_experiment_is_a_clear_error_without_a_traceback(tmp_path):
    exp = tmp_path / "exp"
    write_run_dir(exp, "t1", [])
    runner = CliRunner()
    done = runner.invoke(app, ["report", str(exp), "--out", str(tmp_path / "out")])
    assert done.exit_code == 2 and "Traceback" not in done.output
    assert "no finished turn to report on yet (1 trajectory directories without one)" in done.output
    assert not (tmp_path / "out").exists()
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    done = runner.invoke(app, ["report", str(nothing)])
    assert done.exit_code == 2 and "holds no turns.csv and no run directory" in done.output
    assert runner.invoke(app, ["report", str(exp), "--turn-limits", "0,4"]).exit_code == 2


def test_demo_trajectories_count_only_when_asked_and_marked(tmp_path):
    rows = [row("a1", 1, "PASSED", 1.3, demo=True)]
    write_turns_csv(tmp_path / "exp" / "turns.csv", rows)
    with pytest.raises(ReportError, match="only demo trajectories"):
        build_report([tmp_path / "exp"], tmp_path / "out")
    result = build_report([tmp_path / "exp"], tmp_path / "out", include_demo=True)
    assert [m.group for m in result.metrics] == ["alpha (demo)"]  # one turn limit: the one turn made
    assert any("not by a model" in w for w in result.provenance.warnings)


def test_the_command_prints_the_table_and_json(experiment_report, tmp_path):
    _, out = experiment_report
    exp = out.parent / "exp"
    runner = CliRunner()
    done = runner.invoke(app, ["report", str(exp), "--out", str(tmp_path / "r"), "--by", "tag", "--turn-limits", "2,1"],
                         env={"COLUMNS": "250"})  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "hopper-no-hint" in done.output and "report.html" in done.output
    done = runner.invoke(app, ["report", str(exp), "--out", str(tmp_path / "j"), "--json"])
    data = json.loads(done.stdout)
    assert data["turn_limits"] == [1, 4, 8] and data["html"].endswith("report.html")
    assert parse_turn_limits("8, 1,4,4") == [1, 4, 8]


LONG_REPLAY = "replay:/home/someone/data/eval_runs/run-20261203T141901Z-cuda-gemm_n7168_k5120/trajectories/exp_000.traj.json"


def _long_named_rows() -> list:
    """alpha_beta_rows with the names a new user's runs have: a replay path and a dated hosted model."""
    models = {"alpha": LONG_REPLAY, "beta": "anthropic/claude-sonnet-4-5-20250929"}
    return [r.model_copy(update={"model": models[r.model]}) for r in alpha_beta_rows()]


def test_replay_models_are_labelled_by_their_run_not_their_whole_path(tmp_path):
    write_turns_csv(tmp_path / "exp" / "turns.csv", _long_named_rows())
    result = build_report([tmp_path / "exp"], tmp_path / "out")
    assert {m.group for m in result.metrics} == {
        "replay:run-20261203T141901Z-cuda-gemm_n7168_k5120", "anthropic/claude-sonnet-4-5-20250929",
    }  # fmt: skip
    # Two replays whose short labels would collide keep their full names: groups are never merged.
    twins = [r.model_copy(update={"model": f"replay:/{d}/trajectories/exp_000.traj.json"}) for d, r in
             (("a/run-1", row("a1", 1, "PASSED", 1.3)), ("b/run-1", row("b1", 1, "PASSED", 1.1)))]  # fmt: skip
    assert {t.label("model") for t in trajectories(twins)} == {
        "replay:/a/run-1/trajectories/exp_000.traj.json", "replay:/b/run-1/trajectories/exp_000.traj.json",
    }  # fmt: skip


def test_turn_limits_default_to_the_turns_that_exist(tmp_path):
    exp = tmp_path / "exp"
    write_run_dir(exp, "t1", [("INCORRECT_NUMERICAL", None), ("PASSED", 1.3), ("PASSED", 1.4)])
    result = build_report([exp], tmp_path / "out")
    assert result.turn_limits == [1, 3]
    assert {m.turn_limit for m in result.metrics} == {1, 3}
    write_turns_csv(tmp_path / "eight" / "turns.csv", alpha_beta_rows())  # a3 made 8 turns
    assert build_report([tmp_path / "eight"], tmp_path / "out8").turn_limits == [1, 4, 8]


def _figures_drawn(monkeypatch) -> dict:
    """Capture each matplotlib figure the report saves (the real drawing and PNG are kept)."""
    from mini_ptx_agent.reports import figures

    drawn: dict = {}
    real = figures._png

    def keep(fig):
        png = real(fig)
        drawn[len(drawn)] = (fig, png)
        return png

    monkeypatch.setattr(figures, "_png", keep)
    return drawn


def test_no_legend_covers_a_plot_and_no_label_is_cut_off(tmp_path, monkeypatch):
    from PIL import Image

    drawn = _figures_drawn(monkeypatch)
    write_turns_csv(tmp_path / "exp" / "turns.csv", _long_named_rows())
    result = build_report([tmp_path / "exp"], tmp_path / "out")
    assert len(drawn) == 4  # turn limits, heatmap, prompt tags, tokens (no release dates)
    for fig, png in drawn.values():
        fig.draw_without_rendering()
        renderer = fig._get_renderer()
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        for legend in legends:
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                assert not box.overlaps(ax.get_window_extent(renderer)), f"a legend covers a plot of {fig}"
        # A label cut off at the image's edge leaves drawn pixels on that edge; the image keeps a white margin.
        image = Image.open(io.BytesIO(png)).convert("L")
        width, height = image.size
        edges = [image.crop(box) for box in ((0, 0, width, 1), (0, height - 1, width, height),
                                             (0, 0, 1, height), (width - 1, 0, width, height))]  # fmt: skip
        assert all(edge.getextrema()[0] > 240 for edge in edges), "something is drawn up to the image's edge"
    assert (tmp_path / "out" / "definition_model_heatmap.png").is_file() and result.trajectories == 7


def test_a_cpu_only_experiment_says_no_gpu_driver_and_that_nothing_was_timed(tmp_path):
    exp = tmp_path / "exp"
    write_run_dir(exp / "runs", "t0001", [("PASSED", None)], hardware="cpu")
    cpu = {"device": "cpu", "name": "cpu", "driver": "x86_64", "start": {"sm_clock_mhz": None}}
    manifest = {"service": {"devices": {"cpu": cpu}, "traces": {"hardware": ["cpu"]}}}
    (exp / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for path in (exp / "runs").rglob("turn_*.json"):  # evaluated on the CPU lane: not timed
        report = json.loads(path.read_text())
        report["executed_on_gpu"] = False
        for workload in report["workloads"]:
            workload |= {"executed_on_gpu": False, "baseline": None, "speedup_basis": None}
        path.write_text(json.dumps(report))
    result = build_report([exp], tmp_path / "out")
    assert result.provenance.driver == "none: the service had CPU lanes only (no GPU driver)"
    assert "x86_64" not in result.provenance.driver and result.provenance.gpu_timed is False
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "none: no kernel was timed on a GPU, so no speedup was measured" in page
    assert "(any)</td><td>unknown" not in page


def test_the_page_drills_down_to_each_turn_of_each_trajectory(tmp_path):
    exp = tmp_path / "exp"
    write_run_dir(exp, "t1", [("FORMAT_ERROR", None), ("INCORRECT_NUMERICAL", None), ("PASSED", 1.3)])
    result = build_report([exp], tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    drill = page[page.index('<div id="trajectories">') :]
    assert "exp / t1</code>: gamma, gemm_n7168_k5120, cuda, hopper-no-hint; 3 turns" in drill
    assert "FORMAT_ERROR, INCORRECT_NUMERICAL, PASSED" in drill
    assert "<td>no kernel</td>" in drill and "// the kernel of turn 3" in drill and "1.300x" in drill
    assert "feedback of turn 2" in drill and result.trajectories == 1


def test_a_piped_summary_keeps_each_row_on_one_line(experiment_report, tmp_path):
    _, out = experiment_report
    done = CliRunner().invoke(app, ["report", str(out.parent / "exp"), "--out", str(tmp_path / "r")],
                              env={"COLUMNS": None})  # fmt: skip
    assert done.exit_code == 0, done.output
    (row,) = [line for line in done.output.splitlines() if "alpha" in line and "│ 8 " in line]
    assert "75% [30%, 95%] n=4" in row and "Nsight-confirmed" in row, done.output
