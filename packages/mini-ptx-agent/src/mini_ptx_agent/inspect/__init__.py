"""``ptxbench-inspect``: a terminal inspector (textual) for run directories, experiments, trajectories, SFT rows.

Two rooms:

- :mod:`~.readers`: what a path is and lazy readers of each kind (no textual): a trajectory's turns and each
  turn's reply, kernel, diff and KernelReport; an experiment's table of trajectories; SFT rows by index;
- the UI: :mod:`.app` (picks the screen), the screens (:mod:`.trajectory_screen`, :mod:`.experiment_screen`,
  :mod:`.sft_screen`), what a turn's panes show (:mod:`.turn_text`, :mod:`.highlight`), two line-API widgets
  that draw only what is on screen (:mod:`.text_pane`, :mod:`.row_list`), the dialogs (:mod:`.dialogs`) and
  the key table (:mod:`.keys`) that the bindings, the help screen and ``--help`` share.

docs/inspector.md shows the screens and the keys.
"""
