"""The sandbox worker starts once per candidate, so what it imports is paid for every evaluation."""

from __future__ import annotations

import subprocess
import sys


def test_the_worker_imports_neither_the_trace_model_nor_pydantic() -> None:
    # fibserve.bench.timing once imported the trace package for one return type: about 0.4 s of pydantic
    # model building in every worker before it could take a candidate.
    code = (
        "import sys, fibserve.bench.worker\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'fibserve.trace'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_summaries_still_use_the_trace_model() -> None:
    from fibserve.bench.timing import summarize
    from fibserve.trace import LatencySummary

    summary = summarize([3.0, 1.0, 2.0])
    assert isinstance(summary, LatencySummary)
    assert (summary.median, summary.min, summary.max, summary.count) == (2.0, 1.0, 3.0, 3)
