"""z = x + y, except that it writes zeros whenever its inputs repeat content it has already seen: where a
harness repeats input content during timing, a kernel that caches answers by content would answer from its
cache there, and this one shows every such call as a wrong output."""

import hashlib

_seen = set()


def run(x, y, z):
    key = hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
    if key in _seen:
        z.zero_()
        return
    _seen.add(key)
    z.copy_(x + y)
