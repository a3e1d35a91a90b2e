"""Context policies: the message list each model call is sent, while the trajectory keeps every message.

The policy functions are checked on a three-turn conversation; then a KernelAgent with mini-swe-agent's
DeterministicModel (wrapped to record what it was sent) runs three turns under each policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_reports import report
from mini_ptx_agent.agent import KernelAgent, literal_template
from mini_ptx_agent.environment.evaluation import EvaluationEnvironment
from mini_ptx_agent.feedback_options import FeedbackOptions
from mini_ptx_agent.history import context_messages
from mini_ptx_agent.runs.directory import RunLayout
from minisweagent.models.test_models import DeterministicModel
from test_agent_decisions import TASK, PreparedReports, kernel

SYSTEM = {"role": "system", "content": "system prompt"}
TASK_MESSAGE = {"role": "user", "content": "task: write vector_add_f32"}


def reply(tag: str) -> dict:
    return {
        "role": "assistant",
        "content": f"Try {tag}.\n```python\n# {tag}\ndef run(x, y, z):\n    pass\n```\n",
    }


def feedback(tag: str) -> dict:
    return {"role": "user", "content": f"feedback on {tag}\nVERDICT: INCORRECT"}


CONVERSATION = [SYSTEM, TASK_MESSAGE, reply("t1"), feedback("t1"), reply("t2"), feedback("t2")]


def test_full_sends_every_message() -> None:
    assert context_messages(CONVERSATION, "full", "triton") == CONVERSATION


def test_latest_pair_sends_system_task_and_the_latest_reply_with_its_feedback() -> None:
    sent = context_messages(CONVERSATION, "latest-pair", "triton")
    assert sent == [SYSTEM, TASK_MESSAGE, reply("t2"), feedback("t2")]


def test_single_user_folds_the_task_the_latest_kernel_and_its_feedback_into_one_message() -> None:
    sent = context_messages(CONVERSATION, "single-user", "triton")
    assert [m["role"] for m in sent] == ["system", "user"] and sent[0] == SYSTEM
    text = sent[1]["content"]
    assert text.startswith("task: write vector_add_f32\n\nYour previous kernel:\n```python\n# t2\n")
    assert "Its evaluation:\nfeedback on t2" in text and text.endswith(
        "Write the next version of the kernel."
    )
    assert "t1" not in text and "Try t2" not in text  # only the kernel of the latest reply, not its prose


def test_the_first_call_is_system_and_task_under_every_policy() -> None:
    for policy in ("full", "latest-pair", "single-user"):
        assert context_messages([SYSTEM, TASK_MESSAGE], policy, "triton") == [SYSTEM, TASK_MESSAGE]


def test_single_user_after_a_reply_without_a_kernel_says_so() -> None:
    messages = [SYSTEM, TASK_MESSAGE, {"role": "assistant", "content": "thinking only"}, feedback("format")]
    text = context_messages(messages, "single-user", "triton")[1]["content"]
    assert "Your previous reply had no kernel block." in text and "feedback on format" in text


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown context policy 'everything'"):
        context_messages(CONVERSATION, "everything", "triton")  # type: ignore[arg-type]


class RecordingModel(DeterministicModel):
    """DeterministicModel that keeps the message list of every call."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.__dict__["sent"] = []

    def query(self, messages: list[dict], **kwargs) -> dict:
        self.__dict__["sent"].append([(m["role"], m["content"]) for m in messages])
        return super().query(messages, **kwargs)


@pytest.mark.parametrize("policy", ["full", "latest-pair", "single-user"])
def test_the_agent_sends_what_the_policy_says_and_keeps_every_message(tmp_path: Path, policy: str) -> None:
    failing = report(["INCORRECT_NUMERICAL"])
    backend = PreparedReports([failing, failing, failing])
    model = RecordingModel(outputs=[kernel("a"), kernel("b"), kernel("c")])
    files = RunLayout(tmp_path)
    agent = KernelAgent(
        model, EvaluationEnvironment(backend, TASK, FeedbackOptions(context_policy=policy)), files=files, task=TASK,
        system_template=literal_template("system"), instance_template=literal_template("task"), step_limit=3,
    )  # fmt: skip
    assert agent.run()["exit_status"] == "LimitsExceeded"
    roles = [[role for role, _ in call] for call in model.sent]
    expected = {
        "full": [["system", "user"], ["system", "user", "assistant", "user"], ["system", "user", *["assistant", "user"] * 2]],
        "latest-pair": [["system", "user"], *[["system", "user", "assistant", "user"]] * 2],
        "single-user": [["system", "user"]] * 3,
    }[policy]  # fmt: skip
    assert roles == expected
    third = "\n".join(content for _, content in model.sent[2])
    assert "# b" in third  # the latest kernel (turn 2) is always seen; turn 1's only with the full context
    assert ("# a" in third) is (policy == "full")
    # The trajectory keeps the whole conversation whatever the policy.
    assert [m["role"] for m in agent.messages][:8] == ["system", "user", *["assistant", "user"] * 3]
