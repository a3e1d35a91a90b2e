"""Print the OpenAPI document of `fibserve serve` (the app ``create_app`` builds), as the server answers it.

Issue 15 rehoused the service without changing its HTTP API; this script is how that is checked: dump the
document on main and on a branch, then ``diff`` the two. It starts no lanes and no server: it builds the app on
the bundled trace set with a scratch task store and asks FastAPI for the document.

Usage: ``uv run python scripts/openapi_dump.py > openapi.json``
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main() -> None:
    from fibserve.serve.app import create_app
    from fibserve.serve.settings import ServeSettings

    with tempfile.TemporaryDirectory() as scratch:
        app = create_app(ServeSettings(devices=["cpu"], state_dir=Path(scratch) / "state"))
        sys.stdout.write(json.dumps(app.openapi(), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
