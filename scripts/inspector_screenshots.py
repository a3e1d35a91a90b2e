"""SVG screenshots of `ptxbench-inspect` (the pictures in docs/inspector/).

Each shot is ``PATH=NAME:KEYS``: open PATH in the inspector (headless, ``--size`` cells), press KEYS (comma
separated, textual's key names), wait for the screen to settle, and save ``<out>/<NAME>.svg``::

    uv run python scripts/inspector_screenshots.py --out docs/inspector \\
        "data/eval_runs/quickstart-...-cuda-gemm=trajectory-kernel:G,2" "EXP=experiment:"

docs/inspector.md says which inputs made the checked-in pictures.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from mini_ptx_agent.inspect.app import InspectorApp
from mini_ptx_agent.inspect.readers.sources import open_path


async def shoot(path: Path, keys: list[str], out: Path, size: tuple[int, int]) -> None:
    """Open ``path``, press ``keys``, save the screen as the SVG ``out``."""
    app = InspectorApp(open_path(path))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await app.workers.wait_for_complete()
            await pilot.pause()
        await pilot.pause(0.5)  # let notifications fade in (they are part of the picture)
        app.save_screenshot(out.name, str(out.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shots", nargs="+", help="PATH=NAME:KEYS")
    parser.add_argument("--out", type=Path, default=Path("docs/inspector"))
    parser.add_argument("--size", default="150x42", help="columns x rows of the terminal")
    args = parser.parse_args()
    width, height = (int(n) for n in args.size.split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    for shot in args.shots:
        path, _, rest = shot.rpartition("=")
        name, _, keys = rest.partition(":")
        target = args.out / f"{name}.svg"
        asyncio.run(shoot(Path(path), [k for k in keys.split(",") if k], target, (width, height)))
        print(f"wrote {target}")


if __name__ == "__main__":
    main()
