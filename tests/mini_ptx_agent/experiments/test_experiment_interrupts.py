"""The first Ctrl-C of `ptxbench experiment run` says it is stopping without re-entering what the main thread
was doing when the signal came.

Python runs a SIGINT handler between two bytecodes of the main thread. Under `--ray` that thread prints the
progress with rich, whose first print imports ``rich._emoji_codes``; a handler that printed at that moment
re-entered the half-done import and the run ended with "cannot import name 'EMOJI' from partially initialized
module" (seen in CI). The child process below delivers the SIGINT exactly there: an import hook sends it
when ``rich._emoji_codes`` starts executing.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import importlib.machinery, os, signal, sys
from rich.console import Console
from mini_ptx_agent.experiments.launch import _interrupts

class SignalDuringImport:
    def find_spec(self, name, path, target=None):
        if name != "rich._emoji_codes":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs now, the module still empty
            run(module)
        spec.loader.exec_module = exec_module
        return spec

class Runner:
    stopping = False
    def stop(self):
        self.stopping = True

assert "rich._emoji_codes" not in sys.modules
sys.meta_path.insert(0, SignalDuringImport())
console = Console(force_terminal=False, width=200)
runner = Runner()
with _interrupts(runner, console):
    console.print("[1/4] progress line")
import threading, time
for thread in threading.enumerate():
    if thread.name == "ptxbench-stopping-notice":
        thread.join(10)
assert runner.stopping
"""


def test_the_first_ctrl_c_during_richs_first_print_stops_and_says_so() -> None:
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[1/4] progress line" in result.stdout
    assert "stopping: no new trajectories" in result.stdout
