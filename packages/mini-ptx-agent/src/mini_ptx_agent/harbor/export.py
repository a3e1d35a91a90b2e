"""``ptxbench harbor export``: one Harbor task per definition, from the live evaluation service.

The definitions (named, or a suite's) and their workloads come from FIBServe over HTTP, the same answers the agent
gets, so the instruction matches what `ptxbench run` would send; the oracle kernel comes from the bundled data
(:mod:`mini_ptx_agent.harbor.oracles`). Everything is checked (names, prompt tag, output folders) before the first
file is written, and an existing task folder is never overwritten without ``force``.
"""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .. import __version__
from ..task import Arch, TaskConfig, TaskLanguage
from . import task_files
from .oracles import find_oracle
from .reward import RewardMode


class HarborExportError(ValueError):
    """The export cannot start: an unknown definition or suite, a wrong prompt tag, an existing task folder."""


class ExportOptions(BaseModel):
    """How the tasks are made (``ptxbench harbor export`` options)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    language: TaskLanguage = "cuda"
    arch: Arch = "sm_90a"
    target_speedup: float = Field(default=1.0, gt=0)
    """Minimum speedup against the baseline the task asks for (x)."""
    reward: RewardMode = "binary"
    """``binary`` (1/0 for correctness) or ``graded`` (docs/harbor.md)."""
    instruction_evidence: bool = False
    """The verifier profiles a correct kernel with Nsight Compute, and ``architecture`` counts executed families."""
    sanitizer_runs: int = Field(default=2, ge=0)
    """compute-sanitizer memcheck runs before the evaluation (the public tasks' ``max_check_runs``); 0: none."""
    prompt_tag: str | None = None
    """The system prompt in the instruction; default the base tag of the language and arch."""
    image: str = "ptxbench-eval:dev"
    """The base image of every task's environment (pin a digest for published tasks)."""
    gpus: int = Field(default=0, ge=0)
    """GPUs per container. 0 (the default): agent and verifier are clients of the standing FIBServe the host
    names in ``PTXBENCH_SERVICE_URL``, whose lanes serialise evaluations, so trials that run at once never time
    kernels on one GPU together. N: each container starts its own FIBServe on its GPUs (one trial at a time)."""
    agent_timeout_s: float = Field(default=3600.0, gt=0)
    verifier_timeout_s: float = Field(default=1800.0, gt=0)
    timeout_s: float = Field(default=600.0, gt=0)
    """Time limit of one evaluation (the task file's ``timeout_s``)."""
    force: bool = False
    """Replace task folders that exist."""


class ExportedTask(BaseModel):
    """One written task."""

    name: str
    path: str
    definition: str
    workloads: int
    oracle: str | None
    """Where the oracle kernel comes from; None when the definition has none (``solve.sh`` fails)."""


def select_definitions(client: Any, names: list[str], suite: str | None) -> list[Any]:
    """The live service's definitions named by ``names`` or tagged with ``suite`` (sorted by name).

    Raises:
        HarborExportError: an unknown name (with close matches), an unknown suite, nothing selected.
    """
    from ..experiments.config import SUITES

    known = sorted(summary.name for summary in client.definitions())
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else " (`fibserve definitions` lists them)"
            raise HarborExportError(f"the service has no definition {name!r}{hint}")
    chosen = [client.definition(name) for name in sorted(set(names))]
    if suite is not None:
        if suite not in SUITES:
            raise HarborExportError(f"no suite {suite!r}; the suites are {', '.join(SUITES)}")
        chosen += [
            d for d in map(client.definition, known) if SUITES[suite] in d.tags and d.name not in names
        ]
    if not chosen:
        raise HarborExportError("select definitions: give --definition NAME (repeatable) or --suite NAME")
    return sorted(chosen, key=lambda d: d.name)


def _prompt_tag(options: ExportOptions, task: TaskConfig) -> str:
    from ..runs.options import RunOptionError, check_prompt_tag, default_prompt_tag

    tag = options.prompt_tag or default_prompt_tag(task)
    try:
        check_prompt_tag(tag, task)
    except RunOptionError as exc:
        raise HarborExportError(str(exc)) from None
    return tag


def task_name(definition: str, language: str) -> str:
    """The task folder's name: ``<definition>-<language>``."""
    return f"{definition}-{language}"


def export_tasks(
    client: Any, out: Path, *, names: list[str], suite: str | None, options: ExportOptions
) -> list[ExportedTask]:
    """Write one task folder per selected definition under ``out`` (see :mod:`mini_ptx_agent.harbor.task_files`).

    ``client`` is a :class:`fibserve.client.FIBServeClient` (the live service).

    Raises:
        HarborExportError: see :func:`select_definitions`; a prompt tag that does not fit; a task folder that
            exists (without ``force``). Nothing is written then.
        fibserve.client.FIBServeError: the service failed.
    """
    from ..prompts import compose_system_prompt

    definitions = select_definitions(client, names, suite)
    probe = TaskConfig(definition=definitions[0].name, language=options.language, arch=options.arch)
    system_prompt = compose_system_prompt(_prompt_tag(options, probe))
    targets = [Path(out) / task_name(d.name, options.language) for d in definitions]
    existing = [str(path) for path in targets if path.exists()]
    if existing and not options.force:
        raise HarborExportError(f"task folders exist (pass --force to replace them): {', '.join(existing)}")
    written = []
    for definition, folder in zip(definitions, targets, strict=True):
        workloads = list(client.workloads(definition.name))
        written.append(_write_task(folder, definition, workloads, options, system_prompt))
    return written


def _write_task(
    folder: Path, definition: Any, workloads: list[Any], options: ExportOptions, system_prompt: str
) -> ExportedTask:
    from ..prompts import first_user_message

    name = folder.name
    task = TaskConfig(
        task_id=name, definition=definition.name, workloads=[w.uuid for w in workloads],
        language=options.language, arch=options.arch, target_speedup=options.target_speedup,
        sanitizer=options.sanitizer_runs > 0, sanitizer_runs=max(options.sanitizer_runs, 1),
        timeout_s=options.timeout_s,
    )  # fmt: skip
    definition_json = definition.model_dump(mode="json")
    message = first_user_message(
        definition_json, language=task.language, target_speedup=task.target_speedup, workloads=workloads,
        closing=f"Write the complete file to `{task_files.kernel_path(task)}`.",
    )  # fmt: skip
    oracle = find_oracle(task.definition, task.language)
    files = {
        "task.toml": task_files.task_toml(
            task, name=name, description=f"Write a {task.language} kernel for {task.definition} ({task.arch}).",
            metadata={
                "ptxbench_version": __version__, "definition": task.definition, "op_type": definition.op_type,
                "language": task.language, "arch": task.arch, "target_speedup": task.target_speedup,
                "reward": options.reward, "workloads": len(workloads), "tags": list(definition.tags),
                "oracle": oracle.origin if oracle else "none",
            },
            gpus=options.gpus, agent_timeout_s=options.agent_timeout_s,
            verifier_timeout_s=options.verifier_timeout_s,
        ),
        "instruction.md": task_files.instruction(
            task, system_prompt=system_prompt, task_message=message, reward=options.reward
        ),
        "environment/Dockerfile": task_files.dockerfile(task, name=name, image=options.image),
        "environment/task.json": task_files.task_json(task),
        "environment/reference/definition.json": _json(definition_json),
        "environment/reference/workloads.json": _json([w.model_dump(mode="json") for w in workloads]),
        "environment/reference/README.md": task_files.reference_readme(task, name=name),
        "tests/test.sh": task_files.test_sh(
            task, name=name, reward=options.reward, instruction_evidence=options.instruction_evidence
        ),
        "tests/task.json": task_files.task_json(task),
        "solution/solve.sh": task_files.solve_sh(
            task, name=name, oracle_file=oracle.file if oracle else None, origin=oracle.origin if oracle else None
        ),
    }  # fmt: skip
    if oracle is not None:
        files[f"solution/{oracle.file}"] = oracle.source
    if options.gpus > 0:
        files["environment/docker-compose.yaml"] = task_files.COMPOSE
    if folder.exists():
        shutil.rmtree(folder)
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if path.suffix == ".sh":
            path.chmod(0o755)
    return ExportedTask(
        name=name, path=str(folder), definition=task.definition, workloads=len(workloads),
        oracle=oracle.origin if oracle else None,
    )  # fmt: skip


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
