"""A candidate whose entry point raises at call time."""


def run(x, y, z):
    raise RuntimeError("deliberate failure inside the candidate")
