"""Experiments: many trajectories (definitions x languages x prompt tags x models x replicas), each a run
directory of `ptxbench run`'s layout, run concurrently and resumably (docs/experiments.md).

- :mod:`~mini_ptx_agent.experiments.config`: the config (one pydantic model; `ptxbench experiment schema`);
- :mod:`~mini_ptx_agent.experiments.plan`: definition selection and the expansion into trajectories;
- :mod:`~mini_ptx_agent.experiments.directory`: the experiment directory, and where each trajectory stands;
- :mod:`~mini_ptx_agent.experiments.runner`: the concurrent runner and its bounds;
- :mod:`~mini_ptx_agent.experiments.launch`: `ptxbench experiment run` (new, `--resume`, `--extend-turns`);
- :mod:`~mini_ptx_agent.experiments.progress`: live progress;
- :mod:`~mini_ptx_agent.experiments.manifest`, :mod:`~mini_ptx_agent.experiments.table`: ``manifest.json``,
  ``turns.csv`` and ``turns.parquet``;
- :mod:`~mini_ptx_agent.experiments.cli`: the `ptxbench experiment` commands.
"""
