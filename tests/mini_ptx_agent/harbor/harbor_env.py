"""Harbor's own checks, run in Harbor's Python 3.12 environment (``harbor`` 0.25 needs Python >= 3.12).

The environment is ``.ci/harbor-venv`` in the checkout (``.ci/run`` builds it) or the interpreter named by
``$PTXBENCH_HARBOR_PYTHON``. Absent, the tests that need it skip and say how to build it, except where
``$PTXBENCH_REQUIRE_HARBOR`` is set (``.ci/run`` sets it): there they fail, so CI never skips them quietly.
``harbor_checks.py`` is the script they run there. A uniquely named module (not conftest), so that test
modules can import it unambiguously.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
AGENT_SRC = REPO / "packages" / "mini-ptx-agent" / "src"
CHECKS = Path(__file__).with_name("harbor_checks.py")
BUILD = (
    "uv venv --python 3.12 .ci/harbor-venv && uv pip install --python .ci/harbor-venv/bin/python "
    "harbor==0.25.0 (what .ci/run does)"
)


def harbor_python() -> Path:
    """The interpreter of Harbor's environment; skips the test (fails under ``$PTXBENCH_REQUIRE_HARBOR``) when
    there is none."""
    named = os.environ.get("PTXBENCH_HARBOR_PYTHON")
    python = Path(named) if named else REPO / ".ci" / "harbor-venv" / "bin" / "python"
    if python.is_file():
        return python
    message = f"Harbor's Python 3.12 environment is missing ({python}); build it with: {BUILD}"
    if os.environ.get("PTXBENCH_REQUIRE_HARBOR"):
        pytest.fail(message)
    pytest.skip(message)


def run_checks(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> Any:
    """Run ``harbor_checks.py ARGS`` in Harbor's environment, with mini_ptx_agent's source on ``PYTHONPATH``
    (as docker/Dockerfile.harbor has it); returns its JSON output."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(harbor_python()), str(CHECKS), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=base | {"PYTHONPATH": str(AGENT_SRC)} | (env or {}),
    )
    assert done.returncode == 0, f"harbor_checks {args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)
