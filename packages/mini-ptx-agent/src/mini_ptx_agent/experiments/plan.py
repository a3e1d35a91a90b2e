"""An experiment's expansion: the config's definitions selected from a catalog, crossed into trajectories.

:func:`expand` turns an :class:`~.config.ExperimentConfig` into an :class:`ExperimentPlan` (``plan.json`` at the
experiment's root): one :class:`PlannedTrajectory` per (definition, language, prompt tag, model, replica), each
with a stable id built from those values (``vector_add_f32.triton-hopper.scripted-good.r1``), so adding a replica
or a model to a config adds trajectories without renaming any. A trajectory id names its run directory
(``runs/<id>/``), a run of `ptxbench run`'s layout.

The catalog is where definitions are looked up: the trace sets an embedded FIBServe loads (``$DATASET_ROOTS`` or
the bundled set; :class:`LocalCatalog`) or a running FIBServe (:class:`ServiceCatalog`).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import hashlib
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..task import TaskLanguage
from .config import SUITES, ExperimentConfig, ExperimentConfigError, config_hash

PLAN_SCHEMA = "ptxbench.experiment/1"


class DefinitionInfo(BaseModel):
    """What selection needs of a definition."""

    name: str
    op_type: str
    tags: list[str] = Field(default_factory=list)


class ExperimentCatalog(Protocol):
    """Where an experiment looks definitions and workloads up: the trace sets (:class:`LocalCatalog`, over
    fibserve's :class:`~fibserve.datasets.catalog.Catalog`) or a running FIBServe (:class:`ServiceCatalog`)."""

    def definitions(self) -> list[DefinitionInfo]:
        """Every definition, sorted by name."""
        ...

    def workloads(self, definition: str) -> list[str]:
        """The workload uuids of ``definition``, in the catalog's order."""
        ...


class LocalCatalog:
    """The trace sets an embedded FIBServe would load: ``$DATASET_ROOTS``, else the bundled default set
    (:class:`fibserve.datasets.catalog.Catalog`, as the service reads them).

    Raises (at construction):
        ExperimentConfigError: the trace sets do not load.
    """

    def __init__(self) -> None:
        from fibserve.datasets.catalog import Catalog
        from fibserve.trace.problems import TraceSetError

        try:
            self.catalog = Catalog.load(None)
        except TraceSetError as exc:
            raise ExperimentConfigError(f"the trace sets do not load: {exc}") from None

    def definitions(self) -> list[DefinitionInfo]:
        return [
            DefinitionInfo(name=d.name, op_type=d.op_type, tags=list(d.tags))
            for d in self.catalog.definitions()
        ]

    def workloads(self, definition: str) -> list[str]:
        return [w.uuid for w in self.catalog.workloads(definition)]


class ServiceCatalog:
    """The catalog of a running FIBServe (``GET /definitions``, each definition's tags and workloads)."""

    def __init__(self, url: str, token: str | None = None):
        from fibserve.client import FIBServeClient

        self.client = FIBServeClient(url, token=token, timeout=30.0)

    def definitions(self) -> list[DefinitionInfo]:
        out = []
        for summary in self.client.definitions():
            definition = self.client.definition(summary.name)
            out.append(DefinitionInfo(name=summary.name, op_type=summary.op_type, tags=list(definition.tags)))
        return sorted(out, key=lambda d: d.name)

    def workloads(self, definition: str) -> list[str]:
        return [w.uuid for w in self.client.workloads(definition)]


class PlannedTrajectory(BaseModel):
    """One trajectory of the experiment: a run directory ``runs/<id>/``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """Stable id: ``<definition>.<prompt tag>.<model slug>.r<replica>``."""
    definition: str
    language: TaskLanguage
    prompt_tag: str
    model: str
    replica: int = Field(ge=0)
    seed: int = Field(ge=0)
    """Sent as ``seed`` to OpenAI-compatible endpoints."""
    workloads: list[str]
    """Workload uuids it is evaluated on."""


class ExperimentPlan(BaseModel):
    """``plan.json`` of an experiment directory: the config and its expansion."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal["ptxbench.experiment/1"] = PLAN_SCHEMA
    name: str
    """The experiment directory's name (the config's name and a UTC stamp)."""
    created_at: str
    """UTC, ISO 8601."""
    config: ExperimentConfig
    config_hash: str
    num_turns: int = Field(ge=1)
    """Turns per trajectory: the config's ``num_turns`` plus every ``--extend-turns``."""
    trajectories: list[PlannedTrajectory]

    @property
    def cells(self) -> list[tuple[str, str, str, str]]:
        """The distinct (definition, language, prompt tag, model) of its trajectories, in plan order."""
        return list(
            dict.fromkeys((t.definition, t.language, t.prompt_tag, t.model) for t in self.trajectories)
        )

    @property
    def expected_model_calls(self) -> int:
        """Model calls when every trajectory uses all its turns (an upper bound: a met target stops early)."""
        return len(self.trajectories) * self.num_turns


def select_definitions(config: ExperimentConfig, catalog: ExperimentCatalog) -> list[str]:
    """The names the config's ``definitions`` selects, sorted.

    Raises:
        ExperimentConfigError: a name the catalog does not have (with close matches), an exclusion that is not
            selected, or a selection that matches nothing.
    """
    wanted = config.definitions
    known = catalog.definitions()
    names = {d.name for d in known}
    for name in wanted.names + wanted.exclude:
        if name not in names:
            close = difflib.get_close_matches(name, sorted(names), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ExperimentConfigError(f"definitions: no definition {name!r} in the catalog{hint}")
    suite_tags = {SUITES[s] for s in wanted.suites}
    chosen = {
        d.name
        for d in known
        if d.name in wanted.names
        or d.op_type in wanted.op_types
        or set(d.tags) & (set(wanted.tags) | suite_tags)
    }
    chosen -= set(wanted.exclude)
    if not chosen:
        raise ExperimentConfigError(
            f"definitions: {wanted.model_dump(exclude_defaults=True)} selects no definition of the catalog "
            f"(op types there: {', '.join(sorted({d.op_type for d in known}))})"
        )
    return sorted(chosen)


def tags_by_language(config: ExperimentConfig) -> dict[str, list[str]]:
    """The prompt tags of each of the config's languages (each tag where its language and arch fit).

    Raises:
        ExperimentConfigError: an unknown tag; a tag that fits none of the languages; a language none fits.
    """
    from ..prompts import PROMPT_TAGS
    from ..runs.options import default_prompt_tag
    from ..task import TaskConfig

    out: dict[str, list[str]] = {}
    for tag in config.prompt_tags:
        spec = PROMPT_TAGS.get(tag)
        if spec is None:
            close = difflib.get_close_matches(tag, list(PROMPT_TAGS), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else " (`ptxbench prompts list` lists them)"
            raise ExperimentConfigError(f"prompt_tags: no tag {tag!r}{hint}")
        if spec.sm != config.arch or spec.language not in config.languages:
            raise ExperimentConfigError(
                f"prompt_tags: {tag} is written for {spec.language} on {spec.sm}; this config runs "
                f"{', '.join(config.languages)} on {config.arch}"
            )
        out.setdefault(spec.language, []).append(tag)
    for language in config.languages:
        if language not in out:
            if config.prompt_tags:
                fitting = sorted(
                    n for n, t in PROMPT_TAGS.items() if (t.language, t.sm) == (language, config.arch)
                )
                raise ExperimentConfigError(
                    f"prompt_tags: none is written for {language} on {config.arch}; add one of {', '.join(fitting)}"
                )
            out[language] = [
                default_prompt_tag(TaskConfig(definition="x", language=language, arch=config.arch))
            ]
    return out


def model_slug(name: str) -> str:
    """A model name as a file-name-safe id part: ``anthropic/claude-sonnet-4-5`` -> ``anthropic-claude-sonnet-4-5``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "model"


def trajectory_seed(seed: int, trajectory_id: str) -> int:
    """The seed of one trajectory: 31 bits of sha256(``<seed>:<id>``) (stable, independent of plan order)."""
    return int(hashlib.sha256(f"{seed}:{trajectory_id}".encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def _workloads(config: ExperimentConfig, definition: str, uuids: Sequence[str]) -> list[str]:
    if config.workloads == "all":
        chosen = list(uuids)
    elif isinstance(config.workloads, int):
        chosen = list(uuids[: config.workloads])
    else:
        chosen = [u for u in uuids if u in set(config.workloads)]
    if not chosen:
        raise ExperimentConfigError(f"workloads: {config.workloads!r} leaves {definition} without a workload")
    return chosen


def expand(
    config: ExperimentConfig, catalog: ExperimentCatalog, *, name: str | None = None
) -> ExperimentPlan:
    """The plan of ``config``: trajectories ordered replica first, so the first results cover every cell.

    ``name``: the experiment directory's name (default ``<config name>-<UTC stamp>``).

    Raises:
        ExperimentConfigError: see :func:`select_definitions` and :func:`tags_by_language`; a workload uuid that
            no selected definition has; two models whose slugs collide.
    """
    from ..runs.directory import utc_stamp

    definitions = select_definitions(config, catalog)
    tags = tags_by_language(config)
    workloads = {d: _workloads(config, d, catalog.workloads(d)) for d in definitions}
    if isinstance(config.workloads, list):
        unused = set(config.workloads) - {u for chosen in workloads.values() for u in chosen}
        if unused:
            raise ExperimentConfigError(
                f"workloads: {sorted(unused)[0]} is not a workload of a selected definition"
            )
    slugs = [model_slug(m.name) for m in config.models]
    if len(set(slugs)) != len(slugs):
        raise ExperimentConfigError(f"models: two names give the same id part ({slugs}); rename one")
    trajectories = []
    for replica in range(config.replicas):
        for definition in definitions:
            for language in config.languages:
                for tag in tags[language]:
                    for model, slug in zip(config.models, slugs, strict=True):
                        tid = f"{definition}.{tag}.{slug}.r{replica}"
                        trajectories.append(
                            PlannedTrajectory(
                                id=tid, definition=definition, language=language, prompt_tag=tag,
                                model=model.name, replica=replica, seed=trajectory_seed(config.seed, tid),
                                workloads=workloads[definition],
                            )
                        )  # fmt: skip
    return ExperimentPlan(
        name=name or f"{config.name}-{utc_stamp()}",
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        config=config,
        config_hash=config_hash(config),
        num_turns=config.num_turns,
        trajectories=trajectories,
    )


def describe(plan: ExperimentPlan) -> dict[str, Any]:
    """What `ptxbench experiment plan` prints: counts, cells and trajectory ids."""
    return {
        "name": plan.name,
        "config_hash": plan.config_hash,
        "definitions": sorted({t.definition for t in plan.trajectories}),
        "cells": len(plan.cells),
        "trajectories": len(plan.trajectories),
        "num_turns": plan.num_turns,
        "expected_model_calls": plan.expected_model_calls,
        "evaluated_workloads_per_turn": {
            d: len(w) for d, w in sorted({(t.definition, tuple(t.workloads)) for t in plan.trajectories})
        },
        "trajectory_ids": [t.id for t in plan.trajectories],
    }
