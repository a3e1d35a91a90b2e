"""Where the ``ptxbench`` commands print: rich consoles that keep their tables whole when piped.

On a terminal rich wraps to the terminal's width. Piped into a file, a log or ``less``, it would assume 80
columns and fold every wide table row onto several lines (a quickstart's turn table, a report's summary);
:func:`console_for` gives such a console :data:`PIPED_WIDTH` columns instead, so each row stays one line that
``grep`` and a reader can use. ``COLUMNS`` still decides when it is set.
"""

from __future__ import annotations

import os

from rich.console import Console

PIPED_WIDTH = 320
"""Columns of a console that is not a terminal and has no ``COLUMNS``: wider than any of our tables' rows."""


def console_for(*, stderr: bool = False) -> Console:
    """A console for people on stdout (or ``stderr``): no highlighting, long text lines not folded, and
    :data:`PIPED_WIDTH` columns when it is not a terminal and ``COLUMNS`` is unset."""
    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPED_WIDTH
    return console
