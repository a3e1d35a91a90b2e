"""Caches its result keyed by the input pointers: correct the first time a pointer is seen, stale after.

Input rotation (new contents behind the same pointer) must catch it.
"""

import torch

_CACHE: dict[tuple[int, int], torch.Tensor] = {}


def run(x, y, z):
    key = (x.data_ptr(), y.data_ptr())
    if key not in _CACHE:
        _CACHE[key] = x + y
    z.copy_(_CACHE[key])
