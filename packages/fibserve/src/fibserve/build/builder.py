"""``build_solution``: the one entry point that turns a Solution into build products, through the cache."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from fibserve.sandbox import BUILD_LIMITS, Limits, SandboxUnavailable

from .cache import BuildCache, build_key, max_build_bytes, tree_bytes
from .cuda import BASE_FLAGS, COMPILED_SUFFIXES, compile_tvm_ffi
from .python_build import write_python_package
from .result import BuildResult, BuildStatus
from .toolchain import ToolchainError, find_nvcc, nvcc_version, resolve_arch, tvm_ffi_paths, tvm_ffi_version

if TYPE_CHECKING:
    from fibserve.trace import Solution

_COMPILED = ("cuda", "cpp")


def _key_payload(solution: Solution, arch: str | None, flags: list[str], toolchain: dict[str, str]) -> dict:
    spec = solution.spec
    return {
        "language": spec.language.value,
        "entry_point": spec.entry_point,
        "binding": spec.binding,
        "destination_passing_style": spec.destination_passing_style,
        "sources": sorted([s.path, s.content] for s in solution.sources),
        "arch": arch,
        "flags": flags,
        "toolchain": toolchain,
    }


def _toolchain(language: str) -> dict[str, str]:
    """What a compiled build depends on outside its sources: the nvcc release, the tvm-ffi version, and where
    ``libtvm_ffi.so`` lives (the library is linked with an rpath to it, so a build made from another
    environment, say another checkout's virtual environment, must not be served from the cache)."""
    if language not in _COMPILED:
        return {}
    return {
        "nvcc": nvcc_version(find_nvcc()),
        "tvm-ffi": tvm_ffi_version(),
        "tvm-ffi-library": tvm_ffi_paths().library,
    }


def build_solution(
    solution: Solution,
    *,
    arch: str | None = None,
    cache_dir: Path | None = None,
    timeout_s: float = 300.0,
    extra_flags: list[str] | None = None,
    limits: Limits | None = None,
) -> BuildResult:
    """Build ``solution`` for ``arch`` (default: ``TVM_FFI_CUDA_ARCH_LIST`` or sm_90a), using the cache.

    CUDA/C++ solutions with the tvm-ffi binding are compiled with nvcc in a sandboxed child process (see
    :mod:`fibserve.build.cuda`); Python/Triton solutions are written as a private package (see
    :mod:`fibserve.build.python_build`). Concurrent calls for the same key build once: the others wait on
    the key's file lock and then read the cached result.

    Args:
        solution: the candidate.
        arch: target architecture (``sm_90a``, ``sm_100a``); ignored for Python/Triton.
        cache_dir: cache root (default ``FIBSERVE_CACHE_DIR`` or ``~/.cache/fibserve``).
        timeout_s: wall-clock limit of the compiler in seconds.
        extra_flags: additional nvcc flags (server-side configuration only; part of the key).
        limits: the compiler's resource limits (default: :data:`fibserve.sandbox.BUILD_LIMITS`, with CPU time
            up to the time limit).

    Returns:
        A :class:`BuildResult`. Compile errors, timeouts and missing toolchains are statuses, never
        exceptions.
    """
    start = time.perf_counter()
    spec = solution.spec
    language = spec.language.value
    compiled = language in _COMPILED
    flags = [*BASE_FLAGS, *(extra_flags or [])] if compiled else []
    base = {"language": language, "entry_file": spec.entry_file, "entry_symbol": spec.entry_symbol}
    try:
        target = resolve_arch(arch) if compiled else None
        toolchain = _toolchain(language)
    except (ToolchainError, ValueError) as error:
        return BuildResult(status=BuildStatus.INFRA_ERROR, key="", build_dir="", log=str(error), **base)
    key = build_key(_key_payload(solution, target, flags, toolchain))
    cache = BuildCache(cache_dir)
    if (hit := cache.load(key)) is not None:
        hit.timings_ms = {"total": (time.perf_counter() - start) * 1000.0}
        return hit
    cap = max_build_bytes()
    limits = limits or BUILD_LIMITS.with_(cpu_s=int(timeout_s) + 1, file_bytes=cap)
    lock = FileLock(str(_ensure_parent(cache.lock_path(key))), timeout=timeout_s + 120)
    try:
        with lock:
            if (hit := cache.load(key)) is not None:  # another builder finished while we waited
                hit.timings_ms = {"total": (time.perf_counter() - start) * 1000.0}
                return hit
            staging = cache.staging_dir(key)
            result = BuildResult(
                status=BuildStatus.OK,
                key=key,
                build_dir=str(staging),
                arch=target,
                toolchain=toolchain,
                **base,
            )
            _build_into(solution, staging, result, list(extra_flags or []), timeout_s, limits)
            _bound_products(staging, result, cap)
            result.timings_ms["total"] = (time.perf_counter() - start) * 1000.0
            published = cache.publish(staging, result)
            published.hold(cache.lease(key))  # before the key's lock goes: no deleter can come in between
        cache.evict()  # outside the key's lock: other builders of this key need not wait for it
        return published
    except Timeout:
        return BuildResult(
            status=BuildStatus.INFRA_ERROR,
            key=key,
            build_dir="",
            log=f"timed out waiting for another build of the same solution (lock {cache.lock_path(key)})",
            **base,
        )


def _bound_products(staging: Path, result: BuildResult, cap: int) -> None:
    """Fail a build whose products exceed ``cap`` bytes (the candidate's COMPILE_ERROR, cached like one) and
    delete them, keeping only the record of why."""
    size = tree_bytes(staging)
    if size <= cap:
        return
    for entry in staging.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    result.status, result.transient = BuildStatus.COMPILE_ERROR, False
    result.library, result.ptx, result.cubins, result.package = None, [], [], None
    result.log = (
        f"the build wrote {size / 2**20:.0f} MiB, more than the limit of {cap / 2**20:.0f} MiB per build "
        "(FIBSERVE_MAX_BUILD_MB): a kernel's library, PTX and cubins take a few MiB; do not embed files "
        "(.incbin) or huge tables"
    )


def _ensure_parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _build_into(
    solution: Solution,
    staging: Path,
    result: BuildResult,
    extra_flags: list[str],
    timeout_s: float,
    limits: Limits,
) -> None:
    """Run the language's builder in ``staging`` and record its outcome on ``result``."""
    spec = solution.spec
    sources = {s.path: s.content for s in solution.sources}
    if result.language in _COMPILED:
        if spec.binding not in ("tvm-ffi", None):
            result.status = BuildStatus.COMPILE_ERROR
            result.log = (
                f"binding {spec.binding!r} is not supported; CUDA/C++ solutions use binding 'tvm-ffi'"
            )
            return
        src = staging / "src"
        for relative, text in sources.items():
            (src / relative).parent.mkdir(parents=True, exist_ok=True)
            (src / relative).write_bytes(text.encode("utf-8"))  # the bytes the policy judged
        units = sorted(p for p in sources if p.lower().endswith(COMPILED_SUFFIXES))
        if not units:
            result.status = BuildStatus.COMPILE_ERROR
            result.log = f"no compilable source ({', '.join(COMPILED_SUFFIXES)}) among {sorted(sources)}"
            return
        stems = [Path(unit).stem for unit in units]
        if clashes := sorted({stem for stem in stems if stems.count(stem) > 1}):
            # nvcc names the kept .ptx/.cubin (and its intermediates) after the file name alone.
            result.status = BuildStatus.COMPILE_ERROR
            result.log = f"compiled sources share the file name(s) {clashes} in different folders; rename one"
            return
        try:
            outcome = compile_tvm_ffi(
                staging,
                units,
                spec.entry_symbol,
                result.arch or "sm_90a",
                extra_flags=extra_flags,
                timeout_s=timeout_s,
                limits=limits,
            )
        except (ToolchainError, SandboxUnavailable, OSError) as error:
            result.status, result.log = BuildStatus.INFRA_ERROR, f"could not run nvcc: {error}"
            return
        result.status, result.log = outcome.status, outcome.log
        result.command, result.sandbox, result.transient = outcome.command, outcome.sandbox, outcome.transient
        result.timings_ms["compile"] = outcome.compile_ms
        result.library, result.ptx, result.cubins = outcome.library, outcome.ptx, outcome.cubins
    else:
        status, log, package = write_python_package(staging, result.key, sources)
        result.status, result.log = status, log
        result.package, result.package_root = package, "pkg"
