"""The HTML report in a real headless Chromium (Debian's, driven by Playwright): it loads from a
file with no network, logs no console error, asks for nothing beyond itself, and shows the
leaderboard and every plot rendered. DESKBENCH_DOCS_SCREENSHOT=1 also refreshes docs/report.png."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_cli, watched_page
from test_report import _make_analytics_run, _make_run

SECTIONS = ("leaderboard", "calibration", "budget", "errors", "breakdowns", "effort-measures", "failures",
            "trajectories", "cost", "analytics")


def test_report_renders_offline_with_every_part(browser, tmp_path: Path) -> None:  # noqa: ANN001
    target = tmp_path / "report.html"
    proc = run_cli("report", str(_make_run(tmp_path / "run")), str(_make_analytics_run(tmp_path / "an")),
                   "--output", str(target))
    assert proc.returncode == 0, proc.stderr
    page, problems = watched_page(browser, ("file:", "data:"), viewport={"width": 1280, "height": 900})
    page.goto(target.as_uri(), wait_until="load")
    assert problems == []
    assert page.title()
    for section in SECTIONS:
        assert page.locator(f"#{section}").count() == 1, section
    rows = page.locator("table#leaderboard tbody tr")
    assert rows.count() == 2 and rows.first.is_visible()
    assert "rag&lt;1&gt;" not in page.locator("table#leaderboard").inner_text()  # escaped once, shown as text
    assert page.locator("table#analytics-leaderboard tbody tr").count() == 1
    images = page.locator("figure.plot img")
    assert images.count() >= 5
    sizes = images.evaluate_all("els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])")
    assert all(ok and w > 100 and h > 100 for ok, w, h in sizes), sizes
    shot = page.screenshot(full_page=True)
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("DESKBENCH_DOCS_SCREENSHOT"):
        docs = Path(__file__).resolve().parents[2] / "docs"
        docs.mkdir(exist_ok=True)
        (docs / "report.png").write_bytes(shot)
    page.close()
