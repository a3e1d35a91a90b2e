"""A Python baseline in value-returning style (destination_passing_style false)."""


def run(x, y):
    return x + y
