"""Python and Triton builds: the sources become a private package, imported later by module path.

"Building" writes the sources under ``<build_dir>/pkg/<package>/`` (``package`` is unique per cache key,
so two candidates never share a module name), adds empty ``__init__.py`` files where a directory lacks one,
and checks the syntax. Importing is :func:`load_python_entry`, which the sandbox worker calls; the service
process never executes candidate code.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from .result import BuildResult, BuildStatus


def package_name(key: str) -> str:
    """Module name of the package for build ``key`` (``fibserve_solution_<16 hex>``)."""
    return f"fibserve_solution_{key[:16]}"


def write_python_package(build_dir: Path, key: str, sources: dict[str, str]) -> tuple[BuildStatus, str, str]:
    """Write ``sources`` (path -> text) as package ``package_name(key)`` under ``build_dir/pkg``.

    Returns:
        ``(status, log, package)``; status is COMPILE_ERROR when a ``.py`` file does not parse (the log
        names the file and line).
    """
    package = package_name(key)
    root = build_dir / "pkg" / package
    root.mkdir(parents=True)
    errors: list[str] = []
    for relative, text in sources.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))  # the bytes the policy judged (python_files)
        if relative.endswith(".py"):
            try:
                compile(text, relative, "exec", dont_inherit=True)
            except SyntaxError as error:
                errors.append(f"{relative}({error.lineno}): error: {error.msg}")
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        init = directory / "__init__.py"
        if not init.exists():
            init.write_text("")
    if errors:
        return BuildStatus.COMPILE_ERROR, "\n".join(errors), package
    return BuildStatus.OK, "", package


def load_python_entry(result: BuildResult) -> Callable[..., Any]:
    """Import a Python/Triton build and return its entry function. Call this in the sandbox worker only.

    The package is imported under its unique name, so relative imports between the solution's files work;
    the package directory is also put on ``sys.path`` so absolute sibling imports (``from utils import x``,
    as some public solutions write) work too. The worker is single-use, so the path entry does no harm.

    Raises:
        ImportError: the module cannot be imported.
        AttributeError: the module has no such entry symbol.
    """
    if result.package is None or result.package_root is None:
        raise ImportError(f"build {result.key[:12]} is not a Python/Triton build")
    root = Path(result.build_dir) / result.package_root
    package_dir = root / result.package
    if str(package_dir) not in sys.path:
        sys.path.insert(0, str(package_dir))
    if result.package not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            result.package, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot create an import spec for {package_dir}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[result.package] = module
        spec.loader.exec_module(module)
    dotted = ".".join(PurePosixPath(result.entry_file).with_suffix("").parts)
    module = importlib.import_module(f"{result.package}.{dotted}")
    return getattr(module, result.entry_symbol)


def load_tvm_ffi_entry(result: BuildResult) -> Callable[..., Any]:
    """Load a CUDA/C++ build's shared library with tvm-ffi and return its entry function (worker only).

    Raises:
        ImportError: the build has no library.
        AttributeError / RuntimeError: tvm-ffi cannot find the entry symbol or load the library.
    """
    if result.library_path is None:
        raise ImportError(f"build {result.key[:12]} has no shared library")
    import tvm_ffi

    module = tvm_ffi.load_module(str(result.library_path))
    return module[result.entry_symbol]
