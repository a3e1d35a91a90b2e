"""The source policy, checked again on the built library: what it imports cannot be obfuscated.

Rules (ids as reported):

- ``cuda.linked-library``: a ``DT_NEEDED`` entry for cuBLAS/cuBLASLt or cuDNN.
- ``cuda.imported-symbol``: an undefined dynamic symbol of those libraries (``cublasGemmEx``, ``cudnn*``),
  however the source spelled it (token pasting, a hand-written prototype resolved against the libraries
  torch already loaded into the worker).
- ``cuda.library-kernel``: a kernel whose mangled name lies in the ``cutlass`` or ``cute`` namespace
  (CUTLASS is header-only, so its use shows up as its kernels, not as imports).

``dlopen``/``dlsym`` are not checked here: the static CUDA runtime imports them itself.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from .elf_symbols import DynamicImports, read_dynamic_imports
from .policy import LIBRARY_NAMES
from .policy_config import PolicyConfig, PolicyViolation

_SYMBOL = {"cublas": re.compile(r"^cublas", re.IGNORECASE), "cudnn": re.compile(r"^cudnn", re.IGNORECASE)}
_LIBRARY = {
    "cublas": re.compile(r"^libcublas", re.IGNORECASE),
    "cudnn": re.compile(r"^libcudnn", re.IGNORECASE),
}
# Itanium mangling spells a namespace as <length><name>: N7cutlass..., N4cute...
_CUTLASS_KERNEL = re.compile(r"(^_Z|N)(7cutlass|4cute)\d")


def check_binary(
    library: Path, kernel_names: list[str], config: PolicyConfig | None = None
) -> list[PolicyViolation]:
    """Check a built library's imports and its kernels' names against ``config``.

    Args:
        library: the shared library (``BuildResult.library_path``).
        kernel_names: mangled kernel names found in its PTX/SASS.
        config: the benchmark's policy (default :class:`PolicyConfig`).

    Returns:
        Violations with ``file`` set to the library's file name and ``line`` 0; empty when clean or when the
        policy is disabled. An unreadable library contributes no import violations.
    """
    config = config or PolicyConfig()
    if not config.enabled:
        return []
    try:
        imports = read_dynamic_imports(library)
    except (OSError, ValueError, IndexError, struct.error):
        imports = DynamicImports()  # unreadable: the build vouched for it; the kernel names still count
    found: list[PolicyViolation] = []
    for family in config.cuda_forbidden_libraries:
        name = LIBRARY_NAMES[family]
        if family in _LIBRARY:
            for needed in imports.needed:
                if _LIBRARY[family].search(needed):
                    found.append(
                        PolicyViolation(
                            rule="cuda.linked-library",
                            file=library.name,
                            line=0,
                            message=f"the library links {needed} ({name}), which this benchmark forbids.",
                        )
                    )
            symbols = sorted({s for s in imports.undefined if _SYMBOL[family].search(s)})
            if symbols:
                shown = ", ".join(symbols[:5]) + (" ..." if len(symbols) > 5 else "")
                found.append(
                    PolicyViolation(
                        rule="cuda.imported-symbol",
                        file=library.name,
                        line=0,
                        message=f"the library imports {name} functions ({shown}), which this benchmark "
                        "forbids however they are declared; write the computation as your own kernel.",
                    )
                )
        if family == "cutlass":
            kernels = [k for k in kernel_names if _CUTLASS_KERNEL.search(k)]
            if kernels:
                found.append(
                    PolicyViolation(
                        rule="cuda.library-kernel",
                        file=library.name,
                        line=0,
                        message=f"{len(kernels)} kernel(s) come from the CUTLASS/CuTe namespaces "
                        f"(e.g. {kernels[0][:80]}), which this benchmark forbids.",
                    )
                )
    return found
