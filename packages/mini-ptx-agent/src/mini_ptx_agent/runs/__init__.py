"""One trajectory's run directory: its files, the options that start or resume it, the run itself, its progress.

- :mod:`~mini_ptx_agent.runs.directory`: the layout, ``plan.json`` and ``summary.json`` (docs/run-directory.md);
- :mod:`~mini_ptx_agent.runs.options`: `ptxbench run`'s options, checked, as the plan of a new or resumed run;
- :mod:`~mini_ptx_agent.runs.launch`: the model, the service and the kernel agent, run into the directory;
- :mod:`~mini_ptx_agent.runs.progress`: one line per finished turn for people;
- :mod:`~mini_ptx_agent.runs.turns`: the per-turn table's row (`turns.csv`), which experiments write and reports read.

An experiment (many trajectories; a later package, experiments/) builds on these.
"""
