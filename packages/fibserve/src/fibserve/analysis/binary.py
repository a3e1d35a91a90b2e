"""Analyse the products of one CUDA build (PTX, cubins, ptxas log), cached next to them.

cuobjdump costs about half a second per cubin (it starts nvdisasm), far more than the 50 ms a cached check
may take, so the analysis of a build is written to ``<build_dir>/analysis.json`` and read back on the next
check of the same build. Products never change once a build is published, so the file stays valid; its
``version`` changes when the parsers do.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .ptx import parse_ptx
from .resources import CubinUsage, checked_resources, parse_ptxas_log
from .sass import SassReport, UnreadableBinary, dump_sass, resource_usage, sass_tool
from .verdict import KernelAnalysis, Verdict, decide, merge_kernels

ANALYSIS_VERSION = 7
"""Bumped whenever a parser or the verdict changes, so stale cached analyses are recomputed."""


class BinaryAnalysis(BaseModel):
    """What the PTX, the SASS and the ptxas log of one build show."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    version: int = ANALYSIS_VERSION
    """Format version (see ``ANALYSIS_VERSION``)."""
    target: str
    """Architecture the build targeted."""
    kernels: list[KernelAnalysis] = Field(default_factory=list)
    """Per-kernel evidence."""
    ptx_families: dict[str, int] = Field(default_factory=dict)
    """PTX family totals over all functions (kernels and non-inlined device functions)."""
    sass_opcodes: dict[str, int] = Field(default_factory=dict)
    """SASS base opcode totals over all kernels."""
    sass_tool: str | None = None
    """Path of the cuobjdump that disassembled the SASS (None when none was found)."""
    sass_tool_version: str | None = None
    """Its release line (``Cuda compilation tools, release 12.8, V12.8.55``)."""
    verdict: Verdict
    """Architecture verdict for ``target``."""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    """Milliseconds: ``ptx`` (parse), ``cuobjdump`` (SASS: run + parse), ``resources`` (the cubins' resource usage:
    run + parse, and the ptxas log checked against it) when computed."""


def analyse_binaries(
    ptx_paths: list[Path],
    cubin_paths: list[Path],
    ptxas_log: str,
    target: str,
    *,
    cache_file: Path | None = None,
) -> tuple[BinaryAnalysis, bool]:
    """Analyse a build's products, reusing ``cache_file`` when it holds a current analysis (same parsers,
    target and disassembler).

    Returns:
        ``(analysis, cached)``.
    """
    if cache_file is not None:
        try:
            cached = BinaryAnalysis.model_validate_json(cache_file.read_text())
        except (OSError, ValueError):
            cached = None
        if (
            cached is not None
            and cached.version == ANALYSIS_VERSION
            and cached.target == target
            and (cached.sass_tool, cached.sass_tool_version) == sass_tool()
        ):
            return cached, True
    timings: dict[str, float] = {}
    start = time.perf_counter()
    ptx_reports = [parse_ptx(path.read_text()) for path in ptx_paths]
    timings["ptx"] = (time.perf_counter() - start) * 1000.0
    start = time.perf_counter()
    sass = _dump_all(cubin_paths)
    timings["cuobjdump"] = (time.perf_counter() - start) * 1000.0
    start = time.perf_counter()
    usage, unread = _usage_of_all(cubin_paths)
    resources = checked_resources(ptxas_log, usage) if usage is not None else parse_ptxas_log(ptxas_log)
    if unread is not None:  # the log's as written: its spill and barrier counts may be the candidate's lines
        unknown = {"spill_store_bytes": None, "spill_load_bytes": None, "barriers": None}
        resources = [r.model_copy(update=unknown) for r in resources]
    timings["resources"] = (time.perf_counter() - start) * 1000.0
    families: dict[str, int] = {}
    for report in ptx_reports:
        for family, count in report.families.items():
            families[family] = families.get(family, 0) + count
    kernels = merge_kernels(ptx_reports, sass, resources)
    analysis = BinaryAnalysis(
        target=target,
        kernels=kernels,
        ptx_families=families,
        sass_opcodes=sass.opcodes,
        sass_tool=sass.tool,
        sass_tool_version=sass.tool_version,
        verdict=decide(
            target,
            ptx_reports,
            sass,
            resources,
            {k.name: k.display_name for k in kernels},
            unchecked_log=unread,
        ),
        timings_ms=timings,
    )
    if cache_file is not None:
        temporary = cache_file.with_name(f".{cache_file.name}.{os.getpid()}")
        try:
            temporary.write_text(analysis.model_dump_json())
            os.replace(temporary, cache_file)
        except OSError:
            pass  # a read-only cache is not an error; the next check recomputes
    return analysis, False


def _usage_of_all(cubins: list[Path]) -> tuple[list[CubinUsage] | None, str | None]:
    """Every cubin's resource usage, to hold the ptxas log (which the candidate's own diagnostics share) to,
    and why it could not be read. ``(None, None)`` without cuobjdump: the log is then read unchecked, and the
    verdict's notes say the SASS was not analysed either. ``(None, why)`` when cuobjdump could not read a
    cubin's usage: the log is read unchecked, and the verdict says so (:func:`~fibserve.analysis.verdict.decide`,
    ``unchecked_log``)."""
    usage: list[CubinUsage] = []
    for cubin in cubins:
        try:
            found = resource_usage(cubin)
        except UnreadableBinary as exc:
            return None, str(exc)
        if found is None:
            return None, None
        usage += found
    return usage, None


def _dump_all(cubins: list[Path]) -> SassReport:
    """cuobjdump takes one file per call; run the calls in parallel and keep the input order."""
    if len(cubins) <= 1:
        return dump_sass(cubins)
    with ThreadPoolExecutor(max_workers=min(len(cubins), os.cpu_count() or 1)) as pool:
        reports = list(pool.map(lambda path: dump_sass([path]), cubins))
    merged = SassReport(tool=reports[0].tool, tool_version=reports[0].tool_version)
    for report in reports:
        merged.kernels += report.kernels
        merged.error = merged.error or report.error
    return merged
