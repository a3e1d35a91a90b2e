"""What ran the trajectories a report counts: GPU, driver, clocks, versions, baselines, and the warnings.

Read from what the inputs hold: an experiment's ``manifest.json`` (GPU, driver, clocks, versions, when it
names them) and each evaluated turn's KernelReport (the hardware every workload ran on, the baseline it was
timed against). What no input says is reported as ``unknown``, never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..runs.turns import TurnRow
from .inputs import Source, evaluation_files, read_evaluation

UNKNOWN = "unknown"
_MANIFEST_PLACES = ("", "hardware", "environment", "service")
"""Where in a manifest to look for a key: the top level, then these sections."""


class Provenance(BaseModel):
    """The "what ran it" section of a report."""

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
    warnings: list[str] = Field(default_factory=list)


def _manifest_value(manifests: Sequence[dict[str, Any]], key: str) -> list[Any]:
    found = []
    for manifest in manifests:
        for place in _MANIFEST_PLACES:
            section = manifest.get(place) if place else manifest
            if isinstance(section, dict) and section.get(key) not in (None, "", {}):
                found.append(section[key])
                break
    return found


def _text(values: list[Any]) -> str:
    unique = sorted({v if isinstance(v, str) else repr(v) for v in values})
    return "; ".join(unique) if unique else UNKNOWN


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


def provenance(sources: Sequence[Source], warnings: list[str]) -> Provenance:
    """The provenance of a report over ``sources`` (reads every KernelReport file of their run directories)."""
    manifests = [s.manifest for s in sources if s.manifest]
    gpus: Counter[str] = Counter(str(g) for g in _manifest_value(manifests, "gpu"))
    baselines: dict[str, set[str]] = {}
    for source in sources:
        for run_dir in source.run_dirs:
            for path in evaluation_files(run_dir):
                report = read_evaluation(path)
                for workload in report.get("workloads") or []:
                    if workload.get("executed_on_gpu") and workload.get("hardware"):
                        gpus[str(workload["hardware"])] += 1
                    if workload.get("baseline"):
                        line = f"{workload['baseline']}: {workload.get('baseline_description') or 'no description'}"
                        baselines.setdefault(str(report.get("definition", UNKNOWN)), set()).add(line)
    versions: dict[str, str] = {}
    for found in _manifest_value(manifests, "versions"):
        if isinstance(found, dict):
            versions |= {str(k): str(v) for k, v in found.items()}
    for key in ("git_commit", "service_version"):
        if value := _manifest_value(manifests, key):
            versions[key] = _text(value)
    inputs = [
        f"{s.path} ({s.kind}: {len({r.trajectory for r in s.rows})} trajectories, {len(s.rows)} turns"
        + (f", {s.pending} without a finished turn" if s.pending else "")
        + ")"
        for s in sources
    ]
    return Provenance(
        made_at=datetime.now(UTC).isoformat(timespec="seconds"),
        made_by=_own_version(),
        inputs=inputs,
        gpus=sorted(gpus) or [UNKNOWN],
        driver=_text(_manifest_value(manifests, "driver")),
        clocks=_text(_manifest_value(manifests, "clocks")),
        versions=versions,
        baselines={d: sorted(lines) for d, lines in sorted(baselines.items())},
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
