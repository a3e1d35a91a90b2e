"""Issue 35's standard for one line of benchmarks/peer_flashinfer_bench.py, and its table (no GPU needed).

A line is one (solution, workload) evaluated by both tools. Each tool's figures on it (:func:`figures`) are
judged by the same rule, chosen by the solution's role:

- ``honest`` (the naive GEMM): PASSED. It is the control the cheating kernels are measured against.
- ``cheat`` (a content cache, leftover work): with the honest kernel PASSED in the same tool and workload,
  not fooled: refused (a candidate status in ``REFUSALS``), or PASSED with a speedup at most
  ``CHEAT_SPEEDUP_ALLOWANCE`` times the honest kernel's and a baseline at most ``CHEAT_BASELINE_ALLOWANCE``
  times the one timed next to it (scripts/gpu_suite.py's allowances for the same kernels).
- ``short`` (torch.matmul at N = K = 1024, a vector add): PASSED with a latency within ``CUPTI_BAND`` of the
  CUPTI device time of the candidate's kernels and, for FIBServe, no higher than the peer's figure.

FIBServe is **ahead** on a line when the rule holds for FIBServe; the peer's own verdict is shown beside it.
"""

from __future__ import annotations

from typing import Any

CHEAT_SPEEDUP_ALLOWANCE = 1.05
CHEAT_BASELINE_ALLOWANCE = 1.10
CUPTI_BAND = 0.15
REFUSALS = frozenset(
    {"RUNTIME_ERROR", "INCORRECT_NUMERICAL", "INCORRECT_SHAPE", "INCORRECT_DTYPE", "TIMEOUT"}
)
"""Statuses by which a tool that ran a cheating kernel refused it (COMPILE_ERROR and harness errors are not)."""


def figures(status: str, performance: Any, log: str = "") -> dict[str, Any]:
    """One tool's result on one line: status, ``latency_ms``, ``reference_ms`` (its baseline or reference),
    ``speedup`` (None where not timed) and, when not PASSED, the end of its log."""
    timed = performance is not None and performance.latency_ms
    return {
        "status": status,
        "latency_ms": performance.latency_ms if timed else None,
        "reference_ms": performance.reference_latency_ms if timed else None,
        "speedup": performance.speedup_factor if timed else None,
        "log": "" if status == "PASSED" else " ".join((log or "").split())[-300:],
    }


def _cheat_rule(mine: dict[str, Any], honest: dict[str, Any] | None) -> tuple[bool, str]:
    """Not fooled: with ``honest`` (the honest kernel's figures in the same tool and workload) PASSED, ``mine``
    (a cheating kernel's figures) is refused, or its speedup and baseline are the honest one's within the
    allowances. A tool that did not run the kernel (a build or harness error) has not judged it."""
    if not honest or honest["status"] != "PASSED" or not honest["speedup"] or not honest["reference_ms"]:
        return False, "no PASSED honest kernel to compare with"
    if mine["status"] in REFUSALS:
        return True, f"not fooled: {mine['status']}"
    if mine["status"] != "PASSED":
        return False, f"not judged: {mine['status']}"
    if mine["speedup"] is None:
        return True, "not fooled: PASSED without a speedup"
    speedup = mine["speedup"] / honest["speedup"]
    baseline = (mine["reference_ms"] or float("nan")) / honest["reference_ms"]
    said = f"speedup {speedup:.2f}x, baseline {baseline:.2f}x the honest kernel's"
    if speedup > CHEAT_SPEEDUP_ALLOWANCE or not baseline <= CHEAT_BASELINE_ALLOWANCE:
        return False, f"fooled: {said}"
    return True, f"not fooled: {said}"


def _short_rule(mine: dict[str, Any], cupti_us: float | None, peer_ms: float | None) -> tuple[bool, str]:
    """``mine`` (a short kernel's figures) PASSED within ``CUPTI_BAND`` of ``cupti_us`` and, when ``peer_ms``
    is given, no higher than it."""
    if mine["status"] != "PASSED" or mine["latency_ms"] is None:
        return False, mine["status"] if mine["status"] != "PASSED" else "PASSED without a latency"
    if not cupti_us:
        return False, "no CUPTI time to compare with"
    ratio = mine["latency_ms"] * 1e3 / cupti_us
    said = f"{ratio:.2f}x CUPTI"
    if abs(ratio - 1.0) > CUPTI_BAND:
        return False, f"{said} (outside {CUPTI_BAND:.0%})"
    if peer_ms is not None and mine["latency_ms"] > peer_ms:
        return False, f"{said}, above the peer's {peer_ms:.4f} ms"
    return True, said


def _rule(row: dict[str, Any], tool: str, honest: dict[str, Any] | None) -> tuple[bool, str]:
    """Whether ``tool``'s figures on ``row`` meet issue 35's standard for the row's role, and why."""
    mine = row[tool]
    if row["role"] == "honest":
        passed = mine["status"] == "PASSED"
        return passed, "PASSED" if passed else f"the honest kernel got {mine['status']}"
    if row["role"] == "cheat":
        return _cheat_rule(mine, honest[tool] if honest else None)
    return _short_rule(mine, row.get("cupti_us"), row["peer"]["latency_ms"] if tool == "fibserve" else None)


def judge(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set each row's ``ahead``, ``why`` (FIBServe) and ``peer_meets``, ``peer_why`` from its figures.

    Rows carry ``role``, ``definition``, ``uuid``, ``fibserve`` and ``peer`` (:func:`figures` dicts) and, for
    short kernels, ``cupti_us``; a cheating kernel is compared with the honest row of the same definition and
    workload. Returns ``rows``.
    """
    honest = {(r["definition"], r["uuid"]): r for r in rows if r["role"] == "honest"}
    for row in rows:
        reference = honest.get((row["definition"], row["uuid"]))
        row["ahead"], row["why"] = _rule(row, "fibserve", reference)
        row["peer_meets"], row["peer_why"] = _rule(row, "peer", reference)
    return rows


def ms_cell(value: float | None) -> str:
    """A latency in ms as the table prints it: 4 decimals, ``-`` when there is none."""
    return "-" if value is None else f"{value:.4f}"


def markdown(rows: list[dict[str, Any]], header: str) -> list[str]:
    """The table (one line per row of :func:`judge`) under ``header``, then the summary."""
    lines = [
        header, "",
        "| solution | workload | FIBServe | ms | baseline ms | speedup | FlashInfer-Bench | ms | reference ms "
        "| speedup | CUPTI ms | FIBServe ahead | why | peer meets the standard |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]  # fmt: skip
    for r in rows:
        f, p = r["fibserve"], r["peer"]
        cupti = r.get("cupti_us")
        lines.append(
            f"| {r['solution']} | {r['workload']} | {f['status']} | {ms_cell(f['latency_ms'])} | "
            f"{ms_cell(f['reference_ms'])} | {ms_cell(f['speedup'])} | {p['status']} | {ms_cell(p['latency_ms'])} | "
            f"{ms_cell(p['reference_ms'])} | {ms_cell(p['speedup'])} | {ms_cell(cupti / 1e3 if cupti else None)} | "
            f"{'**ahead**' if r['ahead'] else 'not ahead'} | {r['why']} | "
            f"{'yes' if r['peer_meets'] else 'no'}: {r['peer_why']} |"
        )
    return [*lines, "", *summary(rows)]


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Lines saying on how many lines FIBServe is ahead, and where it is not or the peer misses."""
    ahead = sum(r["ahead"] for r in rows)
    said = [
        f"FIBServe ahead on {ahead} of {len(rows)} lines" + (": every line." if ahead == len(rows) else ".")
    ]
    said += [f"- not ahead: {r['solution']} {r['workload']}: {r['why']}" for r in rows if not r["ahead"]]
    said += [f"- FlashInfer-Bench misses: {r['solution']} {r['workload']}: {r['peer_why']}" for r in rows
             if not r["peer_meets"]]  # fmt: skip
    return said
