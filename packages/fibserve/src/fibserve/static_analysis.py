"""``fibserve.check``: everything FIBServe can say about a candidate without running it.

Defined here and exported lazily as ``fibserve.check`` (a module named ``check`` would shadow the function
on the package once imported).

Pipeline: source policy -> build (through the cache) -> PTX families -> SASS opcodes (cuobjdump) -> ptxas
resources -> verdict for the target. Works without a GPU; the result says plainly that nothing was executed.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fibserve.analysis.binary import analyse_binaries
from fibserve.analysis.report import Analysis, AnalysisOutcome, AnalysisUnavailable
from fibserve.analysis.sass import UnreadableBinary, resource_usage
from fibserve.build import (
    BuildResult,
    BuildStatus,
    PolicyConfig,
    build_solution,
    check_policy,
)
from fibserve.build.binary_policy import check_binary
from fibserve.build.c_source import strip_c_source
from fibserve.build.toolchain import cuda_release
from fibserve.sandbox import UNSAFE_NOTE
from fibserve.trace.python_ast import parse_python

if TYPE_CHECKING:
    from fibserve.trace import Definition, Solution


def analyse(solution: Solution, definition: Definition, arch: str, timeout_s: float) -> AnalysisOutcome:
    """:func:`check` for an evaluation: the analysis, or an :class:`AnalysisUnavailable` when the analysis
    itself raised (a CUDA/C++ evaluation then stops as a task error: ``bench.session.EvaluationSession``)."""
    try:
        return check(solution, definition=definition, arch=arch, timeout_s=timeout_s)
    except Exception as exc:
        return AnalysisUnavailable(error=f"static analysis unavailable: {exc!r}")


def check(
    solution: Solution | str | Path,
    *,
    definition: Definition | None = None,
    arch: str | None = None,
    policy: PolicyConfig | None = None,
    cache_dir: Path | None = None,
    timeout_s: float = 300.0,
) -> Analysis:
    """Statically check ``solution``: policy, build, PTX/SASS families, resources and the verdict.

    Args:
        solution: the candidate: a Solution, or the path of a ``kernel.cu``/``.cpp``, ``kernel.py`` (Triton) or
            Solution JSON file, read with :func:`solution_from_path`.
        definition: when given, the entry point's argument count is checked against its inputs and outputs;
            a mismatch makes an otherwise clean result ``abi_mismatch``.
        arch: target (``sm_90a`` or ``sm_100a``); None (default) uses ``TVM_FFI_CUDA_ARCH_LIST``, else sm_90a.
        policy: source policy (default :class:`PolicyConfig`).
        cache_dir: build cache root (default ``FIBSERVE_CACHE_DIR`` or ``~/.cache/fibserve``).
        timeout_s: compiler time limit in seconds.

    Returns:
        An :class:`Analysis`; candidate failures are statuses, never exceptions.

    Raises:
        OSError, ValueError: ``solution`` is a path that cannot be read as a candidate (see
            :func:`solution_from_path`).
    """
    if isinstance(solution, str | Path):
        solution = solution_from_path(Path(solution), definition.name if definition is not None else None)
    start = time.perf_counter()
    timings: dict[str, float] = {}
    language = solution.spec.language.value
    analysis = Analysis(
        solution=solution.name, definition=solution.definition, language=language, arch=None, status="clean"
    )
    violations = check_policy(solution, policy)
    timings["policy"] = _since(start)
    analysis.policy = violations
    if definition is not None:
        analysis.abi = check_arity(solution, definition)
    if violations:
        analysis.status = "policy_violation"
        analysis.notes.append("not built: fix the policy violations first")
        analysis.timings_ms = {**timings, "total": _since(start)}
        return analysis

    stage = time.perf_counter()
    build = build_solution(solution, arch=arch, cache_dir=cache_dir, timeout_s=timeout_s)
    timings["build"] = _since(stage)
    analysis.build = build
    if build.sandbox == "unsafe-none":
        analysis.notes.append(UNSAFE_NOTE)
    analysis.arch = build.arch
    analysis.status = {
        BuildStatus.OK: "clean",
        BuildStatus.COMPILE_ERROR: "compile_error",
        BuildStatus.TIMEOUT: "build_timeout",
        BuildStatus.INFRA_ERROR: "infra_error",
    }[build.status]
    if build.ok and language in ("cuda", "cpp"):
        failed: Exception | None = None
        try:
            _analyse_binary(analysis, build, timings)
        except Exception as exc:  # the library's imports are checked whatever the build products did here
            failed = exc
        if build.library_path is not None:
            stage = time.perf_counter()
            names = [k.name for k in analysis.kernels]
            try:
                embedded = [f.name for f in resource_usage(Path(build.library_path)) or []]
            except UnreadableBinary as exc:  # unknown kernels: never clean, but the imports still count
                failed, embedded = failed or exc, []
            unseen = [n for n in dict.fromkeys(embedded) if n not in names]
            if unseen:
                analysis.notes.append(
                    f"the library holds functions no analysed cubin does ({', '.join(unseen[:5])}): their names "
                    "were checked by the policy, their PTX and SASS not analysed"
                )
            imported = check_binary(build.library_path, names + unseen, policy)
            timings["binary_policy"] = _since(stage)
            if imported:
                analysis.policy += imported
                analysis.status = "policy_violation"
        if failed is not None:
            if analysis.status != "policy_violation":
                raise failed  # without the kernels' names the policy is not fully checked: unavailable, not clean
            analysis.notes.append(
                f"the PTX/SASS analysis failed ({failed!r}); the library's imports were checked"
            )
    elif build.ok:
        analysis.notes.append(
            "Triton/Python kernels compile when first launched; their PTX/SASS is not analysed statically"
        )
    if analysis.status == "clean" and analysis.abi:
        # The evaluator rejects these before running anything (bench.candidate.policy_problems).
        analysis.status = "abi_mismatch"
    analysis.notes.append(
        "static analysis: read from the build products alone (the kernel was not executed for it)"
    )
    analysis.timings_ms = {**timings, "total": _since(start)}
    return analysis


def _analyse_binary(analysis: Analysis, build: BuildResult, timings: dict[str, float]) -> None:
    stage = time.perf_counter()
    binary, cached = analyse_binaries(
        build.ptx_paths,
        build.cubin_paths,
        build.log,
        build.arch or "sm_90a",
        cache_file=Path(build.build_dir) / "analysis.json",
    )
    if cached:
        timings["analysis_cached"] = _since(stage)
    else:
        timings.update(binary.timings_ms)
    analysis.kernels = binary.kernels
    analysis.ptx_families = binary.ptx_families
    analysis.sass_opcodes = binary.sass_opcodes
    analysis.sass_tool = binary.sass_tool
    analysis.sass_tool_version = binary.sass_tool_version
    analysis.verdict = binary.verdict
    if mismatch := _disassembler_mismatch(binary.sass_tool, binary.sass_tool_version, build.toolchain):
        analysis.notes.append(mismatch)


def _disassembler_mismatch(
    tool: str | None, tool_version: str | None, toolchain: dict[str, str]
) -> str | None:
    """A warning when the cuobjdump's CUDA release differs from the compiler's, else None.

    cuobjdump decodes the cubin with its own instruction tables, so one older than nvcc can misname or fail on
    instructions the newer compiler emits, and one newer can differ in spelling: the SASS counts are then
    evidence from another toolkit, and the reader must know.
    """
    tool_release, nvcc_release = cuda_release(tool_version), cuda_release(toolchain.get("nvcc"))
    if tool is None or tool_release is None or nvcc_release is None or tool_release == nvcc_release:
        return None
    return (
        f"warning: SASS disassembled by cuobjdump {tool_release} ({tool}) for a build by nvcc {nvcc_release}: "
        f"the opcode counts come from another toolkit's disassembler (an older one can misread newer "
        f"instructions); install the CUDA {nvcc_release} cuobjdump (NVIDIA's package "
        f"cuda-cuobjdump-{nvcc_release.replace('.', '-')}, or that CUDA toolkit) and put it on PATH"
    )


def check_arity(solution: Solution, definition: Definition) -> list[str]:
    """Compare the entry function's parameter count with the definition's calling convention.

    Destination passing style: inputs then outputs; otherwise inputs only. Best effort: when no function
    named after the entry symbol is found (a tvm-ffi export under another C++ name), nothing is reported,
    since the evaluator treats every returned problem as fatal.
    """
    expected = len(definition.inputs) + (
        len(definition.outputs) if solution.spec.destination_passing_style else 0
    )
    names = list(definition.inputs) + (
        list(definition.outputs) if solution.spec.destination_passing_style else []
    )
    symbol = solution.spec.entry_symbol
    source = solution.entry_source().content
    found: int | None = None
    required: int | None = None  # parameters without a default value (Python); None = all of them
    if solution.spec.language.value in ("python", "triton"):
        try:
            tree = parse_python(source)
        except SyntaxError:
            return []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == symbol:
                if node.args.vararg is not None:
                    return []
                found = len(node.args.posonlyargs) + len(node.args.args)
                required = found - len(node.args.defaults)
    else:
        code = strip_c_source(source).code
        match = re.search(rf"\b{re.escape(symbol)}\s*\(([^()]*)\)\s*\{{", code)
        if match:
            params = match.group(1).strip()
            found = 0 if params in ("", "void") else params.count(",") + 1
    if found is None:
        # Not a mismatch: a CUDA entry can be exported under another C++ name
        # (TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, host_fn)), and a missing symbol is the build's or loader's to report.
        return []
    if not (required if required is not None else found) <= expected <= found:
        return [
            f"{symbol} takes {found} parameters but definition {definition.name!r} calls it with {expected} "
            f"({', '.join(names)}{'; outputs preallocated' if solution.spec.destination_passing_style else ''})"
        ]
    return []


def _since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def solution_from_path(
    path: Path,
    definition: str | None = None,
    *,
    legacy: bool = False,
    signature: tuple[int, list[str]] | None = None,
) -> Solution:
    """A Solution from ``kernel.cu``/``.cpp`` (cuda, tvm-ffi, ``<file>::run``), ``kernel.py`` (triton,
    ``<file>::run``) or a Solution JSON file.

    Args:
        legacy: read it as a 2025 FlashInfer Trace solution (:meth:`fibserve.trace.legacy.Migrator.solution`:
            a Python or Triton ``run`` that allocates and returns its outputs, a dict of them included, is
            evaluated as value-returning); a ``kernel.py`` is then such a solution too.
        signature: the definition's (number of inputs, output names), which the legacy migration needs to
            read a returned dict and to tell a destination-passing ``run`` from a value-returning one.

    Raises:
        ValueError: unknown file type, or an invalid Solution JSON (one line per problem, with a hint to pass
            ``legacy`` when the file was read without it).
        OSError: the file cannot be read.
    """
    import json

    from pydantic import ValidationError

    from fibserve.trace import Solution
    from fibserve.trace.legacy import Migrator
    from fibserve.trace.problems import describe_validation_error

    text = path.read_text()
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            if not legacy:
                return Solution.model_validate_json(text)
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise ValueError("expected a Solution JSON object")
            migrator = Migrator()
            solution = Solution.model_validate(migrator.solution(raw, signature=signature))
            migrator.warn(stacklevel=2)
            return solution
        except ValidationError as exc:
            hint = "" if legacy else " (a 2025 FlashInfer Trace solution? pass --legacy)"
            raise ValueError(
                f"{path.name}: not a valid Solution{hint}: {describe_validation_error(exc)}"
            ) from None
        except ValueError as exc:  # malformed JSON, or what the migration refuses
            raise ValueError(f"{path.name}: {exc}") from None
    if suffix in (".cu", ".cpp", ".cc", ".cxx"):
        language, binding = ("cuda" if suffix == ".cu" else "cpp"), "tvm-ffi"
    elif suffix == ".py":
        language, binding = "triton", None
    else:
        raise ValueError(f"{path.name}: expected a .cu, .cpp, .py or solution .json file")
    spec: dict = {
        "language": language,
        "target_hardware": ["NVIDIA_H100"],
        "entry_point": f"{path.name}::run",
    }
    if binding:
        spec["binding"] = binding
    raw = {
        "name": path.stem,
        "definition": definition or "unknown",
        "author": "local",
        "spec": spec,
        "sources": [{"path": path.name, "content": text}],
    }
    return Solution.model_validate(Migrator().solution(raw, signature=signature) if legacy else raw)


def load_policy(path: Path) -> PolicyConfig:
    """A :class:`PolicyConfig` from a YAML or JSON file (JSON is YAML), e.g. ``cuda_forbidden_libraries: [cublas]``.

    Raises:
        ValueError: the file is not a mapping of PolicyConfig fields (pydantic's message names the field).
        OSError: it cannot be read.
    """
    import yaml

    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: expected a mapping of PolicyConfig fields")
    return PolicyConfig.model_validate(data)
