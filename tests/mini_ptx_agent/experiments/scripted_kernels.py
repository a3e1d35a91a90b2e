"""Two scripted models for experiment tests and benchmarks: ``scripted/good`` answers each CI definition with
a correct Triton kernel, ``scripted/broken`` first with prose and no code block, then with a kernel that does
not compile (cheap to evaluate), then with wrong ones.

Replies depend only on the request (the definition named in the task message, the turn = assistant messages
so far), so a resumed trajectory gets the same reply for the same turn. The request's ``seed`` (the
experiment sends one per trajectory) tells trajectories apart in :attr:`ScriptedOpenAIServer.answered`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from test_agent_loop import BAD as BROKEN_VECTOR_ADD
from test_agent_loop import GOOD as VECTOR_ADD

GOOD_MODEL = "scripted/good"
BROKEN_MODEL = "scripted/broken"

SOFTMAX = """\
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n + offs, e / tl.sum(e, axis=0), mask=mask)


def run(x, y):
    m, n = x.shape
    _softmax[(m,)](x, y, n, BLOCK=1024)
"""

GOOD = {"vector_add_f32": VECTOR_ADD, "softmax_rows_f32": SOFTMAX}
BROKEN = {
    "vector_add_f32": BROKEN_VECTOR_ADD,
    "softmax_rows_f32": SOFTMAX.replace("e / tl.sum(e, axis=0)", "e"),
}
NO_CODE = "Let me think about the memory layout first; the kernel follows next turn."


def definition_of(body: dict[str, Any]) -> str:
    """The definition named in the request's task message (its definition JSON's ``name``)."""
    task = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return json.loads(re.search(r"```json\n(.*?)\n```", task, re.S).group(1))["name"]


def turn_of(body: dict[str, Any]) -> int:
    """The turn a request asks for: 1 + the assistant messages in it."""
    return 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")


def good(body: dict[str, Any]) -> str:
    return f"A correct kernel.\n```python\n{GOOD[definition_of(body)]}```\n"


def broken(body: dict[str, Any]) -> str:
    turn = turn_of(body)
    if turn == 1:
        return NO_CODE
    if turn == 2:
        return f"Draft.\n```python\n{GOOD[definition_of(body)].replace('def run(', 'def run((')}```\n"
    return f"Trying again.\n```python\n{BROKEN[definition_of(body)]}```\n"


RESPOND = {GOOD_MODEL: good, BROKEN_MODEL: broken}
