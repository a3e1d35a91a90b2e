"""Cheats on timing: writes its own reply, claiming more time than the request can have taken, into the worker's reply pipe,
whose descriptor number it reads from the worker's command line, then computes z = x + y honestly."""

import os
import sys


def run(x, y, z):
    fd = int(sys.argv[sys.argv.index("--out") + 1])
    os.write(fd, b'{"ok": true, "ms": [100000.0], "bound_ms": [100000.0], "overwrite_ms": [0.0]}\n')
    z.copy_(x + y)
