"""PTXBench on Harbor: tasks exported from a live FIBServe, their verifier, our agent as a Harbor agent, ATIF.

- :mod:`~mini_ptx_agent.harbor.export`: ``ptxbench harbor export``, one Harbor task per definition (task.toml,
  instruction.md, environment/, tests/test.sh, solution/solve.sh); :mod:`~mini_ptx_agent.harbor.task_files`
  renders its files and :mod:`~mini_ptx_agent.harbor.oracles` finds the oracle kernel.
- :mod:`~mini_ptx_agent.harbor.verifier` and :mod:`~mini_ptx_agent.harbor.reward`: ``ptxbench harbor verify``,
  what a task's ``tests/test.sh`` runs: `ptxbench eval` on the agent's kernel, then ``reward.json``.
- :mod:`~mini_ptx_agent.harbor.solve`: ``ptxbench harbor solve``, the kernel agent inside a task container;
  :mod:`~mini_ptx_agent.harbor.agent` is the Harbor agent class that runs it (it imports ``harbor``, which needs
  Python >= 3.12, and nothing else of ours, so Harbor's own environment can load it from the source tree).
- :mod:`~mini_ptx_agent.harbor.atif`: a mini-swe-agent-1.1 trajectory as ATIF, Harbor's trajectory format.

docs/harbor.md explains the task layout, the reward and how to run ``harbor run`` with these tasks.
"""
