"""`ptxbench report`: the findings of run directories as a self-contained page, figures and tables.

:mod:`.inputs` reads the per-turn rows (:class:`~mini_ptx_agent.runs.turns.TurnRow`) of run and experiment
directories; :mod:`.metrics` turns them into correct@T, best speedup@T and verified@T per group, with the
intervals of :mod:`.stats`; :mod:`.figures` draws them with matplotlib; :mod:`.provenance` says what ran them;
:mod:`.html` writes the page and :mod:`.report` ties it together (docs/reports.md).
"""
