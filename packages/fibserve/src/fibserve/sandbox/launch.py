"""The first program of every sandbox: join its cgroup, set its rlimits, then become the sandbox command.

Run as ``python -I -S launch.py [--cgroup FILE]... [--rlimit NAME=VALUE]... -- COMMAND...`` (standard
library only, no site packages: about 10 ms). Doing this in a program of its own, instead of in a
``preexec_fn`` of the service (which may deadlock in a threaded server), puts the whole tree in the group
before any of it runs: the process joins the group, then ``exec``s bubblewrap, whose children inherit both
the group and the limits.
"""

import os
import resource
import sys

RLIMITS = {"cpu": resource.RLIMIT_CPU, "fsize": resource.RLIMIT_FSIZE, "core": resource.RLIMIT_CORE}
"""Limits the service may set, by name; CPU gets a hard limit 5 s above the soft one (SIGXCPU, then SIGKILL)."""


def main(argv: list[str]) -> int:
    """Apply the options, then ``execvp`` the command; exit 126 when a cgroup or rlimit cannot be applied."""
    if "--" not in argv:
        print("usage: launch.py [--cgroup FILE]... [--rlimit NAME=VALUE]... -- COMMAND...", file=sys.stderr)
        return 2
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    try:
        for flag, value in zip(options[::2], options[1::2], strict=True):
            if flag == "--cgroup":
                with open(value, "w") as procs:
                    procs.write("0\n")  # "0" is the writing process itself
            elif flag == "--rlimit":
                name, number = value.split("=", 1)
                soft = int(number)
                hard = soft + 5 if name == "cpu" else soft
                resource.setrlimit(RLIMITS[name], (soft, hard))
            else:
                raise ValueError(f"unknown option {flag}")
    except (OSError, ValueError, KeyError) as exc:
        print(f"fibserve sandbox launcher: cannot apply limits: {exc}", file=sys.stderr)
        return 126
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
