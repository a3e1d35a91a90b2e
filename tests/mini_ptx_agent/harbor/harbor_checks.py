"""Harbor's own checks of what PTXBench produces; run by Harbor's Python 3.12 (see harbor_env.py), prints JSON.

    harbor_checks.py tasks DIR...      `harbor lint --extend-select ALL` findings and Harbor's Task model per task
    harbor_checks.py atif FILE...      Harbor's ATIF validator (harbor.utils.trajectory_validator) per file
    harbor_checks.py agent LOGS MODEL  mini_ptx_agent.harbor.agent:MiniPtxAgent loaded as Harbor loads
                                       `-a module:Class`, installed and run in a local shell, its context read

Nothing of PTXBench is imported here except the agent class, the way Harbor imports it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath


def check_tasks(dirs: list[str]) -> dict:
    from harbor.models.task.task import Task

    lint = subprocess.run(
        [str(Path(sys.executable).parent / "harbor"), "lint", *dirs, "--extend-select", "ALL", "--json"],
        capture_output=True,
        text=True,
    )
    loaded = {}
    for folder in dirs:
        task = Task(folder)
        config = task.config
        loaded[Path(folder).name] = {
            "name": config.task.name if config.task else None,
            "agent_user": config.agent.user,
            "verifier_mode": config.verifier.environment_mode.value
            if config.verifier.environment_mode
            else None,
            "artifacts": [str(a) for a in config.artifacts],
            "gpus": config.environment.gpus,
            "instruction_chars": len(task.instruction),
            "has_solution": task.paths.solve_path.is_file(),
        }
    return {"lint_rc": lint.returncode, "lint": lint.stdout, "lint_err": lint.stderr, "tasks": loaded}


def check_atif(files: list[str]) -> dict:
    from harbor.utils.trajectory_validator import TrajectoryValidator

    results = {}
    for file in files:
        validator = TrajectoryValidator()
        results[file] = {"valid": validator.validate(Path(file)), "errors": validator.get_errors()}
    return results


class LocalShell:
    """Stands in for a task container (there is no Docker here): ``exec`` runs the command in bash on this
    machine with the given environment, as Harbor's environments run it in the container."""

    default_user = None

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        from harbor.environments.base import ExecResult

        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=cwd, env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), timeout=timeout_sec or 900)
        return ExecResult(stdout=out.decode(), stderr=err.decode(), return_code=process.returncode)


def check_agent(logs: str, model: str) -> dict:
    from harbor.agents.installed.base import BaseInstalledAgent
    from harbor.models.agent.context import AgentContext
    from harbor.utils.import_path import import_class

    agent_class = import_class(
        "mini_ptx_agent.harbor.agent:MiniPtxAgent", base=BaseInstalledAgent, label="agent"
    )
    logs_dir = Path(logs)
    agent = agent_class(
        logs_dir=logs_dir, model_name=model, environment_logs_dir=PurePosixPath(logs), num_turns=2
    )
    shell = LocalShell()
    context = AgentContext()

    async def go() -> None:
        await agent.setup(shell)
        await agent.run("the instruction (unused: the agent reads the task file)", shell, context)

    asyncio.run(go())
    agent.populate_context_post_run(context)
    return {
        "name": agent.name(),
        "version": agent.version(),
        "atif_capability": agent_class.capabilities.atif,
        "command": agent.solve_command(),
        "forwarded": sorted(agent.forwarded_env()),
        "context": context.model_dump(mode="json"),
    }


def main() -> None:
    what, *args = sys.argv[1:]
    if what == "tasks":
        result = check_tasks(args)
    elif what == "atif":
        result = check_atif(args)
    elif what == "agent":
        result = check_agent(*args)
    else:
        raise SystemExit(f"unknown check {what!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
