"""The experiment's manifest (``manifest.json``): what someone needs to trust or repeat its numbers.

It records the config and its hash, the versions of the packages and the git commit of the checkout that ran
it, the service (``/health``: version, lanes, sandbox, tools; the traces: GPU name and library versions; the
task answers: driver and clocks per lane), the models (ids, sampling settings, prices) and seeds, and per
trajectory its turns, tokens, cost (``"unknown"`` when a turn's model has no price) and wall time. It is
written when the experiment starts and rewritten when it stops, so a crash leaves the first version.
"""

from __future__ import annotations

import datetime as _dt
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from ..runs.directory import RunLayout, read_evaluation
from ..runs.summary import read_summary
from ..runs.turns import TurnRow
from ..trajectory import write_json
from .directory import ExperimentLayout
from .plan import ExperimentPlan

MANIFEST_SCHEMA = "ptxbench.experiment-manifest/1"
PACKAGES = ("mini-ptx-agent", "fibserve", "mini-swe-agent", "pydantic", "httpx", "litellm", "pyarrow")
"""Packages whose installed versions the manifest records."""


def package_versions() -> dict[str, str | None]:
    """Installed version of each of :data:`PACKAGES` (None: not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(where: Path | None = None) -> dict[str, Any] | None:
    """``{commit, dirty}`` of the git checkout holding ``where`` (default: this package's source), or None when
    it is not in one (an installed wheel) or git is missing."""
    folder = Path(where or Path(__file__).parent)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def _trace_environment(root: Path, plan: ExperimentPlan) -> dict[str, Any]:
    """GPU names and library versions from the traces of the evaluations written so far (a file that does not
    read is passed over)."""
    hardware: set[str] = set()
    libs: dict[str, str] = {}
    layout = ExperimentLayout(root)
    for t in plan.trajectories:
        for path in RunLayout(layout.run_dir(t.id)).evaluation_paths():
            report = read_evaluation(path)
            for trace in report.traces if report is not None else []:
                if trace.evaluation is not None:
                    hardware.add(trace.evaluation.environment.hardware)
                    libs.update(trace.evaluation.environment.libs)
    return {"hardware": sorted(hardware), "libs": libs}


def trajectory_usage(rows: list[TurnRow]) -> dict[str, Any]:
    """Turns, tokens in/out (None when an endpoint did not say) and cost of one trajectory's rows: the cost is
    ``"unknown"`` when any turn's model has no price."""
    tokens_in = [r.tokens_in for r in rows]
    tokens_out = [r.tokens_out for r in rows]
    costs = [r.cost_usd for r in rows]
    return {
        "turns": len(rows),
        "tokens_in": None if None in tokens_in else sum(t or 0 for t in tokens_in),
        "tokens_out": None if None in tokens_out else sum(t or 0 for t in tokens_out),
        "cost_usd": "unknown" if None in costs else round(sum(c or 0.0 for c in costs), 6),
    }


def build_manifest(
    plan: ExperimentPlan, root: Path, *, service: dict[str, Any], models: dict[str, Any], rows: list[TurnRow]
) -> dict[str, Any]:
    """The manifest of the experiment in ``root``. ``service``: ``{url, embedded, health, devices}``;
    ``models``: what :meth:`~.runner.ExperimentRunner.check_models` recorded; ``rows``: the per-turn table."""
    layout = ExperimentLayout(root)
    by_trajectory: dict[str, list[TurnRow]] = {}
    for row in rows:
        by_trajectory.setdefault(row.trajectory, []).append(row)
    trajectories = []
    for t in plan.trajectories:
        summary = read_summary(layout.run_dir(t.id))
        trajectories.append(
            {
                "id": t.id, "model": t.model, "seed": t.seed,
                **trajectory_usage(by_trajectory.get(t.id, [])),
                "exit_status": summary.exit_status if summary else None,
                "wall_time_s": summary.elapsed_s if summary else None,
            }
        )  # fmt: skip
    costs = [t["cost_usd"] for t in trajectories]
    return {
        "schema_version": MANIFEST_SCHEMA,
        "experiment": plan.name,
        "written_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "config": plan.config.model_dump(mode="json"),
        "config_hash": plan.config_hash,
        "num_turns": plan.num_turns,
        "packages": package_versions(),
        "git": git_commit(),
        "service": {**service, "traces": _trace_environment(root, plan)},
        "models": models,
        "seeds": {"base": plan.config.seed, "per_trajectory": "sha256(<base>:<trajectory id>), 31 bits"},
        "totals": {
            "trajectories": len(trajectories),
            "turns": len(rows),
            "cost_usd": "unknown"
            if "unknown" in costs
            else round(sum(c for c in costs if c != "unknown"), 6),
        },
        "trajectories": trajectories,
    }


def write_manifest(manifest: dict[str, Any], root: Path) -> Path:
    """Write ``manifest.json`` (atomically, secrets scrubbed)."""
    path = ExperimentLayout(root).manifest_path
    write_json(path, manifest)
    return path
