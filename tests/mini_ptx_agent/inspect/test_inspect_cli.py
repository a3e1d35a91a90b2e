"""`ptxbench-inspect` before its UI starts: what each kind of path opens as (``--json``), one clear message and
exit 2 for anything it cannot show, and the keys in ``--help``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from inspect_inputs import agent_run, demo_run, experiment_dir, sft_rows
from mini_ptx_agent.inspect.keys import KEYS
from mini_ptx_agent.inspect.readers.sft import parse_row
from mini_ptx_agent.inspect_cli import app
from mini_ptx_agent.runs.directory import RunLayout
from typer.testing import CliRunner


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inputs")
    sft = root / "rows.jsonl"
    sft.write_text("".join(json.dumps(r) + "\n" for r in sft_rows()))
    return {"run": agent_run(root), "demo": demo_run(root), "experiment": experiment_dir(root), "sft": sft}


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
        "trajectory", "ptxbench-demo-replay", True, "gemm_n7168_k5120")  # fmt: skip

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
    # The experiment's turns.csv opens the experiment; the SFT file its rows.
    assert json.loads(inspect(str(inputs["experiment"] / "turns.csv"), "--json")[1])["kind"] == "experiment"
    sft = json.loads(inspect(str(inputs["sft"]), "--json")[1])
    assert (sft["kind"], sft["rows"], sft["first_row"]["mask"]) == ("sft", 5, "per-message flags")


def bad_inputs(root: Path, inputs: dict[str, Path]) -> dict[str, tuple[Path, str]]:
    """Each bad input and the words its message must hold."""
    trajectory = RunLayout(inputs["run"]).trajectory_path.read_text()
    files = {
        "truncated.json": trajectory[: len(trajectory) // 2],
        "other.json": json.dumps({"rows": [1, 2]}),
        "format.json": json.dumps({"messages": [], "trajectory_format": "mini-swe-agent-9"}),
        "notes.txt": "hello",
        "empty.jsonl": "",
        "chat.jsonl": json.dumps({"prompt": "p", "completion": "c"}) + "\n",
        "broken.jsonl": '{"messages": [{"role": "user", "content": "x"}]\n',
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
        "not SFT rows": (root / "chat.jsonl", "is not an SFT file (row 1 of chat.jsonl is not an SFT row"),
        "a broken JSON row": (root / "broken.jsonl", "line is not JSON"),
        "parquet without messages": (root / "prompts.parquet", "has no 'messages' column (columns: prompt)"),
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


def test_the_trained_part_of_a_row_is_read_every_way_the_rows_mark_it() -> None:
    fixit, per_message, rule, per_token, parts = (parse_row(r) for r in sft_rows())
    assert fixit.trained == [False, False, False, False, True] and fixit.mask_note == "per-message flags"
    assert fixit.provenance == {"provenance.pipeline": "fixit", "provenance.definition": "vector_add_f32",
                                "provenance.trajectory": "t1", "provenance.turn": 3}  # fmt: skip
    assert per_message.trained == [False, False, True] and per_message.provenance == {
        "source": "kernelgen",
        "turn": 1,
    }
    assert rule.trained == [False, False, True]
    assert per_token.trained == [None, None, None] and "52 values for 3 messages" in per_token.mask_note
    assert parts.messages[1].content == "parts joined" and parts.mask_note == "the row marks no trained part"
    weighted = parse_row(
        {
            "messages": [
                {"role": "user", "content": "q", "weight": 0},
                {"role": "assistant", "content": "a", "weight": 1.0},
            ]
        }
    )
    assert weighted.trained == [False, True]
    everything = parse_row(
        {
            "messages": [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}],
            "loss_mask": "assistant",
        }
    )
    assert everything.trained == [True, True]
    for bad, words in (
        ([], "is a JSON object"),
        ({"messages": []}, "non-empty 'messages'"),
        ({"messages": [{"content": "x"}]}, "messages.0.role"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_row(bad)


def test_a_parquet_of_text_parts_is_searched_row_by_row(tmp_path: Path) -> None:
    from mini_ptx_agent.inspect.readers.sft import open_sft

    rows = [
        {"messages": [{"role": "user", "content": [{"type": "text", "text": f"row {i} says {word}"}]}]}
        for i, word in enumerate(["alpha", "beta", "gamma", "beta"])
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "parts.parquet", row_group_size=2)
    sft = open_sft(tmp_path / "parts.parquet")
    assert sft.row(2).messages[0].content == "row 2 says gamma"
    assert (sft.find("BETA", 0), sft.find("beta", 1), sft.find("beta", 3), sft.find("beta", 1, backwards=True)) == (
        1, 3, 1, 3)  # fmt: skip
    assert sft.find("delta", 0) is None
