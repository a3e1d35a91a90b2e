"""What the model is sent of its earlier replies: whole within the caps, else a prose prefix and the kernel."""

from __future__ import annotations

from mini_ptx_agent.extraction import extract_kernel
from mini_ptx_agent.history import RESENT_KERNEL_CHARS, RESENT_PROSE_CHARS, bounded_history, bounded_reply

KERNEL = "def run(x, y, z):\n    pass\n"


def test_a_reply_within_the_caps_is_resent_as_written() -> None:
    reply = f"Plan first.\n```python\n{KERNEL}```\n"
    assert bounded_reply(reply, "triton") == reply


def test_long_prose_is_cut_and_the_kernel_kept_whole() -> None:
    reply = "word " * 200_000 + f"\n```python\n{KERNEL}```\n"
    resent = bounded_reply(reply, "triton")
    assert len(resent) < RESENT_PROSE_CHARS + 500
    assert resent.startswith("word word") and "not repeated here" in resent
    assert extract_kernel(resent, "triton").source == KERNEL  # the agent would extract the same kernel


def test_a_huge_kernel_is_resent_head_and_tail() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(20_000))
    reply = f"```python\ndef run(x, y, z):\n{body}```"
    resent = bounded_reply(reply, "triton")
    assert len(resent) < RESENT_KERNEL_CHARS + RESENT_PROSE_CHARS + 500
    assert "def run(x, y, z):" in resent and "x19999 = 19999" in resent and "characters omitted" in resent


def test_a_reply_without_a_kernel_keeps_a_closed_prefix() -> None:
    draft = "x = 1\n" * 2_000  # a block longer than the prose cap, never closed within it
    reply = "Thinking.\n```cuda\n" + draft + "```\n" + "more " * 10_000
    resent = bounded_reply(reply, "triton")  # a CUDA block in a Triton task: not a kernel
    assert resent.startswith("Thinking.") and "```cuda" not in resent and "not repeated here" in resent


def test_only_assistant_messages_are_bounded() -> None:
    long = "y" * (RESENT_PROSE_CHARS * 3)
    messages = [{"role": "user", "content": long}, {"role": "assistant", "content": long, "extra": {"k": 1}}]
    bounded = bounded_history(messages, "cuda")
    assert bounded[0] is messages[0] and bounded[1]["extra"] == {"k": 1}
    assert len(bounded[1]["content"]) < RESENT_PROSE_CHARS + 200 and messages[1]["content"] == long
