"""report.html in a real browser: Debian's chromium, headless, driven by Playwright, with the network cut off.

Every figure must load and show more than a blank canvas, the console must stay free of errors, the page
must ask for nothing but itself (it opens offline), and a trajectory opens to its turns, kernels and feedback. CI installs chromium (.ci/run); without it this skips.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from mini_ptx_agent.reports.report import build_report
from synthetic import alpha_beta_rows, write_run_dir, write_turns_csv

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FIGURES = ("metrics_vs_turn_limit", "metrics_vs_release_date", "definition_model_heatmap",
           "prompt_tag_comparison", "tokens_vs_speedup")  # fmt: skip

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; .ci/run does it)"
)


def _colours(png: bytes) -> int:
    from PIL import Image

    return len(Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 20) or [])


def test_the_page_renders_every_figure_offline_without_console_errors(tmp_path):
    from playwright.sync_api import sync_playwright

    write_turns_csv(tmp_path / "exp" / "turns.csv", alpha_beta_rows())
    manifest = {"config": {"models": [{"name": "alpha", "release_date": "2025-03-01"},
                                      {"name": "beta", "release_date": "2025-09-15"}]}}  # fmt: skip
    (tmp_path / "exp" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    write_run_dir(tmp_path / "runs", "t1", [("INCORRECT_NUMERICAL", None), ("PASSED", 1.3)])
    result = build_report([tmp_path / "exp", tmp_path / "runs"], tmp_path / "out")
    page_url = Path(result.html).resolve().as_uri()

    problems: list[str] = []
    requested: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--disable-gpu", "--disable-background-networking"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on(
                "console",
                lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

            def route(r):
                requested.append(r.request.url)
                if r.request.url.startswith(("file:", "data:")):
                    r.continue_()
                else:
                    r.abort()

            page.route("**/*", route)
            page.goto(page_url, wait_until="load")
            for name in FIGURES:
                image = page.locator(f"figure#{name} img")
                assert image.count() == 1, name
                loaded = image.evaluate(
                    "img => img.complete && img.naturalWidth > 100 && img.naturalHeight > 100"
                )
                assert loaded, f"{name} did not load"
                assert _colours(image.screenshot()) > 50, f"{name} looks blank"
            summary = page.locator("#summary table tr").count()
            drilled = page.locator("#trajectories details.trajectory", has_text="runs / t1")
            assert not drilled.locator("table").is_visible()  # closed until asked
            drilled.locator("summary").first.click()
            turn2 = drilled.locator("tbody tr").nth(1)
            assert turn2.locator("td").nth(1).inner_text() == "PASSED" and "1.300x" in turn2.inner_text()
            turn2.locator("summary", has_text="kernel").click()
            turn2.locator("summary", has_text="feedback").click()
            assert (
                "// the kernel of turn 2" in turn2.inner_text() and "feedback of turn 2" in turn2.inner_text()
            )
            screenshot = page.screenshot(full_page=True)
        finally:
            browser.close()
    shot = Path(os.environ.get("PTXBENCH_REPORT_SCREENSHOT", tmp_path / "report.png"))
    shot.write_bytes(screenshot)
    assert problems == []
    assert [u for u in requested if not u.startswith(("file:", "data:"))] == []
    assert summary == 1 + 9  # header + 3 models x 3 turn limits
