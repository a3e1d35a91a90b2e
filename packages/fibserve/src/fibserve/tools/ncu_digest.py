"""Structured results from one ncu run: executed instructions per SASS opcode and a short performance summary.

With ``digest`` (``POST /profile``), ncu prints its raw page as CSV (``--csv --page raw --print-units base
--print-metric-instances details``) for the metrics of :data:`DIGEST_METRICS`, one row per profiled kernel of
the measured call; this module reads those rows. Metric names are Nsight Compute's (the InstructionStats,
SpeedOfLight, Occupancy and WarpStateStats sections use them):

- ``sass__inst_executed_per_opcode``: warp-level instructions executed, per SASS opcode (an instanced metric:
  with ``details`` its cell reads ``TOTAL (HGMMA: 1024; IMAD: 5210; ...)``); SASS-patched, so counts are exact;
- ``sm__throughput.avg.pct_of_peak_sustained_elapsed`` and
  ``gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed``: compute and memory speed of light (%);
- ``sm__warps_active.avg.pct_of_peak_sustained_active`` (achieved occupancy, %) and
  ``sm__maximum_warps_per_active_cycle_pct`` (theoretical occupancy, %);
- ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``: warps stalled for each reason per
  issued instruction (``selected`` is issuing, not a stall, and is left out of the stall list);
- ``gpu__time_duration.sum``: kernel duration (ns in base units).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from typing import Any

OPCODE_METRIC = "sass__inst_executed_per_opcode"
SOL_COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
SOL_MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
DURATION = "gpu__time_duration.sum"
STALLS = "regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"

DIGEST_METRICS = (
    OPCODE_METRIC,
    SOL_COMPUTE,
    SOL_MEMORY,
    ACHIEVED_OCCUPANCY,
    THEORETICAL_OCCUPANCY,
    DURATION,
    STALLS,
)
"""The metrics a digest run collects (``--metrics``)."""

DIGEST_FLAGS = ("--csv", "--page", "raw", "--print-units", "base", "--print-metric-instances", "details")
"""ncu's output options of a digest run (they replace ``--page``)."""

TOP_STALLS = 4
"""Stall reasons kept in a summary, largest first."""

_DISCONNECTED = "==PROF== Disconnected from process"
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")


def _number(text: str) -> float | None:
    """``1,234.5`` -> 1234.5; None for ``n/a`` and other non-numbers."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def after_the_profiled_process(lines: list[str]) -> list[str] | None:
    """The lines after ncu's last ``==PROF== Disconnected from process`` line: its report, which it prints once
    the profiled process has gone; None when there is no such line (ncu did not finish). What comes before
    holds the candidate's own output, which can imitate a report."""
    gone = [i for i, line in enumerate(lines) if line.startswith(_DISCONNECTED)]
    return lines[gone[-1] + 1 :] if gone else None


def instances(cell: str) -> dict[str, int]:
    """Per-instance values of an instanced metric cell printed with ``details``: ``"30 (HGMMA: 10; IMAD: 20)"``
    -> ``{"HGMMA": 10, "IMAD": 20}`` (a cell of only ``NAME: VALUE; ...`` reads the same); an empty dict when
    the cell has no instance list."""
    start, end = cell.find("("), cell.rfind(")")
    body = cell[start + 1 : end] if 0 <= start < end else cell
    counts: dict[str, int] = {}
    for item in body.split(";"):
        name, _, value = item.rpartition(":")
        number = _number(value)
        if name.strip() and number is not None:
            counts[name.strip()] = counts.get(name.strip(), 0) + int(number)
    return counts


def csv_rows(text: str) -> list[dict[str, str]]:
    """The kernel rows of ncu's raw CSV page inside ``text`` (other output lines skipped; the units row dropped).

    The candidate prints into the same output, so only ncu's own table counts: the last one, after ncu's last
    ``==PROF== Disconnected from process`` line (ncu prints its report once the profiled process has gone).
    A table the candidate printed while it ran is ignored.
    """
    lines = text.splitlines()
    report = after_the_profiled_process(lines)
    lines = lines if report is None else report
    headers = [i for i, line in enumerate(lines) if line.startswith('"ID",')]
    if not headers:
        return []
    start = headers[-1]
    table = [line for line in lines[start:] if line.startswith('"')]
    rows = list(csv.DictReader(table))
    return [row for row in rows if (row.get("ID") or "").strip().isdigit()]


def base_opcode(opcode: str) -> str:
    """``HGMMA.64x128x16.F32.BF16`` -> ``HGMMA`` (the base opcode, as the static SASS analysis counts)."""
    return opcode.split(".", 1)[0]


def executed_opcodes(rows: list[dict[str, str]]) -> dict[str, int]:
    """Warp-level instructions executed per base SASS opcode, summed over the profiled kernels."""
    total: Counter[str] = Counter()
    for row in rows:
        for opcode, count in instances(row.get(OPCODE_METRIC, "")).items():
            total[base_opcode(opcode)] += count
    return dict(sorted(total.items()))


def summary(rows: list[dict[str, str]]) -> dict[str, Any] | None:
    """The summary of the longest profiled kernel: its name, duration (ms), SOL compute/memory (%), achieved and
    theoretical occupancy (%), and the top stall reasons ``[[reason, warps per issue], ...]``; None without rows."""
    if not rows:
        return None
    row = max(rows, key=lambda r: _number(r.get(DURATION, "")) or 0.0)
    stalls = []
    for name, value in row.items():
        match = _STALL.match(name or "")
        number = _number(value or "")
        if match and number is not None and match.group(1) != "selected" and number > 0:
            stalls.append((match.group(1), number))
    stalls.sort(key=lambda item: -item[1])
    duration_ns = _number(row.get(DURATION, ""))
    return {
        "kernel": row.get("Kernel Name", ""),
        "kernels_profiled": len(rows),
        "duration_ms": None if duration_ns is None else duration_ns / 1e6,
        "sol_compute_pct": _number(row.get(SOL_COMPUTE, "")),
        "sol_memory_pct": _number(row.get(SOL_MEMORY, "")),
        "achieved_occupancy_pct": _number(row.get(ACHIEVED_OCCUPANCY, "")),
        "theoretical_occupancy_pct": _number(row.get(THEORETICAL_OCCUPANCY, "")),
        "top_stalls": [[reason, round(value, 3)] for reason, value in stalls[:TOP_STALLS]],
    }
