"""The scripted models of the data-pipeline tests, on one OpenAI-compatible server: the two kernel writers of
the experiment tests (``scripted/good``, ``scripted/broken``), a repair model and a reasoning model.

``scripted/repair`` answers a repair request with an explanation and the correct kernel of the definition,
except for a failing softmax that did not even compile, which it "repairs" into a wrong kernel (so one repair
fails its evaluation). ``scripted/reasoning`` answers with prose only. Replies depend only on the request.

``python scripted_teachers.py PORT_FILE`` serves them until killed and writes ``127.0.0.1:PORT`` to PORT_FILE
(the reproduce scripts' measurement uses it).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "experiments"))
sys.path.insert(0, str(Path(__file__).parent.parent / "agent"))

from scripted_kernels import BROKEN, GOOD, RESPOND, definition_of
from scripted_model import ScriptedOpenAIServer

REPAIR_MODEL = "scripted/repair"
REASONING_MODEL = "scripted/reasoning"
REASONING_TEXT = (
    "The definition adds or normalises rows elementwise, so each program handles one contiguous block. "
    "Loads are masked at the tail, and the result is written in place into the preallocated output."
)


def repair(body: dict[str, Any]) -> str:
    definition = definition_of(body)
    failing = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "assistant")
    if definition == "softmax_rows_f32" and "def run((" in failing:
        kernel = BROKEN[definition]
    else:
        kernel = GOOD[definition]
    return f"The error log shows the kernel is wrong; I rewrite the body and keep the signature.\n```python\n{kernel}```\n"


def reasoning(body: dict[str, Any]) -> str:
    return REASONING_TEXT


TEACHERS = {**RESPOND, REPAIR_MODEL: repair, REASONING_MODEL: reasoning}
"""Every scripted model id -> its reply function."""


def main(port_file: str) -> None:
    with ScriptedOpenAIServer(respond=TEACHERS) as server:
        Path(port_file).write_text(server.host_port)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1])
