"""Run the real `ptxbench` console script in a subprocess, with the model and service variables cleared.

A uniquely named module (not conftest) so that test modules can import it unambiguously.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLEARED = ("SERVICE_URL", "MODEL_NAME", "ACCRL_MODEL_HOST", "FIBSERVE_TOKEN", "DATASET_ROOTS")


def ptxbench(
    *args: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    """``ptxbench ARGS`` with ``env`` added to this environment (less :data:`CLEARED`); raises on timeout.

    ``COLUMNS=200``: rich wraps messages at 80 columns when not on a terminal, which would split the phrases
    the tests look for."""
    exe = Path(sys.executable).parent / "ptxbench"
    base = {k: v for k, v in os.environ.items() if k not in CLEARED} | {"COLUMNS": "200"}
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout, env=base | (env or {})
    )
