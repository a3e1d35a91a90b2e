"""The instruction families a target calls for, and whether a kernel has them (compiled in, or executed).

Hopper (``sm_90a``) calls for wgmma (``HGMMA`` in the SASS) or TMA (``UTMALDG``/``UTMASTG``/``UTMAREDG``);
Blackwell (``sm_100a``) for tcgen05 (``UTC*`` opcodes). Which opcode proves which family is decided in one
place, fibserve's architecture verdict (:func:`fibserve.analysis.verdict.decide`): the service applies it to
the compiled SASS (the static analysis), and :func:`executed_families` applies it to the opcodes Nsight
Compute counted as executed. Whether a report meets its target's families is decided in
:func:`mini_ptx_agent.environment.stop.submits`.
"""

from __future__ import annotations

from typing import Any

TARGET_FAMILIES: dict[str, tuple[str, ...]] = {"sm_90a": ("wgmma", "TMA"), "sm_100a": ("tcgen05",)}
"""Families a kernel for each target is expected to use; any one of them satisfies the target."""

FAMILY_OPCODES = {"wgmma": "HGMMA", "TMA": "UTMALDG/UTMASTG", "tcgen05": "UTC*"}
"""The SASS opcodes that prove each family, as the feedback names them."""


def verdict_families(verdict: Any) -> list[str]:
    """The target families an architecture verdict (:class:`fibserve.analysis.verdict.Verdict`) found."""
    found = [
        ("wgmma", verdict.uses_hopper_tensor_cores),
        ("TMA", verdict.uses_tma),
        ("tcgen05", verdict.uses_tcgen05),
    ]
    return [name for name, used in found if used]


def executed_families(target: str, opcodes: dict[str, int]) -> list[str]:
    """The target families proven by executed instruction counts (base SASS opcode -> warp instructions)."""
    from fibserve.analysis.sass import SassKernel, SassReport
    from fibserve.analysis.verdict import decide

    ran = {opcode: count for opcode, count in opcodes.items() if count > 0}
    sass = SassReport(kernels=[SassKernel(name="executed", opcodes=ran)])
    return verdict_families(decide(target, [], sass, []))


def describe(families: tuple[str, ...] | list[str]) -> str:
    """``wgmma (HGMMA) or TMA (UTMALDG/UTMASTG)``."""
    return " or ".join(f"{name} ({FAMILY_OPCODES[name]})" for name in families)


def has_target_families(target: str | None, families: list[str]) -> bool:
    """Whether ``families`` include one the target calls for (True for a target that calls for none)."""
    wanted = TARGET_FAMILIES.get(target or "")
    return not wanted or any(name in families for name in wanted)
