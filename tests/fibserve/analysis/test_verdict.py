"""The architecture verdict from constructed PTX and SASS evidence (:func:`fibserve.analysis.verdict.decide`)."""

from __future__ import annotations

from fibserve.analysis.ptx import PtxFunction, PtxReport
from fibserve.analysis.sass import SassKernel, SassReport
from fibserve.analysis.verdict import decide


def _evidence(ptx_families: dict[str, int], opcodes: dict[str, int]) -> tuple[list[PtxReport], SassReport]:
    ptx = PtxReport(functions=[PtxFunction(name="k", kind="entry", families=ptx_families)])
    return [ptx], SassReport(kernels=[SassKernel(name="k", opcodes=opcodes)])


def test_a_tma_prefetch_alone_is_tma() -> None:
    """cp.async.bulk.prefetch.tensor compiles to UTMAPF, which the SASS check must count as TMA."""
    verdict = decide("sm_90a", *_evidence({"cp.async.bulk.tensor": 1}, {"UTMAPF": 1, "FADD": 2}), [])
    assert verdict.uses_tma and verdict.architecture_specific
    assert not any("compiled it away" in note for note in verdict.notes)


def test_mbarrier_on_an_ampere_target_is_read_from_the_ptx() -> None:
    """Before sm_90 mbarrier compiles to plain shared-memory stores and atomics: no SYNCS to prove it."""
    ampere = decide("sm_80", *_evidence({"mbarrier": 3}, {"STS": 1, "ATOMS": 2}), [])
    assert ampere.uses_mbarrier and not any("compiled it away" in note for note in ampere.notes)
    hopper = decide("sm_90a", *_evidence({"mbarrier": 3}, {"STS": 1, "ATOMS": 2}), [])
    assert not hopper.uses_mbarrier and any("mbarrier is in the PTX but no SYNCS" in n for n in hopper.notes)
