"""Training data from what kernel agents did: Fixit repair pairs, KernelGen reasoning, SFT datasets, Tinker.

Every step reads the files of the step before (or experiment directories), writes its own directory, and can be
stopped and run again without repeating finished work (docs/training-data.md):

- :mod:`~mini_ptx_agent.data.records`: provenance (run, trajectory, turn, kernel hash, evaluation) and JSONL files;
- :mod:`~mini_ptx_agent.data.flags`: the evaluator's flags a training row must not learn from, read typed;
- :mod:`~mini_ptx_agent.data.sources`: the evaluated turns of experiment and run directories;
- :mod:`~mini_ptx_agent.data.mining`: ``ptxbench data failures`` (Fixit) and ``ptxbench data kernelgen``;
- :mod:`~mini_ptx_agent.data.calls`: resumable, concurrent model calls with a cost estimate (``--dry-run``);
- :mod:`~mini_ptx_agent.data.repair`: ``ptxbench data repair``, one repair turn per failure through FIBServe;
- :mod:`~mini_ptx_agent.data.pairs`: ``ptxbench data pairs``, wrong -> fixed pairs whose fix passed;
- :mod:`~mini_ptx_agent.data.reasoning`: ``ptxbench data reasoning``, the reasoning that leads to a kernel;
- :mod:`~mini_ptx_agent.data.rows`: the SFT row (``ptxbench.sft/1``), chat normalisation, the token count;
- :mod:`~mini_ptx_agent.data.sft`: ``ptxbench data sft``, parquet and JSONL; :mod:`~mini_ptx_agent.data.card`
  its dataset card;
- :mod:`~mini_ptx_agent.data.training`: ``ptxbench train`` on Tinker (the optional ``training`` extra);
- :mod:`~mini_ptx_agent.data.cli`: the ``ptxbench data`` and ``ptxbench train`` commands.
"""
