"""What the inspector reads, without textual: the kind of a path and lazy readers for each kind.

- :mod:`~.sources`: what a path on the command line is (run directory, experiment directory, trajectory JSON,
  SFT JSONL or parquet) and opening it, with one clear :class:`InspectError` for anything else;
- :mod:`~.trajectory`: a trajectory's turns found in one pass; a turn's reply, kernel, diff and KernelReport
  read only when it is shown;
- :mod:`~.experiment`: an experiment directory as one entry per planned trajectory (``plan.json``,
  ``turns.csv``, each run's ``summary.json``);
- :mod:`~.sft`: ``ptxbench.sft/1`` rows (the data pipeline's :class:`~mini_ptx_agent.data.rows.SFTRow`) from
  JSONL (indexed by line offsets, parsed per row) or parquet (read per row group).
"""

from __future__ import annotations


class InspectError(Exception):
    """An input the inspector cannot show; the message names the file and says what was expected."""
