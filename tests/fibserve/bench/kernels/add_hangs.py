"""A candidate that never returns (the harness must time it out and replace the worker)."""


def run(x, y, z):
    while True:
        pass
