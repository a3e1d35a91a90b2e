"""The inspector app: opens the screen of what was given (run, experiment, trajectory, SFT rows)."""

from __future__ import annotations

from textual.app import App

from .dialogs import HelpScreen
from .readers.sources import Opened


class InspectorApp(App[None]):
    """``ptxbench-inspect``: browse what :func:`~.readers.sources.open_path` opened.

    Keys are in :mod:`.keys` (``?`` shows them); the screens are :class:`TrajectoryScreen`,
    :class:`ExperimentScreen` (Enter opens a row's trajectory; Esc comes back) and :class:`SftScreen`.
    """

    TITLE = "ptxbench-inspect"
    CSS = """
    #header { height: auto; padding: 0 1; background: $boost; }
    """
    """What every screen shares: the header line above it."""

    def __init__(self, opened: Opened):
        super().__init__()
        self.opened = opened
        self.animation_level = "none"  # keyboard first: a page key moves a page at once, not in 0.2 s

    def on_mount(self) -> None:
        from .readers.sft import SftFile

        if isinstance(self.opened, SftFile):  # each screen is imported only for its kind of input
            from .sft_screen import SftScreen

            self.push_screen(SftScreen(self.opened))
            return
        from .experiment_screen import ExperimentScreen
        from .readers.experiment import ExperimentData
        from .trajectory_screen import TrajectoryScreen

        if isinstance(self.opened, ExperimentData):
            self.push_screen(ExperimentScreen(self.opened))
        else:
            self.push_screen(TrajectoryScreen(self.opened))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())
