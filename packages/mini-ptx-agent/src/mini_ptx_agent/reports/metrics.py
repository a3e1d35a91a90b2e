"""The report's metrics, computed on lists of :class:`~mini_ptx_agent.runs.turns.TurnRow`.

A trajectory is the turns of one ``(experiment, trajectory)`` pair, in turn order. At a turn limit T it counts
only its first T turns (a trajectory that stopped earlier counts the turns it made):

- **correct@T**: some turn PASSED every workload. A trajectory with no PASSED turn is *unknown*, not wrong,
  when one of its turns was built but not executed (CUDA without a GPU) or hit an infrastructure failure: an
  outage is never counted against a model. Rates are over the trajectories whose answer is known.
- **best speedup@T**: the best minimum-over-workloads speedup (x) among its PASSED turns timed on a GPU;
  summarized by median and geometric mean over trajectories that have one, and the share of known
  trajectories whose best reached the target.
- **verified@T**: some PASSED turn has its target architecture's required families in the SASS
  (:data:`REQUIRED_SASS`); *Nsight-confirmed* when Nsight Compute also saw them execute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..runs.directory import RunLayout
from ..runs.turns import TurnRow
from .stats import Estimate, bootstrap, geometric_mean, wilson

GroupBy = Literal["model", "definition", "tag", "language"]

GROUP_FIELD: dict[str, str] = {
    "model": "model",
    "definition": "definition",
    "tag": "prompt_tag",
    "language": "language",
}
"""``--by`` value -> the TurnRow field it groups on."""

REQUIRED_SASS: dict[str, tuple[str, ...]] = {"sm_90a": ("HGMMA", "UTMALDG"), "sm_100a": ("UTC",)}
"""Target architecture -> SASS opcode prefixes a kernel must contain to count as using it. Hopper: warpgroup
MMA (HGMMA, from wgmma.mma_async) and TMA loads (UTMALDG, from cp.async.bulk.tensor); Blackwell: tcgen05
(every ``UTC*`` opcode; fibserve.analysis.families). Other targets have no requirement: verified@T is not
defined for them."""

UNKNOWN_CLASSES = frozenset({"not_executed", "infrastructure"})
"""Failure classes that leave a turn's correctness unknown."""


def _has_families(found: Iterable[str] | None, required: tuple[str, ...]) -> bool:
    found = list(found or [])
    return all(any(name.startswith(prefix) for name in found) for prefix in required)


@dataclass
class Trajectory:
    """The turns of one trajectory, in turn order, and what they add up to at a turn limit."""

    experiment: str
    trajectory: str
    turns: list[TurnRow] = field(default_factory=list)
    model_label: str | None = None
    """The model as groups, legends and tables name it (:func:`model_labels`); None: the model's name."""
    _within: dict[int, list[TurnRow]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def first(self) -> TurnRow:
        return self.turns[0]

    def label(self, by: GroupBy) -> str:
        """The group this trajectory falls in; a demo replay's group says so (never a model's result)."""
        value = str(getattr(self.first, GROUP_FIELD[by]))
        if by == "model" and self.model_label:
            value = self.model_label
        return f"{value} (demo)" if self.first.demo and "demo" not in value else value

    def within(self, limit: int) -> list[TurnRow]:
        """The first turns, up to turn number ``limit`` (``turns`` is in turn order)."""
        if limit not in self._within:
            self._within[limit] = [row for row in self.turns if row.turn <= limit]
        return self._within[limit]

    def outcome(self, limit: int) -> Literal["correct", "incorrect", "unknown"]:
        """correct@T of this trajectory: ``correct``, ``incorrect`` or ``unknown`` (see the module docstring)."""
        turns = self.within(limit)
        if any(row.failure_class == "PASSED" for row in turns):
            return "correct"
        if not turns or any(row.failure_class in UNKNOWN_CLASSES for row in turns):
            return "unknown"
        return "incorrect"

    def best_speedup(self, limit: int) -> float | None:
        """Best minimum-over-workloads speedup (x) of a PASSED turn timed on a GPU within the first ``limit``."""
        speeds = [
            row.min_speedup
            for row in self.within(limit)
            if row.failure_class == "PASSED" and row.executed_on_gpu and row.min_speedup is not None
        ]
        return max(speeds) if speeds else None

    def target_met(self, limit: int) -> bool:
        return any(row.target_met for row in self.within(limit))

    def required(self) -> tuple[str, ...] | None:
        return REQUIRED_SASS.get(self.first.arch)

    def verified(self, limit: int) -> tuple[bool, bool]:
        """(verified@T, Nsight-confirmed@T): a PASSED turn with the required SASS families (and seen executing)."""
        required = self.required() or ()
        passed = [
            r
            for r in self.within(limit)
            if r.failure_class == "PASSED" and _has_families(r.sass_families, required)
        ]
        return bool(passed), any(
            _has_families(r.executed_families, required) for r in passed if r.executed_families
        )

    def tokens_out(self) -> int | None:
        """Completion tokens (reasoning included) over every turn; None when no turn reported them."""
        known = [row.tokens_out for row in self.turns if row.tokens_out is not None]
        return sum(known) if known else None

    def reasoning_tokens(self) -> int | None:
        known = [row.reasoning_tokens for row in self.turns if row.reasoning_tokens is not None]
        return sum(known) if known else None


REPLAY_PREFIX = "replay:"


def model_labels(models: Iterable[str]) -> dict[str, str]:
    """A short label per model name: ``replay:PATH`` becomes ``replay:`` and the run directory the file sits in
    (``.../run-X/trajectories/exp_000.traj.json`` -> ``replay:run-X``) or else the file's name; other names stay.
    Two names that would share a label keep their full names."""
    names = sorted(set(models))
    short = {}
    for name in names:
        short[name] = name
        if name.startswith(REPLAY_PREFIX):
            path = PurePath(name.removeprefix(REPLAY_PREFIX))
            run_dir = RunLayout.run_dir_of(path)
            short[name] = REPLAY_PREFIX + (run_dir.name if run_dir is not None else path.name)
    taken = [label for label in short.values()]
    return {name: label if taken.count(label) == 1 else name for name, label in short.items()}


def trajectories(rows: Iterable[TurnRow]) -> list[Trajectory]:
    """Rows grouped into trajectories, each in turn order, sorted by (experiment, trajectory), each with its
    model's label (:func:`model_labels`).

    Raises:
        ValueError: two rows claim the same turn of one trajectory (e.g. one run directory given twice).
    """
    by_key: dict[tuple[str, str], Trajectory] = {}
    for row in rows:
        key = (row.experiment, row.trajectory)
        by_key.setdefault(key, Trajectory(*key)).turns.append(row)
    for traj in by_key.values():
        traj.turns.sort(key=lambda row: row.turn)
        numbers = [row.turn for row in traj.turns]
        if len(set(numbers)) != len(numbers):
            raise ValueError(
                f"trajectory {traj.trajectory!r} of experiment {traj.experiment!r} has turn rows repeated; "
                "was one run directory given twice?"
            )
    labels = model_labels(traj.first.model for traj in by_key.values())
    for traj in by_key.values():
        traj.model_label = labels[traj.first.model]
    return [by_key[key] for key in sorted(by_key)]


def default_turn_limits(trajs: Sequence[Trajectory]) -> list[int]:
    """The turn limits a report uses when none are given: 1, 4 and 8 below the most turns any trajectory made,
    then that number (3-turn runs: 1 and 3; 8 turns: 1, 4 and 8)."""
    top = max((row.turn for traj in trajs for row in traj.turns), default=1)
    return [limit for limit in (1, 4, 8) if limit < top] + [top]


class GroupMetrics(BaseModel):
    """Every metric of one group at one turn limit, each with its 95% interval and n."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str
    turn_limit: int
    trajectories: int
    """Trajectories in the group (known or not)."""
    unknown: int
    """Trajectories whose correctness is unknown at this limit (left out of the rates)."""
    correct: Estimate
    """correct@T, Wilson interval, n = trajectories with a known answer."""
    speedup_median: Estimate
    """Median best speedup@T (x), bootstrap interval, n = trajectories with a GPU-timed correct kernel."""
    speedup_geomean: Estimate
    """Geometric mean of best speedup@T (x), bootstrap interval, same n."""
    target: Estimate
    """Share of known trajectories whose best reached the target speedup, Wilson interval."""
    verified: Estimate
    """verified@T, Wilson interval, n = known trajectories whose target architecture has a requirement."""
    nsight_confirmed: int
    """Verified trajectories whose required families Nsight Compute saw execute."""


def group_metrics(group: str, members: Sequence[Trajectory], limit: int) -> GroupMetrics:
    """The metrics of ``members`` (one group) at turn limit ``limit``."""
    outcomes = [traj.outcome(limit) for traj in members]
    known = [traj for traj, outcome in zip(members, outcomes, strict=True) if outcome != "unknown"]
    correct = sum(outcome == "correct" for outcome in outcomes)
    speeds = [s for s in (traj.best_speedup(limit) for traj in members) if s is not None and s > 0]
    with_requirement = [traj for traj in known if traj.required() is not None]
    verdicts = [traj.verified(limit) for traj in with_requirement]
    median, geomean = bootstrap(speeds, np.median, geometric_mean)
    return GroupMetrics(
        group=group,
        turn_limit=limit,
        trajectories=len(members),
        unknown=len(members) - len(known),
        correct=wilson(correct, len(known)),
        speedup_median=median,
        speedup_geomean=geomean,
        target=wilson(sum(traj.target_met(limit) for traj in known), len(known)),
        verified=wilson(sum(v for v, _ in verdicts), len(verdicts)),
        nsight_confirmed=sum(confirmed for _, confirmed in verdicts),
    )


def grouped(trajs: Iterable[Trajectory], key) -> dict[str, list[Trajectory]]:
    """Trajectories by ``key(trajectory)``, keys sorted."""
    groups: dict[str, list[Trajectory]] = {}
    for traj in trajs:
        groups.setdefault(key(traj), []).append(traj)
    return dict(sorted(groups.items()))


def metrics_by_group(trajs: Sequence[Trajectory], by: GroupBy, limits: Sequence[int]) -> list[GroupMetrics]:
    """:class:`GroupMetrics` of every group of ``by`` at every turn limit, by group then limit."""
    return [
        group_metrics(name, members, limit)
        for name, members in grouped(trajs, lambda t: t.label(by)).items()
        for limit in limits
    ]
