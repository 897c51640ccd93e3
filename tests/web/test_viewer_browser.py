"""The episode viewer in Debian's headless Chromium (Playwright), on a demo-like run (the bundled
demo's PDFs, a bm25-agent episode scripted on the fake OpenAI server): log in, open an episode from
the table, see the thumbnails of the pages each search returned with the cited and the gold pages
marked, nothing blocked by the CSP, no request leaving the server. DESKBENCH_DOCS_SCREENSHOT=1 also
refreshes docs/viewer.png."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, watched_page
from fake_openai import FakeOpenAI
from test_web import serve

from deskbench.generate.demo import bundled_dir
from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app

TASK_ID = "gen/0001"  # evidence: larkspur-parks-board-annual-report-2017.pdf page 3
GOLD = ("larkspur-parks-board-annual-report-2017.pdf", 3)
WRONG = ("larkspur-parks-board-annual-report-2016.pdf", 3)  # a page the agent also cites, not evidence
SEARCHES = ("Larkspur staff", "full-time staff")


def script(body: dict[str, Any], n: int) -> dict[str, Any]:
    """Two searches, then the answer citing the gold page and a wrong one."""
    done = sum(m["role"] == "tool" for m in body["messages"])
    if done < len(SEARCHES):
        return {"kind": "tool", "name": "search_documents", "arguments": json.dumps({"query": SEARCHES[done]})}
    citations = [{"file": d, "page": p} for d, p in (GOLD, WRONG)]
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps({"answer": ["186"], "citations": citations})}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("viewer-demo")
    # their text layers only: OCR (tesseract on nine scanned pages, most of this fixture's time
    # before) is tested elsewhere; every page, scanned or not, still renders a thumbnail
    proc = run_cli("ingest", str(bundled_dir() / "docqa" / "pdfs"), "--corpus", str(root / "corpus"), "--ocr", "never",
                   "--quiet")
    assert proc.returncode == 0, proc.stderr
    tasks = [json.loads(line) for line in (bundled_dir() / "docqa" / "tasks.jsonl").read_text().splitlines()]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks if t["id"] == TASK_ID))
    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--tasks", str(root / "tasks.jsonl"), "--corpus", str(root / "corpus"),
                       "--out", str(root / "run"), "--agent", "bm25-agent", "--model", "openai/gpt-4.1",
                       "--view", "image", "--quiet", "--preset", "paper",  # the Prompt 5 loop, k=5: the fake's replies are for it
                       env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url})
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("run", "--tasks", str(root / "tasks.jsonl"), "--corpus", str(root / "corpus"),
                   "--out", str(root / "run"), "--agent", "lexical", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return {"root": root, "token": WebStore(root / "run").add_user("reviewer")}


def test_log_in_open_an_episode_and_see_the_marked_pages(browser, demo_run: dict[str, Any]) -> None:  # noqa: ANN001
    app = create_viewer_app([demo_run["root"] / "run"])  # pages from the corpus the run recorded
    with serve(app) as port:
        base = f"http://127.0.0.1:{port}"
        page, problems = watched_page(browser, base, viewport={"width": 1280, "height": 900})
        page.goto(base + "/", wait_until="load")
        assert page.url == base + "/login"
        page.fill("#token", demo_run["token"])
        page.click("#login button[type=submit]")
        page.wait_for_url(base + "/")
        rows = page.locator("table#episodes tbody tr")
        assert rows.count() == 2
        page.locator("tr[data-system='bm25-agent:openai/gpt-4.1'] a", has_text=TASK_ID).click()
        page.wait_for_load_state("load")
        assert page.locator("#question").inner_text().startswith(TASK_ID)

        searches = page.locator("section.step-tool")
        assert searches.count() == 2
        second = searches.nth(1)
        assert "full-time staff" in second.inner_text()
        thumbs = second.locator("figure.pagethumb")
        assert thumbs.count() == 5
        thumbs.first.scroll_into_view_if_needed()  # thumbnails load lazily, when they come into view
        page.wait_for_function("els => els.every(e => e.complete)", arg=thumbs.locator("img").element_handles())
        shown = thumbs.locator("img").evaluate_all("els => els.map(e => [e.complete, e.naturalWidth])")
        assert all(ok and width > 50 for ok, width in shown), shown  # every thumbnail rendered
        gold = second.locator(f"figure.pagethumb[data-doc='{GOLD[0]}'][data-page='{GOLD[1]}']")
        assert gold.get_attribute("class") == "pagethumb cited gold" and gold.is_visible()
        assert gold.locator(".mark-gold").inner_text() == "gold" and gold.locator(".mark-cited").inner_text() == "cited"
        wrong = second.locator(f"figure.pagethumb[data-doc='{WRONG[0]}'][data-page='{WRONG[1]}']")
        assert wrong.get_attribute("class") == "pagethumb cited" and wrong.locator(".mark-gold").count() == 0
        # the marks are drawn: a coloured border on the marked pages, none on the others
        borders = thumbs.evaluate_all("els => els.map(e => [e.className, getComputedStyle(e).borderTopColor])")
        plain = {color for css, color in borders if css == "pagethumb "}
        marked = {color for css, color in borders if "cited" in css}
        assert plain and marked and not plain & marked, borders
        assert page.locator("#score .outcome").inner_text() == "correct"

        page.locator("#answer").scroll_into_view_if_needed()
        shot = page.screenshot(full_page=False, clip={"x": 0, "y": 0, "width": 1280, "height": 900})
        assert shot[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("DESKBENCH_DOCS_SCREENSHOT"):  # the task, the answer, the score and the searches
            page.set_viewport_size({"width": 1280, "height": 1700})
            page.evaluate("window.scrollTo(0, 0)")
            docs = Path(__file__).resolve().parents[2] / "docs"
            docs.mkdir(exist_ok=True)
            (docs / "viewer.png").write_bytes(page.screenshot())

        page.click(".compare-links a")
        page.wait_for_load_state("load")
        assert page.locator(".side-episode").count() == 2
        assert problems == []
        page.close()
