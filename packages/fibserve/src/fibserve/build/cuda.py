"""Compile CUDA/C++ sources with the tvm-ffi binding into a shared library, keeping PTX and cubins.

One nvcc invocation builds everything: ``-keep`` leaves the PTX and cubin of each translation unit in a keep
directory as a by-product of the normal pipeline, which costs nothing extra (a separate ``--ptx`` or
``--cubin`` pass would rerun the front end, the slow part: see benchmarks/static_analysis.md). Intermediate
files (preprocessed sources, fatbins, objects) are deleted afterwards; only ``.ptx`` and ``.cubin`` are kept.

Flags (the CUDA ABI of the README's "Writing a kernel"): ``-shared -O3 -lineinfo --ptxas-options=-v -Xcompiler -fPIC -std=c++17`` and
``-gencode=arch=compute_90a,code=sm_90a`` (or the chosen target), tvm-ffi's include directories, and
``-ltvm_ffi`` with an rpath to the installed library so the worker can ``dlopen`` the result as is.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from fibserve.sandbox import LimitName, Limits, Mounts
from fibserve.sandbox import run as run_sandboxed

from .result import BuildStatus
from .toolchain import find_nvcc, gencode_flag, tvm_ffi_paths

COMPILED_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
"""Source suffixes passed to nvcc; other files (headers) are only written next to them."""

BASE_FLAGS = ("-shared", "-O3", "-lineinfo", "--ptxas-options=-v", "-Xcompiler", "-fPIC", "-std=c++17")
"""nvcc flags every build gets (part of the cache key)."""

LIBRARY_NAME = "solution.so"

_ERROR_LINE = re.compile(
    r"(\berror\b|fatal|undefined reference|cannot find|No such file|catastrophic)", re.IGNORECASE
)
_NOISE = re.compile(r"^(ptxas info|\s+\d+ bytes stack frame|ptxas\s*:\s*info)", re.IGNORECASE)


def nvcc_command(sources: list[str], arch: str, extra_flags: list[str]) -> list[str]:
    """The nvcc argv for ``sources`` (relative to the source directory) and ``arch``.

    Output goes to ``../out/solution.so`` and the keep directory ``../keep`` (relative to the source dir,
    which is the working directory), so error messages name files as the candidate wrote them.
    """
    paths = tvm_ffi_paths()
    includes = [f"-I{d}" for d in paths.include_dirs]
    return [
        find_nvcc(),
        *BASE_FLAGS,
        gencode_flag(arch),
        *includes,
        "-I.",
        *extra_flags,
        "-keep",
        "-keep-dir",
        "../keep",
        *sources,
        "-o",
        f"../out/{LIBRARY_NAME}",
        f"-L{paths.library_dir}",
        "-ltvm_ffi",
        f"-Xlinker=-rpath,{paths.library_dir}",
    ]


def trim_compiler_log(
    log: str, build_dir: Path | None = None, *, max_errors: int = 12, max_chars: int = 8000
) -> str:
    """Keep what a model can act on: error lines with the source context nvcc prints after them.

    Drops ``ptxas info`` noise, replaces the build directory with nothing (paths read ``kernel.cu(12)``),
    and caps the result at ``max_errors`` errors and ``max_chars`` characters.
    """
    if build_dir is not None:
        log = log.replace(str(build_dir) + "/src/", "").replace(str(build_dir) + "/", "")
    lines = log.splitlines()
    kept: list[str] = []
    errors = 0
    index = 0
    while index < len(lines) and errors < max_errors:
        line = lines[index]
        if _ERROR_LINE.search(line) and not _NOISE.match(line):
            errors += 1
            kept.append(line)
            # nvcc follows an error with the offending source line and a caret line.
            for follow in lines[index + 1 : index + 4]:
                if _ERROR_LINE.search(follow) or not follow.strip() or follow.startswith(("ptxas", "nvcc")):
                    break
                kept.append(follow)
                index += 1
        index += 1
    if not kept:
        kept = [line for line in lines if line.strip() and not _NOISE.match(line)] or lines
    remaining = sum(1 for line in lines[index:] if _ERROR_LINE.search(line))
    if remaining:
        kept.append(f"... {remaining} more error line(s) omitted")
    text = "\n".join(kept)
    return text if len(text) <= max_chars else text[:max_chars] + "\n... (log truncated)"


@dataclass
class CompileOutcome:
    """What one nvcc build produced."""

    status: BuildStatus
    log: str
    """Trimmed errors on failure; the full ptxas ``-v`` report on success."""
    command: list[str]
    sandbox: str
    compile_ms: float
    library: str | None = None
    """``out/solution.so`` (relative to the build directory) on success."""
    ptx: list[str] = field(default_factory=list)
    cubins: list[str] = field(default_factory=list)
    transient: bool = False
    """The compiler was killed by a signal: the failure may not repeat, so it is not cached."""


def compile_tvm_ffi(
    build_dir: Path,
    sources: list[str],
    entry_symbol: str,
    arch: str,
    *,
    extra_flags: list[str],
    timeout_s: float,
    limits: Limits,
) -> CompileOutcome:
    """Compile ``build_dir/src/<sources>`` into ``build_dir/out/solution.so`` and keep PTX/cubins.

    nvcc runs in a :func:`fibserve.sandbox.run` sandbox that sees the system's toolchain and headers, the
    CUDA toolkit, tvm-ffi's headers and library, and, writable, only ``build_dir`` (the candidate's own
    files): ``#include "/etc/hostname"`` or ``"/proc/1/environ"`` finds nothing of the host's. It is
    killed with everything it started after ``timeout_s`` seconds.

    Raises:
        ToolchainError: nvcc or tvm-ffi is missing.
        fibserve.sandbox.SandboxUnavailable: the compiler cannot be confined here.
        OSError: the compiler could not be started.
    """
    src, out, keep = build_dir / "src", build_dir / "out", build_dir / "keep"
    out.mkdir(exist_ok=True)
    keep.mkdir(exist_ok=True)
    command = nvcc_command(sources, arch, extra_flags)
    paths = tvm_ffi_paths()
    toolkit = Path(command[0]).resolve().parent.parent
    readable = (
        *(Path(d) for d in paths.include_dirs),
        Path(paths.library_dir),
        Path(command[0]).parent,
        toolkit,
    )
    mounts = Mounts(readable=readable, writable=(build_dir,))
    result = run_sandboxed(command, mounts=mounts, limits=limits, timeout_s=timeout_s, cwd=src)
    (build_dir / "build.log").write_text(" ".join(command) + "\n\n" + result.output)
    outcome = CompileOutcome(
        status=BuildStatus.COMPILE_ERROR,
        log="",
        command=command,
        sandbox=result.sandbox,
        compile_ms=result.wall_ms,
    )
    if result.timed_out or (result.limit is not None and result.limit.limit is LimitName.CPU_TIME):
        shutil.rmtree(keep, ignore_errors=True)
        outcome.status = BuildStatus.TIMEOUT
        outcome.log = f"nvcc ran past the build limit of {timeout_s:.0f} s and was killed"
        return outcome
    if result.limit is not None or result.killed_by_signal:
        shutil.rmtree(keep, ignore_errors=True)
        outcome.transient = True
        reason = (
            result.limit.sentence() if result.limit else f"nvcc was killed (exit status {result.returncode})"
        )
        outcome.log = f"{reason}\n" + trim_compiler_log(result.output, build_dir)
        return outcome
    ptx, cubins = _collect_products(keep, out)
    shutil.rmtree(keep, ignore_errors=True)
    library = out / LIBRARY_NAME
    if result.returncode != 0 or not library.is_file():
        outcome.log = trim_compiler_log(annotate_ptxas_errors(result.output, out), build_dir)
        return outcome
    if f"__tvm_ffi_{entry_symbol}".encode() + b"\0" not in library.read_bytes():
        outcome.log = (
            f"the library does not export entry symbol {entry_symbol!r}: add "
            f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({entry_symbol}, <your host function>); at namespace scope"
        )
        return outcome
    outcome.status, outcome.log = BuildStatus.OK, result.output.strip()
    outcome.library, outcome.ptx, outcome.cubins = f"out/{LIBRARY_NAME}", ptx, cubins
    return outcome


_PTXAS_LOCATION = re.compile(r"ptxas (?P<path>\S+?\.ptx), line (?P<line>\d{1,9});")
"""A ptxas location; the digits are bounded, since the log also quotes the candidate's ``#error`` text and int()
refuses more than 4,300 digits (a ValueError that made a compile error the build infrastructure's failure)."""
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_FILE = re.compile(r"^\s*\.file\s+(\d+)\s+\"([^\"]+)\"", re.MULTILINE)


def annotate_ptxas_errors(log: str, ptx_dir: Path) -> str:
    """Point ptxas messages at the candidate's source: ``ptxas kernel.ptx, line 68 (kernel.cu:23);``.

    ptxas reports PTX line numbers, which mean nothing to the author of an inline ``asm`` statement; the
    nearest ``.loc`` directive above that PTX line (``-lineinfo`` emits them) names the source line. The log
    also quotes the candidate's own text (``#warning ptxas kernel.ptx, line 3;``), so a PTX that is not text
    (ptxas refused it for a byte like ``\\xff``) is read with replacement characters, and each PTX file's
    nearest ``.loc`` per line is found in one pass, however many locations the log names.
    """
    cache: dict[str, list[str | None] | None] = {}

    def locate(match: re.Match[str]) -> str:
        name = Path(match.group("path")).name
        if name not in cache:
            try:
                text = (ptx_dir / name).read_text(errors="replace")
            except OSError:
                cache[name] = None
            else:
                cache[name] = _source_lines(text)
        sources = cache[name]
        line = int(match.group("line"))
        if sources and line > 0 and (source := sources[min(line, len(sources)) - 1]) is not None:
            return f"ptxas {name}, line {line} ({source});"
        return f"ptxas {name}, line {line};"

    return _PTXAS_LOCATION.sub(locate, log)


def _source_lines(ptx: str) -> list[str | None]:
    """For each line of ``ptx``, ``file.cu:line`` of the nearest ``.loc`` at or above it (None before the first)."""
    files = dict(_FILE.findall(ptx))
    nearest: str | None = None
    result: list[str | None] = []
    for text in ptx.splitlines():
        if loc := _LOC.match(text):
            nearest = f"{Path(files.get(loc.group(1), '?')).name}:{loc.group(2)}"
        result.append(nearest)
    return result


def _collect_products(keep: Path, out: Path) -> tuple[list[str], list[str]]:
    """Move each translation unit's ``.ptx`` and ``.cubin`` from the keep dir to ``out`` (not the device-link
    cubin nvcc names after the library; a source of the candidate's named ``a_dlink.cu`` is kept: skipping
    every ``*_dlink`` stem hid its kernels from the analysis)."""
    ptx, cubins = [], []
    device_link = f"{Path(LIBRARY_NAME).stem}_dlink"
    for path in sorted(keep.iterdir()):
        if path.suffix == ".ptx" or (path.suffix == ".cubin" and path.stem != device_link):
            path.replace(out / path.name)
            (ptx if path.suffix == ".ptx" else cubins).append(f"out/{path.name}")
    return ptx, cubins
