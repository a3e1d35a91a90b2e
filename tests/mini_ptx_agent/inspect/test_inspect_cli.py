"""`ptxbench-inspect` before its UI starts: what each kind of path opens as (``--json``), one clear message and
exit 2 for anything it cannot show, and the keys in ``--help``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from inspect_inputs import agent_run, demo_run, experiment_dir, sft_datasets
from mini_ptx_agent.data.rows import SFTRow
from mini_ptx_agent.inspect.keys import KEYS
from mini_ptx_agent.inspect.readers.sft import open_sft, parse_row
from mini_ptx_agent.inspect_cli import app
from mini_ptx_agent.runs.directory import RunLayout
from typer.testing import CliRunner


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inputs")
    experiment = experiment_dir(root)
    return {"run": agent_run(root), "demo": demo_run(root), "experiment": experiment,
            **sft_datasets(root, experiment)}  # fmt: skip


def inspect(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_each_kind_of_input_is_told_apart_and_described(inputs: dict[str, Path]) -> None:
    code, out = inspect(str(inputs["run"]), "--json")
    run = json.loads(out)
    assert code == 0 and (run["kind"], run["definition"], run["language"], run["demo"]) == (
        "run", "vector_add_f32", "triton", False)  # fmt: skip
    assert [t["status"] for t in run["turns"]] == [
        "FORMAT_ERROR",
        "COMPILE_ERROR",
        "INCORRECT_NUMERICAL",
        "PASSED",
    ]
    assert run["turns"][3]["min_speedup"] == 0.8 and run["exit_status"] == "LimitsExceeded"

    bare = json.loads(inspect(str(RunLayout(inputs["demo"]).trajectory_path), "--json")[1])
    assert (bare["kind"], bare["model"], bare["demo"], bare["definition"]) == (
        "trajectory", "demo", True, "gemm_n7168_k5120")  # fmt: skip

    experiment = json.loads(inspect(str(inputs["experiment"]), "--json")[1])
    entries = {e["trajectory"].split(".")[2] + e["trajectory"][-3:]: e for e in experiment["trajectories"]}
    assert experiment["turns_from"] == "turns.csv" and len(entries) == 4
    assert (entries["scripted-good.r0"]["best_speedup"], entries["scripted-good.r0"]["correct"]) == (
        0.8,
        True,
    )
    assert (entries["scripted-broken.r0"]["correct"], entries["scripted-broken.r0"]["turns"]) == (False, 3)
    assert (entries["scripted-broken.r1"]["status"], entries["scripted-broken.r1"]["correct"]) == (
        "pending",
        None,
    )
    # The experiment's turns.csv opens the experiment; an SFT file its rows, the first one as the pipeline wrote it.
    assert json.loads(inspect(str(inputs["experiment"] / "turns.csv"), "--json")[1])["kind"] == "experiment"
    written = json.loads((inputs["fixit"] / "sft.jsonl").read_text().splitlines()[0])
    for name in ("sft.jsonl", "sft.parquet"):
        sft = json.loads(inspect(str(inputs["fixit"] / name), "--json")[1])
        assert (sft["kind"], sft["rows"]) == ("sft", 2)
        assert sft["first_row"] == {k: v for k, v in written.items() if k != "messages"} | {
            "roles": ["system", "user", "assistant", "user", "assistant"]}  # fmt: skip
    kernelgen = json.loads(inspect(str(inputs["kernelgen"] / "sft.parquet"), "--json")[1])
    assert kernelgen["rows"] == 1 and kernelgen["first_row"]["loss_mask"] == [0, 0, 1]
    assert (
        kernelgen["first_row"]["fix"] is None and kernelgen["first_row"]["provenance"]["status"] == "PASSED"
    )


def bad_inputs(root: Path, inputs: dict[str, Path]) -> dict[str, tuple[Path, str]]:
    """Each bad input and the words its message must hold."""
    trajectory = RunLayout(inputs["run"]).trajectory_path.read_text()
    row = json.loads((inputs["fixit"] / "sft.jsonl").read_text().splitlines()[0])
    files = {
        "truncated.json": trajectory[: len(trajectory) // 2],
        "other.json": json.dumps({"rows": [1, 2]}),
        "format.json": json.dumps({"messages": [], "trajectory_format": "mini-swe-agent-9"}),
        "notes.txt": "hello",
        "empty.jsonl": "",
        "chat.jsonl": json.dumps({"prompt": "p", "completion": "c"}) + "\n",
        "broken.jsonl": '{"messages": [{"role": "user", "content": "x"}]\n',
        "newer.jsonl": json.dumps(row | {"format": "ptxbench.sft/2"}) + "\n",
        "unmasked.jsonl": json.dumps(row | {"loss_mask": [0, 1]}) + "\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    pq.write_table(pa.table({"prompt": ["p"]}), root / "prompts.parquet")
    (root / "table.parquet").write_text("not parquet")
    old_run = shutil.copytree(inputs["run"], root / "old-run")
    plan = json.loads((old_run / "plan.json").read_text())
    (old_run / "plan.json").write_text(json.dumps(plan | {"schema_version": "ptxbench.run/9"}))
    old_exp = root / "old-exp"
    old_exp.mkdir()
    (old_exp / "plan.json").write_text(json.dumps({"schema_version": "ptxbench.experiment/0", "name": "x"}))
    started = root / "started"
    started.mkdir()
    (started / "plan.json").write_text((inputs["run"] / "plan.json").read_text())
    return {
        "missing": (root / "nothing", "does not exist"),
        "truncated": (root / "truncated.json", "truncated?"),
        "not a trajectory": (root / "other.json", "has no 'messages' list"),
        "unknown trajectory format": (
            root / "format.json",
            "format 'mini-swe-agent-9'; expected 'mini-swe-agent-1.1'",
        ),
        "another suffix": (root / "notes.txt", ".txt is not a kind the inspector reads"),
        "empty JSONL": (root / "empty.jsonl", "is empty"),
        "not SFT rows": (
            root / "chat.jsonl",
            "is not an SFT file this inspector reads: row 1 of chat.jsonl has no 'format' field: SFT rows are "
            "'ptxbench.sft/1' objects",
        ),
        "another SFT format version": (
            root / "newer.jsonl",
            "row 1 of newer.jsonl has format 'ptxbench.sft/2'; this inspector reads 'ptxbench.sft/1'",
        ),
        "an SFT row that does not validate": (
            root / "unmasked.jsonl",
            "row 1 of unmasked.jsonl does not validate as 'ptxbench.sft/1' (the row: Value error, one loss-mask "
            "entry per message",
        ),
        "a broken JSON row": (root / "broken.jsonl", "row 1 of broken.jsonl is not JSON"),
        "parquet of other rows": (root / "prompts.parquet", "row 1 of prompts.parquet has no 'format' field"),
        "not parquet": (root / "table.parquet", "is not a parquet file"),
        "unknown run version": (
            old_run,
            "format version 'ptxbench.run/9'; this inspector reads 'ptxbench.run/1'",
        ),
        "unknown experiment version": (old_exp, "format version 'ptxbench.experiment/0'"),
        "a directory of neither kind": (
            root,
            "has no plan.json: it is neither a run nor an experiment directory",
        ),
        "a run before its first turn": (started, "a run directory without a trajectory yet"),
    }


def test_what_cannot_be_shown_is_one_clear_message_and_exit_2(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    for what, (path, words) in bad_inputs(tmp_path, inputs).items():
        code, out = inspect(str(path), "--json")
        assert code == 2, what
        assert out.startswith("ptxbench-inspect: ") and words in " ".join(out.split()), (what, out)


def test_without_a_terminal_the_ui_is_refused_with_a_hint(inputs: dict[str, Path]) -> None:
    code, out = inspect(str(inputs["run"]))
    assert code == 2 and "needs a terminal; --json prints what PATH holds" in out


def test_help_explains_the_inputs_and_every_key() -> None:
    code, out = inspect("--help")
    assert code == 0 and "an experiment directory" in out and "SFT rows in" in out
    for key in KEYS:
        assert key.description in out, key


def test_rows_are_read_with_the_pipelines_model_ignoring_fields_it_does_not_know(
    inputs: dict[str, Path],
) -> None:
    """A row is the data pipeline's :class:`SFTRow`, the same from JSONL and parquet; a field a later writer
    adds (at the top or inside the provenance) is ignored, as the format asks of readers."""
    line = (inputs["fixit"] / "sft.jsonl").read_text().splitlines()[1]
    written = SFTRow.model_validate_json(line)
    assert (
        open_sft(inputs["fixit"] / "sft.jsonl").row(1)
        == written
        == open_sft(inputs["fixit"] / "sft.parquet").row(1)
    )
    assert written.loss_mask == [0, 0, 0, 0, 1] and [f.kind for f in written.flags] == ["implausible"]
    data = json.loads(line)
    data["provenance"]["gpu_clock_mhz"] = 1980
    assert parse_row(data | {"curriculum_stage": 2}) == written
    for bad, words in (
        ([], "is a JSON list, not an object"),
        ({"messages": []}, "has no 'format' field"),
        (data | {"format": "ptxbench.sft/0"}, "has format 'ptxbench.sft/0'"),
        (data | {"messages": [{"role": "tool", "content": "x"}], "loss_mask": [1]}, r"messages\.0\.role"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_row(bad)


def test_parquet_rows_are_searched_one_row_group_at_a_time(inputs: dict[str, Path], tmp_path: Path) -> None:
    """The pipeline's Fixit and KernelGen rows in row groups of one row: a search finds the rows whose messages
    hold the words (any case), forwards and backwards from a row, wrapping around."""
    table = pa.concat_tables(
        pq.read_table(inputs[recipe] / "sft.parquet") for recipe in ("fixit", "kernelgen")
    )
    pq.write_table(table, tmp_path / "groups.parquet", row_group_size=1)
    sft = open_sft(tmp_path / "groups.parquet")
    assert sft.count == 3 and [sft.row(i).recipe for i in range(3)] == ["fixit", "fixit", "kernelgen"]
    assert (sft.find("</THINK>", 0), sft.find("</think>", 2), sft.find("</think>", 0, backwards=True)) == (
        1,
        0,
        2,
    )
    assert (sft.find("verdict: INCORRECT", 2), sft.find("verdict: incorrect", 1), sft.find("syntaxerror", 1)) == (
        1, 1, 0)  # fmt: skip
    assert sft.find("scripted/reasoning", 0) is None  # the messages' text only, not the provenance
