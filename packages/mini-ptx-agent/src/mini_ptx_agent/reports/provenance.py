"""What ran the trajectories a report counts: GPU, driver, clocks, versions, baselines, and the warnings.

Read from what the inputs hold: an experiment's ``manifest.json`` (``ptxbench.experiment-manifest/1``:
``service.devices`` lane -> the evaluator's device info, name, driver and the SM clocks at the start;
``service.traces`` GPU names and library versions; ``service.health.version``; ``packages``; ``git``) and each
evaluated turn's KernelReport (the hardware every GPU-timed workload ran on, the baseline it was timed
against, the libraries in its traces' environment). What no input says is ``unknown``, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..environment.report import KernelReport
from ..runs.directory import RunLayout, read_evaluation
from ..runs.turns import TurnRow
from .inputs import Source

UNKNOWN = "unknown"
CPU_ONLY_DRIVER = "none: the service had CPU lanes only (no GPU driver)"


class ReportProvenance(BaseModel):
    """The "what ran it" section of a report (a training record's source turn is
    :class:`mini_ptx_agent.data.records.Provenance`)."""

    model_config = ConfigDict(extra="forbid")

    made_at: str
    """UTC time the report was made (ISO 8601)."""
    made_by: str
    """The mini-ptx-agent version that made it."""
    inputs: list[str]
    """One line per input directory: path, kind, trajectories, turns, pending trajectories."""
    gpus: list[str]
    """GPU names from the manifests and the evaluations (``unknown`` when none says)."""
    driver: str
    clocks: str
    versions: dict[str, str] = Field(default_factory=dict)
    """Package or service -> version, from the manifests."""
    baselines: dict[str, list[str]] = Field(default_factory=dict)
    """Definition -> the baselines its speedups were measured against (name: description)."""
    gpu_timed: bool = False
    """Some workload was timed on a GPU (without, no speedup was measured, so no baseline was used)."""
    warnings: list[str] = Field(default_factory=list)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _clocks(lane: str, device: dict[str, Any]) -> str | None:
    start = _dict(device.get("start"))
    if start.get("sm_clock_mhz") is None:
        return None
    peak = start.get("max_sm_clock_mhz")
    return f"{lane}: SM {start['sm_clock_mhz']:g} MHz at start" + (f" (max {peak:g} MHz)" if peak else "")


def _from_manifest(manifest: dict[str, Any], found: dict[str, Any]) -> None:
    """Add what one experiment manifest says to ``found`` (gpus, drivers, clocks: sets; versions: dict)."""
    service = _dict(manifest.get("service"))
    for lane, device in _dict(service.get("devices")).items():
        device = _dict(device)
        if device.get("device") == "cpu":  # its "driver" is the machine's architecture, and it has no clocks
            found["cpu_lanes"] = True
            continue
        if device.get("name"):
            found["gpus"].add(str(device["name"]))
        if device.get("driver"):
            found["drivers"].add(str(device["driver"]))
        if clocks := _clocks(str(lane), device):
            found["clocks"].add(clocks)
    traces = _dict(service.get("traces"))
    found["gpus"].update(str(h) for h in traces.get("hardware") or [] if h and h != "cpu")
    found["versions"] |= {str(k): str(v) for k, v in _dict(traces.get("libs")).items()}
    found["versions"] |= {str(k): str(v) for k, v in _dict(manifest.get("packages")).items() if v}
    if version := _dict(service.get("health")).get("version"):
        found["versions"]["FIBServe service"] = str(version)
    git = _dict(manifest.get("git"))
    if git.get("commit"):
        found["versions"]["git commit"] = str(git["commit"]) + (" (dirty)" if git.get("dirty") else "")


def _from_report(report: KernelReport, found: dict[str, Any]) -> None:
    """Add what one KernelReport says: GPUs of GPU-timed workloads, baselines, trace libraries."""
    for workload in report.workloads:
        if workload.executed_on_gpu:
            found["gpu_timed"] = True
            if workload.hardware:
                found["gpus"].add(workload.hardware)
        if workload.baseline:
            line = f"{workload.baseline}: {workload.baseline_description or 'no description'}"
            found["baselines"].setdefault(report.definition, set()).add(line)
    for trace in report.traces:
        if trace.evaluation is not None:
            found["versions"] |= {str(k): str(v) for k, v in trace.evaluation.environment.libs.items()}


def _text(values: set[str]) -> str:
    return "; ".join(sorted(values)) if values else UNKNOWN


def _own_version() -> str:
    try:
        return f"mini-ptx-agent {version('mini-ptx-agent')}"
    except PackageNotFoundError:
        return f"mini-ptx-agent {UNKNOWN}"


def warnings_for(
    rows: Sequence[TurnRow], demo_trajectories: int, include_demo: bool, pending: int
) -> list[str]:
    """The warning lines of a report: CPU-only runs, demo replays, trajectories without a finished turn."""
    lines = []
    evaluated = [r for r in rows if r.failure_class not in ("format", "policy", "compile", "infrastructure")]
    not_executed = sum(r.failure_class == "not_executed" for r in rows)
    if evaluated and not any(r.executed_on_gpu for r in evaluated):
        lines.append(
            "CPU-only: no kernel was executed on a GPU. There are no speedups, and CUDA kernels were built "
            "and analysed but not run, so their correctness is unknown (counted as unknown, not as wrong)."
        )
    elif not_executed:
        lines.append(f"{not_executed} turns were built but not executed (no GPU lane): their correctness is "
                     "unknown and they give no speedup.")  # fmt: skip
    if demo_trajectories:
        what = "included, marked (demo)" if include_demo else "left out (--include-demo shows them, marked)"
        lines.append(f"{demo_trajectories} demo trajectories replay the bundled demo kernels, written by the "
                     f"PTXBench authors, not by a model: never a model's result; {what}.")  # fmt: skip
    if pending:
        lines.append(f"{pending} trajectory directories have no finished turn yet (not started, or stopped "
                     "before their first reply): the numbers count the trajectories that have.")  # fmt: skip
    return lines


def provenance(sources: Sequence[Source], warnings: list[str]) -> ReportProvenance:
    """The provenance of a report over ``sources`` (reads every KernelReport file of their run directories)."""
    found: dict[str, Any] = {
        "gpus": set(),
        "drivers": set(),
        "clocks": set(),
        "versions": {},
        "baselines": {},
        "cpu_lanes": False,
        "gpu_timed": False,
    }
    for source in sources:
        _from_manifest(source.manifest, found)
        for run_dir in source.run_dirs:
            for path in RunLayout(run_dir).evaluation_paths():
                if (
                    report := read_evaluation(path)
                ) is not None:  # unreadable: what it would say stays unknown
                    _from_report(report, found)
    inputs = [
        f"{s.path} ({s.kind}: {len({r.trajectory for r in s.rows})} trajectories, {len(s.rows)} turns"
        + (f", {s.pending} without a finished turn" if s.pending else "")
        + ")"
        for s in sources
    ]
    return ReportProvenance(
        made_at=datetime.now(UTC).isoformat(timespec="seconds"),
        made_by=_own_version(),
        inputs=inputs,
        gpus=sorted(found["gpus"]) or [UNKNOWN],
        driver=_text(found["drivers"])
        if found["drivers"] or not found["cpu_lanes"] or found["gpus"]
        else CPU_ONLY_DRIVER,
        clocks=_text(found["clocks"]),
        versions=dict(sorted(found["versions"].items())),
        baselines={d: sorted(lines) for d, lines in sorted(found["baselines"].items())},
        gpu_timed=found["gpu_timed"],
        warnings=warnings,
    )


def release_dates(sources: Sequence[Source]) -> dict[str, str]:
    """Model -> release date (``YYYY-MM-DD``) wherever a manifest names one: any mapping in it with a
    ``release_date`` and a ``name``, ``id`` or ``model``."""
    dates: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            name = node.get("name") or node.get("id") or node.get("model")
            if node.get("release_date") and isinstance(name, str):
                dates[name] = str(node["release_date"])[:10]
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    for source in sources:
        walk(source.manifest)
    return dates
