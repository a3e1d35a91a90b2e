"""Honest on its first call, then wrong on every other call: counts on only the last call per slot and
trial being compared, which the sampled comparisons right after each reply defeat."""

_calls = 0


def run(x, y, z):
    global _calls
    _calls += 1
    z.copy_(x + y if _calls % 2 == 1 else x - y)
