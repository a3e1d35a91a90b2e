import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# harbor_env (this folder); serve_helpers (the FIBServe server subprocess); scripted_openai (a model endpoint);
# run_cli (the `ptxbench` console script with the service and model variables cleared).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "fibserve" / "serve"))
sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
sys.path.insert(0, str(Path(__file__).parents[1] / "runs"))

from serve_helpers import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real `fibserve serve` on 127.0.0.1 with CPU lanes and the bundled trace set, one per test module."""
    process = ServerProcess(tmp_path_factory.mktemp("fibserve") / "state", ["--devices", "cpu"])
    process.start()
    yield process
    process.kill()
