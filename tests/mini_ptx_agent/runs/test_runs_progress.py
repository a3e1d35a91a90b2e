"""Progress lines of a run: one per turn, coloured on a terminal, plain when piped."""

from __future__ import annotations

import io

from mini_ptx_agent.agent import TurnOutcome
from mini_ptx_agent.runs.progress import RunProgress
from rich.console import Console

PASSED = TurnOutcome(3, "PASSED", 41.23, 0.98612, True, ("mbarrier", "wgmma"), ("HGMMA", "UTMALDG"))


def _printed(outcome: TurnOutcome, *, terminal: bool) -> str:
    out = io.StringIO()
    console = Console(
        file=out, force_terminal=terminal, color_system="standard" if terminal else None, width=200
    )
    with RunProgress(console, 3, "the embedded FIBServe") as progress:
        progress.on_turn(outcome)
    return out.getvalue()


def test_piped_lines_are_plain_and_name_status_speedup_families_and_seconds() -> None:
    assert _printed(PASSED, terminal=False) == (
        "  turn 3/3: PASSED, 0.986x; PTX: mbarrier, wgmma; SASS: HGMMA, UTMALDG; 41.2 s\n"
    )
    cpu = TurnOutcome(1, "PASSED", 2.0, 1.5, False)
    assert _printed(cpu, terminal=False) == "  turn 1/3: PASSED, 1.500x (not a GPU timing); 2.0 s\n"
    assert _printed(TurnOutcome(2, "FORMAT_ERROR", 0.4), terminal=False) == (
        "  turn 2/3: FORMAT_ERROR (no kernel block in the reply); 0.4 s\n"
    )


def test_a_terminal_gets_the_status_in_colour() -> None:
    text = _printed(PASSED, terminal=True)
    assert "\x1b[32mPASSED" in text and "41.2 s" in text
