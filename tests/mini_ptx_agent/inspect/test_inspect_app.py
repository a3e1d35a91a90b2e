"""`ptxbench-inspect` driven by textual's own harness (``App.run_test`` and its pilot) on inputs the agent and
the experiment runner really wrote (inspect_inputs.py): each kind of input opens its screen, the keys do what
the help says, and what the panes show is asserted line by line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from inspect_inputs import NEIGHBOUR_NOTE, REASONING, agent_run, demo_run, experiment_dir, sft_datasets
from mini_ptx_agent.inspect.app import InspectorApp
from mini_ptx_agent.inspect.dialogs import HelpScreen, SaveKernelScreen
from mini_ptx_agent.inspect.experiment_screen import ExperimentScreen
from mini_ptx_agent.inspect.highlight import CodeDocument
from mini_ptx_agent.inspect.keys import KEYS
from mini_ptx_agent.inspect.readers.experiment import COLUMNS
from mini_ptx_agent.inspect.readers.sources import open_path
from mini_ptx_agent.inspect.row_list import RowList
from mini_ptx_agent.inspect.sft_screen import SftScreen
from mini_ptx_agent.inspect.text_pane import TextPane
from mini_ptx_agent.inspect.trajectory_screen import TrajectoryScreen
from mini_ptx_agent.runs.directory import RunLayout
from textual.widgets import DataTable, Input, Label, Static

pytestmark = pytest.mark.slow  # about 40 s on the 2-core machine: each test drives the app through its keys

Script = Callable[[InspectorApp, Any], Awaitable[None]]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inspect")
    experiment = experiment_dir(root)
    return {"run": agent_run(root), "demo": demo_run(root), "experiment": experiment,
            **sft_datasets(root, experiment)}  # fmt: skip


def drive(path: Path, script: Script) -> None:
    """Open ``path`` in the inspector (120x40, headless) and run ``script(app, pilot)`` in it."""

    async def main() -> None:
        app = InspectorApp(open_path(path))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await script(app, pilot)

    asyncio.run(main())


async def keys(pilot: Any, *names: str) -> None:
    """Press ``names`` (each handled before the next), then let the app settle and its threads finish."""
    await pilot.press(*names)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def shown(app: InspectorApp, pane: str) -> str:
    """Every line the pane ``#<pane>`` shows, as plain text."""
    document = app.screen.query_one(f"#{pane}", TextPane).document
    return "\n".join(document.plain(i) for i in range(len(document)))


def labels(app: InspectorApp, selector: str) -> list[str]:
    rows = app.screen.query_one(selector, RowList)
    return [rows.label(i).plain for i in range(rows.count)]


# -- a run directory -----------------------------------------------------------------------------------------


def test_a_run_shows_each_turn_in_every_pane(inputs: dict[str, Path]) -> None:
    trajectory = json.loads(RunLayout(inputs["run"]).trajectory_path.read_text())

    async def script(app: InspectorApp, pilot: Any) -> None:
        assert isinstance(app.screen, TrajectoryScreen)
        await app.workers.wait_for_complete()
        turns = labels(app, "#turns")
        assert [t.split()[1] for t in turns] == [
            "FORMAT_ERROR",
            "COMPILE_ERROR",
            "INCORRECT_NUMERICAL",
            "PASSED",
        ]
        assert "0.800x" in turns[3] and "⚑1" in turns[3] and "⚑" not in turns[0]  # the turn with a note
        # Turn 1: the reasoning is collapsed to one line; r shows it, r again hides it.
        assert f"▸ reasoning ({len(REASONING)} characters, collapsed" in shown(
            app, "reply-pane"
        ) and REASONING not in shown(app, "reply-pane")
        await keys(pilot, "r")
        assert REASONING in shown(app, "reply-pane")
        await keys(pilot, "r", "2")
        assert "turn 1 sent no kernel (FORMAT_ERROR)" in shown(app, "kernel-pane")
        # Turn 4: the kernel highlighted, then its diff against turn 3's kernel.
        await keys(pilot, "j", "j", "j")
        pane = app.screen.query_one("#kernel-pane", TextPane)
        assert (
            isinstance(pane.document, CodeDocument) and pane.border_title == "kernel.py · turn 4 · 14 lines"
        )
        assert (
            pane.document.line(13).plain.startswith("14 │ ") and pane.document.line(13).spans
        )  # numbered, coloured
        await keys(pilot, "d")
        assert pane.border_title == "diff turn 3 → 4 · +1 −1"
        diff = shown(app, "kernel-pane").splitlines()
        assert any(line.startswith("-") and "- tl.load(y_ptr" in line for line in diff)
        assert any(line.startswith("+") and "+ tl.load(y_ptr" in line for line in diff)
        await keys(pilot, "3")
        assert shown(app, "feedback-pane") == trajectory["messages"][-2]["content"].rstrip("\n")
        await keys(pilot, "4")
        evaluation = shown(app, "evaluation-pane")
        assert evaluation.startswith(f"⚑ evaluator notes (1)\n  {NEIGHBOUR_NOTE}")
        assert (
            "status PASSED" in evaluation
            and "min speedup 0.800x" in evaluation
            and "target 1.5x not met" in evaluation
        )
        assert "1.250x  kernel 0.8000 ms" in evaluation and "0.800x  kernel 1.2500 ms" in evaluation
        # Turn 2 did not compile: the analysis pane quotes the compiler; turn 3 was wrong: its errors.
        await keys(pilot, "k", "k", "5")
        assert "compiled no" in shown(app, "analysis-pane") and "SyntaxError" in shown(app, "analysis-pane")
        await keys(pilot, "j", "4")
        assert "INCORRECT_NUMERICAL" in shown(app, "evaluation-pane") and "max abs err 0.5" in shown(
            app, "evaluation-pane"
        )
        assert "log of workload w1 (INCORRECT_NUMERICAL)\nboom" in shown(app, "evaluation-pane")

    drive(inputs["run"], script)


def test_search_goes_through_replies_and_kernels_turn_by_turn(inputs: dict[str, Path]) -> None:
    async def script(app: InspectorApp, pilot: Any) -> None:
        screen = app.screen
        await keys(pilot, "slash", *"SIGN", "enter")  # any case
        assert (screen.turn.number, screen.view) == (2, "reply")
        pane = screen.query_one("#reply-pane", TextPane)
        assert pane.query == "SIGN" and "sign" in pane.document.plain(screen._match[2]).lower()
        assert pane.border_subtitle == f"'SIGN' at line {screen._match[2] + 1} · n next, N previous"
        await keys(pilot, "n")
        assert (screen.turn.number, screen.view) == (4, "reply")
        await keys(pilot, "n")  # wraps to turn 1, whose only match is in its collapsed reasoning: shown
        assert (screen.turn.number, screen.view, screen.reasoning) == (1, "reply", True)
        assert REASONING in shown(app, "reply-pane")
        await keys(pilot, "N")
        assert screen.turn.number == 4
        await keys(pilot, "slash", *"tl.store", "enter")  # further down turn 4's reply: its kernel block
        assert (screen.turn.number, screen.view) == (4, "reply") and "tl.store" in pane.document.plain(
            screen._match[2]
        )
        await keys(pilot, "n")  # then the same turn's kernel pane
        kernel = screen.query_one("#kernel-pane", TextPane)
        assert (screen.turn.number, screen.view) == (4, "kernel") and "tl.store" in kernel.document.plain(
            screen._match[2]
        )
        await keys(pilot, "slash", *"no such words", "enter")
        assert not screen.query_one("#search", Input).display  # the bar closed; the last match stays on show
        assert screen.turn.number == 4 and any(
            "no match for 'no such words'" in n.message for n in app._notifications
        )

    drive(inputs["run"], script)


def test_o_writes_the_selected_kernel_and_never_overwrites(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    kernel = (RunLayout(inputs["run"]).trajectory_dir / "kernel.py").read_text()

    async def script(app: InspectorApp, pilot: Any) -> None:
        await keys(pilot, "o")
        assert not isinstance(app.screen, SaveKernelScreen)  # turn 1 sent no kernel
        await keys(pilot, "G", "o")
        assert isinstance(app.screen, SaveKernelScreen)
        assert app.screen.query_one(Input).value == str(tmp_path / "run-turn004.py")
        await keys(pilot, "enter")
        assert (tmp_path / "run-turn004.py").read_text() == kernel and isinstance(
            app.screen, TrajectoryScreen
        )
        (tmp_path / "run-turn004.py").write_text("kept")
        await keys(pilot, "o", "enter")
        assert "exists: choose another name" in str(app.screen.query_one("#problem", Label).render())
        await keys(pilot, "escape")
        assert (
            isinstance(app.screen, TrajectoryScreen) and (tmp_path / "run-turn004.py").read_text() == "kept"
        )

    drive(inputs["run"], script)


def test_the_demo_flag_marks_every_turn_and_the_kernels_are_cuda(inputs: dict[str, Path]) -> None:
    async def script(app: InspectorApp, pilot: Any) -> None:
        await app.workers.wait_for_complete()
        header = str(app.screen.query_one("#header", Static).render())
        assert "DEMO REPLAY: kernels by the PTXBench authors" in header and "gemm_n7168_k5120" in header
        assert all(label.endswith("⚑1 DEMO") and "NOT_EXECUTED" in label for label in labels(app, "#turns"))
        assert "DEMO REPLAY: written by the PTXBench authors" in shown(app, "reply-pane")
        await keys(pilot, "G", "2")
        pane = app.screen.query_one("#kernel-pane", TextPane)
        assert pane.border_title.startswith("kernel.cu · turn 3") and "wgmma.mma_async" in shown(
            app, "kernel-pane"
        )
        await keys(pilot, "5")
        analysis = shown(app, "analysis-pane")
        assert (
            "SASS families  HGMMA, UTMALDG" in analysis
            and "target families (wgmma or TMA): wgmma, TMA" in analysis
        )
        await keys(pilot, "4")
        assert shown(app, "evaluation-pane").startswith("⚑ evaluator notes (1)\n  not executed: no GPU")

    drive(inputs["demo"], script)


def test_an_unreadable_evaluation_is_a_message_in_its_pane(inputs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    run = shutil.copytree(inputs["run"], tmp_path / "run")
    report = RunLayout(run).trajectory_dir / "evaluations" / "turn_003.json"
    report.write_text(json.dumps(json.loads(report.read_text()) | {"schema_version": "ptxbench.eval/9"}))

    async def script(app: InspectorApp, pilot: Any) -> None:
        await keys(pilot, "j", "j", "4")
        assert shown(app, "evaluation-pane").startswith("turn_003.json is not a ptxbench.eval/1 KernelReport")
        await keys(pilot, "j")
        assert "status PASSED" in shown(app, "evaluation-pane")

    drive(run, script)


# -- an experiment directory ---------------------------------------------------------------------------------


def test_an_experiment_table_filters_sorts_and_opens_trajectories(inputs: dict[str, Path]) -> None:
    async def script(app: InspectorApp, pilot: Any) -> None:
        screen = app.screen
        assert isinstance(screen, ExperimentScreen)
        table = screen.query_one(DataTable)
        header = str(screen.query_one("#header", Static).render())
        assert "4 trajectories" in header and "1 pending" in header and "3 LimitsExceeded" in header
        assert table.row_count == 4
        await keys(pilot, "slash", *"broken")
        assert table.row_count == 2
        await keys(pilot, *" status:pend")
        assert [e.trajectory for e in screen.shown] == ["vector_add_f32.triton-hopper.scripted-broken.r1"]
        await keys(pilot, "enter", "enter")  # the pending row: nothing to open
        assert app.screen is screen
        await keys(pilot, "slash", "escape")  # Esc in the filter clears it
        assert table.row_count == 4
        await keys(pilot, *["s"] * list(COLUMNS).index("best_speedup"))
        assert screen.sort_column == "best_speedup" and screen.reverse  # the fastest first
        assert [e.cell("best_speedup") for e in screen.shown] == ["0.800x", "0.800x", "-", "-"]
        assert screen.current.status == "pending"  # the cursor stayed on its trajectory
        await keys(pilot, "up", "up", "up", "enter")
        trajectory = app.screen
        assert isinstance(trajectory, TrajectoryScreen) and trajectory.data.model == "scripted/good"
        assert [label.split()[1] for label in labels(app, "#turns")] == ["PASSED"] * 3
        await keys(pilot, "escape")
        assert app.screen is screen and screen.current is not None and screen.current.model == "scripted/good"

    drive(inputs["experiment"], script)


def test_a_broken_trajectory_in_an_experiment_is_a_notice_not_a_crash(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    exp = shutil.copytree(inputs["experiment"], tmp_path / "exp")
    first = RunLayout(exp / "runs" / "vector_add_f32.triton-hopper.scripted-broken.r0").trajectory_path
    first.write_text(first.read_text()[:500])

    async def script(app: InspectorApp, pilot: Any) -> None:
        await keys(pilot, "enter")
        assert isinstance(app.screen, ExperimentScreen)
        assert any("truncated" in n.message for n in app._notifications)

    drive(exp, script)


# -- SFT rows ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sft.jsonl", "sft.parquet"])
def test_fixit_rows_show_their_messages_the_trained_fix_and_provenance(
    inputs: dict[str, Path], name: str
) -> None:
    """The data pipeline's own Fixit rows, as JSONL and as parquet: every field of ``ptxbench.sft/1`` is on the
    pane, the final assistant message (loss mask 1) is marked as trained, the others are not."""
    rows = [json.loads(line) for line in (inputs["fixit"] / "sft.jsonl").read_text().splitlines()]
    assert len(rows) == 2

    def check(text: str, row: dict[str, Any]) -> None:
        for field in ("format", "id", "recipe", "kernel_hash", "teacher_model"):
            assert f"\n  {field}: {row[field]}\n" in text, field
        tokens = row["tokens"]
        assert (f"  tokens: prompt {tokens['prompt']:,} · completion {tokens['completion']:,} · "
                f"total {tokens['total']:,} (cl100k_base)") in text  # fmt: skip
        for field, value in row["provenance"].items():  # every provenance field, each on its line
            assert f"\n  {field}: {value if isinstance(value, str) else repr(value)}\n" in text, field
        assert (
            f"\n  repair_record: {row['fix']['repair_record']}\n" in text and "\n  status: PASSED\n" in text
        )
        assert "loss_mask: [0, 0, 0, 0, 1] · trained: message 5" in text
        for number, message in enumerate(row["messages"], start=1):
            trained = row["loss_mask"][number - 1] == 1
            mark = "TRAINED (loss)" if trained else "not trained"
            content = message["content"]
            header = f"── {number} · {message['role']} · {mark} · {len(content):,} characters ──"
            gutter = "▌ " if trained else "  "
            assert header + "\n" + "\n".join(gutter + line for line in content.splitlines()) in text, number
        assert text.count("TRAINED (loss)") == 1 and "\n▌ <think>\n▌ The error log shows" in text

    async def script(app: InspectorApp, pilot: Any) -> None:
        assert isinstance(app.screen, SftScreen) and app.screen.rows.count == 2
        listed = labels(app, "#rows")
        tokens = [f"{r['tokens']['total']:,} tok" for r in rows]
        assert listed[0].split()[:2] == ["1", "fixit"] and tokens[0] in listed[0]
        assert listed[0].endswith("vector_add_f32 · compile") and listed[1].endswith(
            "vector_add_f32 · incorrect ⚑1"
        )
        first = shown(app, "messages")
        check(first, rows[0])
        assert "\nflags: none\n" in first
        await keys(pilot, "j")
        second = shown(app, "messages")
        check(second, rows[1])
        assert "flags: 1 (kept by --include-flagged" in second
        assert "  ⚑ implausible · w0 · faster than the device's roofline allows" in second
        await keys(pilot, "slash", *"SyntaxError", "enter")  # the compile failure's log, wrapping around
        assert app.screen.index == 0
        await keys(pilot, "slash", *"verdict: incorrect", "enter")  # any case
        assert app.screen.index == 1
        await keys(pilot, "n")
        assert app.screen.index == 1  # the only row holding it

    drive(inputs["fixit"] / name, script)


def test_a_row_of_another_format_is_said_in_its_place(inputs: dict[str, Path], tmp_path: Path) -> None:
    """A JSONL whose first rows are ptxbench.sft/1 opens; a later row of another version is a red sentence in
    the list and the pane, never a traceback."""
    lines = (inputs["fixit"] / "sft.jsonl").read_text().splitlines()
    later = json.loads(lines[0]) | {"format": "ptxbench.sft/2"}
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([*lines, json.dumps(later)]) + "\n")

    async def script(app: InspectorApp, pilot: Any) -> None:
        assert labels(app, "#rows")[2].endswith("not a ptxbench.sft/1 row")
        await keys(pilot, "G")
        assert shown(app, "messages") == (
            "row 3 of mixed.jsonl has format 'ptxbench.sft/2'; this inspector reads 'ptxbench.sft/1' "
            "(docs/training-data.md)"
        )

    drive(path, script)


# -- help ----------------------------------------------------------------------------------------------------


def test_question_mark_lists_every_key(inputs: dict[str, Path]) -> None:
    async def script(app: InspectorApp, pilot: Any) -> None:
        await keys(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("#keys", Static).content
        text = "\n".join(str(cell) for column in table.columns for cell in column._cells)
        assert all(key.description in text for key in KEYS)
        await keys(pilot, "escape")
        assert isinstance(app.screen, TrajectoryScreen)
        await keys(pilot, "q")
        assert not app.is_running

    drive(inputs["run"], script)


def test_the_mouse_and_tab_reach_every_pane(inputs: dict[str, Path]) -> None:
    async def script(app: InspectorApp, pilot: Any) -> None:
        screen = app.screen
        await pilot.click("#turns", offset=(5, 2))  # the third row
        await pilot.pause()
        assert screen.turn.number == 3
        await pilot.click("#views Tab#--content-tab-evaluation")
        await pilot.pause()
        assert screen.view == "evaluation" and "INCORRECT_NUMERICAL" in shown(app, "evaluation-pane")
        await pilot.click("#turns", offset=(5, 0))
        await keys(pilot, "1")
        await pilot.click(
            "#reply-pane", offset=(4, 2)
        )  # below the border: the collapsed reasoning line of turn 1
        await pilot.pause()
        assert screen.reasoning and REASONING in shown(app, "reply-pane")
        screen.query_one("#turns", RowList).focus()
        focused = []
        for _ in range(3):
            await keys(pilot, "tab")
            focused.append(type(app.focused).__name__)
        assert focused == ["ContentTabs", "TextPane", "RowList"]  # the list, the tabs, the pane, round again

    drive(inputs["run"], script)


def test_a_click_on_a_header_sorts_by_that_column(inputs: dict[str, Path]) -> None:
    async def script(app: InspectorApp, pilot: Any) -> None:
        table = app.screen.query_one(DataTable)
        columns = list(table.columns.values())
        best = list(COLUMNS).index("best_speedup")
        x = sum(column.get_render_width(table) for column in columns[:best]) + 2
        await pilot.click(DataTable, offset=(x, 0))
        await pilot.pause()
        assert app.screen.sort_column == "best_speedup" and app.screen.reverse
        await pilot.click(DataTable, offset=(x, 0))
        await pilot.pause()
        assert not app.screen.reverse and app.screen.shown[-1].best_speedup == 0.8

    drive(inputs["experiment"], script)
