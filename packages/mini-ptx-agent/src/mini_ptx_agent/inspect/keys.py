"""The inspector's keys, in one table: the screens' bindings, the help screen and ``--help`` are made from it.

Lists and panes have their own movement keys (arrows, j/k, g/G, page up/down; :mod:`.row_list` and
:mod:`.text_pane`); they are listed here for the help texts, marked ``widget``.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Key:
    """One key (or several, comma-separated in textual's spelling) and what it does where."""

    keys: str
    action: str
    """The textual action it runs; empty for keys a widget handles itself."""
    description: str
    where: str
    """``all``, ``trajectory``, ``experiment``, or ``widget`` (lists and panes)."""
    footer: str = ""
    """Its short name in the footer; empty: not in the footer."""


KEYS: tuple[Key, ...] = (
    Key("q", "app.quit", "quit", "all", footer="quit"),
    Key("question_mark", "app.help", "this list of keys", "all", footer="keys"),
    Key("escape", "back", "back: close a search, or return to the experiment table", "all"),
    Key("tab,shift+tab", "", "next / previous pane (the list, the tabs, the text)", "widget"),
    Key("down,j,up,k", "", "next / previous row of a list; scroll a text pane", "widget"),
    Key("pagedown,space,pageup", "", "a page down / up", "widget"),
    Key("home,g,end,G", "", "first / last row, top / bottom of a pane", "widget"),
    Key("left,h,right,l", "", "scroll a code pane sideways", "widget"),
    Key(
        "slash",
        "search",
        "search replies and kernels (SFT: rows; experiment: filter)",
        "all",
        footer="search",
    ),
    Key("n", "search_next", "next match", "all"),
    Key("N", "search_previous", "previous match", "all"),
    Key("1", "view('reply')", "the model's reply", "trajectory"),
    Key("2", "view('kernel')", "the kernel (or its diff)", "trajectory"),
    Key("3", "view('feedback')", "the feedback the model got", "trajectory"),
    Key("4", "view('evaluation')", "evaluation: notes, workloads, errors", "trajectory"),
    Key("5", "view('analysis')", "PTX/SASS families and resources", "trajectory"),
    Key("d", "toggle_diff", "kernel / diff against the previous kernel", "trajectory", footer="diff"),
    Key("r", "toggle_reasoning", "show / collapse the reasoning", "trajectory", footer="reasoning"),
    Key("o", "save_kernel", "write the selected kernel to a file", "trajectory", footer="write kernel"),
    Key("enter", "open", "open the trajectory of the row", "experiment", footer="open"),
    Key(
        "s",
        "sort",
        "sort by the next column (click a header: by it; again: reverse)",
        "experiment",
        footer="sort",
    ),
)
"""Every key of the inspector."""

WHERE = {
    "all": "Everywhere",
    "widget": "Lists and panes",
    "trajectory": "A trajectory",
    "experiment": "An experiment table",
}
"""Section titles of the help texts, in order."""


def bindings(*where: str) -> list[Binding]:
    """The textual bindings of the keys for ``where`` (``all`` included)."""
    return [
        Binding(
            key.keys,
            key.action,
            key.footer or key.description,
            show=bool(key.footer),
            key_display=_label(key.keys),
            tooltip=key.description,
        )
        for key in KEYS
        if key.action and key.where in ("all", *where)
    ]


def _label(keys: str) -> str:
    names = {"question_mark": "?", "slash": "/", "escape": "esc", "shift+tab": "S-tab", "space": "space"}
    return "/".join(names.get(k, k) for k in keys.split(","))


def help_rows() -> list[tuple[str, str, str]]:
    """``(section, keys, description)`` for every key, sections in :data:`WHERE` order."""
    return [
        (WHERE[where], _label(key.keys), key.description)
        for where in WHERE
        for key in KEYS
        if key.where == where
    ]


def help_text() -> str:
    """The keys as plain text, one section after another (``ptxbench-inspect --help`` shows it)."""
    lines: list[str] = []
    section = ""
    for title, keys, description in help_rows():
        if title != section:
            lines.append(f"{title}:" if not lines else f"\n{title}:")
            section = title
        lines.append(f"  {keys:<22} {description}")
    return "\n".join(lines)
