"""Cheats on timing from inside the worker: swaps the worker's timer for one that reports almost nothing,
while each call really takes more than 20 ms; computes z = x + y honestly."""

import sys
import time

from fibserve.bench.worker.clock import Timed


def _flattering_timer(fn, *args, **kwargs):  # whatever the worker passes
    fn()
    return Timed(0.001, 0.001, 0.0)


def run(x, y, z):
    sys.modules["fibserve.bench.worker.entry"].time_call = _flattering_timer
    time.sleep(0.02)
    z.copy_(x + y)
