"""mini-ptx-agent as a Harbor agent: ``harbor run ... -a mini_ptx_agent.harbor.agent:MiniPtxAgent``.

Harbor loads this class in its own Python (>= 3.12) on the host; the agent itself runs inside the task
container, which already has it (every PTXBench task is built FROM ``ptxbench-eval``). So this module imports
only Harbor and the standard library: Harbor's environment needs the source tree on ``PYTHONPATH``
(``docker/Dockerfile.harbor`` sets that up), not our dependencies.

In the container it runs ``ptxbench harbor solve`` (:mod:`mini_ptx_agent.harbor.solve`): the agent reads the task
from ``/opt/ptxbench/task.json`` (so the instruction text Harbor passes is not needed: the agent composes the same
prompt itself), writes its best kernel where the verifier looks, its run directory under ``/logs/agent/ptxbench``
and the ATIF trajectory to ``/logs/agent/trajectory.json``, which Harbor syncs back and this class reads for
the token and cost totals.

The model is Harbor's ``-m`` (a litellm name, or the served id of an OpenAI-compatible endpoint with
``ACCRL_MODEL_HOST``); the variables in :data:`FORWARDED_ENV` that are set on the host are passed to that one
command's environment, never written into a file or an image. Options (``--ak``): ``num_turns``,
``prompt_tag``.
"""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any

from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import BaseInstalledAgent
from harbor.agents.options import Cli, InstalledAgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field

FORWARDED_ENV = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GEMINI_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "ACCRL_MODEL_HOST",
    "ACCRL_MODEL_API_KEY",
    "SERVICE_URL",
    "FIBSERVE_TOKEN",
    "PTXBENCH_TASK_CONFIG",
    "PTXBENCH_KERNEL",
)
"""Host variables passed to the agent's command when set: model credentials and endpoint, the FIBServe to use,
and (for running outside a task container) where the task file and the kernel are."""


class MiniPtxAgentOptions(InstalledAgentOptions):
    """``--ak`` options of :class:`MiniPtxAgent`."""

    num_turns: Annotated[int | None, Cli("--num-turns")] = Field(
        default=None, ge=1, description="Model calls before the run stops (default 3)."
    )
    prompt_tag: Annotated[str | None, Cli("--prompt-tag")] = Field(
        default=None, description="System prompt tag (default: the base tag of the task's language and arch)."
    )


class MiniPtxAgent(BaseInstalledAgent):
    """The PTXBench kernel agent (mini-swe-agent loop: kernel, FIBServe feedback, next kernel) in a task container."""

    capabilities = AgentCapabilities(atif=True)
    options_model = MiniPtxAgentOptions

    @staticmethod
    def name() -> str:
        return "mini-ptx-agent"

    def get_version_command(self) -> str | None:
        return "python -c 'import mini_ptx_agent; print(mini_ptx_agent.__version__)'"

    async def install(self, environment: BaseEnvironment) -> None:
        """Nothing to install in a PTXBench task image; anything else is refused with the reason."""
        check = "command -v ptxbench >/dev/null || { echo 'ptxbench is not installed in this image' >&2; exit 127; }"
        await self.exec_as_agent(environment, command=check)

    def solve_command(self) -> str:
        """The command run in the container (``ptxbench harbor solve`` with the model and options)."""
        logs = self.environment_logs_dir
        parts = [
            "ptxbench", "harbor", "solve", "--json",
            "--output-root", str(logs / "ptxbench"), "--atif", str(logs / "trajectory.json"),
        ]  # fmt: skip
        if self.model_name:
            parts += ["--model", self.model_name]
        flags = self.build_cli_flags()
        return " ".join(filter(None, [shlex.join(parts), flags, ">", shlex.quote(str(logs / "solve.json"))]))

    def forwarded_env(self) -> dict[str, str]:
        """The :data:`FORWARDED_ENV` variables that are set (Harbor's agent env, then the host's)."""
        return {name: value for name in FORWARDED_ENV if (value := self._get_env(name))}

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        """Run ``ptxbench harbor solve``; the task comes from the container's task file, not ``instruction``."""
        await self.exec_as_agent(environment, command=self.solve_command(), env=self.forwarded_env())

    def populate_context_post_run(self, context: AgentContext) -> None:
        """Token and cost totals from the ATIF trajectory; the run's exit status and kernel from ``solve.json``."""
        trajectory = self._read_json("trajectory.json")
        totals = trajectory.get("final_metrics") or {}
        context.n_input_tokens = totals.get("total_prompt_tokens")
        context.n_output_tokens = totals.get("total_completion_tokens")
        context.n_cache_tokens = totals.get("total_cached_tokens")
        context.cost_usd = totals.get("total_cost_usd")
        solved = self._read_json("solve.json")
        summary = solved.get("summary") or {}
        context.metadata = {
            "exit_status": summary.get("exit_status"),
            "turns": summary.get("turns"),
            "kernel_correct": summary.get("kernel_correct"),
            "target_met": summary.get("target_met"),
            "kernel": solved.get("kernel"),
            "submitted_turn": solved.get("submitted_turn"),
        }

    def _read_json(self, name: str) -> dict[str, Any]:
        path = self.logs_dir / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}
