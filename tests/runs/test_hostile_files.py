"""Hostile files (issue 22, item 1 and the fault suite's file rows): every bomb is generated at
test time (tests/hostile_bombs.py, a few KB to 1 MB on disk) and met where a user meets it, the
real CLI or server in a subprocess, with a bound on wall time and on the peak RSS of every
process of the command's tree (sampled with psutil). Before deskbench parsed untrusted files
under limits each of these ran past 300 s or several GB (the issue's table); now each ends in
seconds with a one-line verdict, and the run, ingest or server goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from pathlib import Path

import hostile_bombs as bombs
import pytest
from conftest import REPO, run_cli
from hostile_watch import RSS_MB, SECONDS, Server, bounded_cli

from deskbench.untrusted import FileLimits, LimitExceeded, ReaderCrashed, run_limited
from deskbench.untrusted.limits import limits_from_env

DEMO_DELIVERABLES = REPO / "src" / "deskbench" / "data" / "demo" / "deliverables"


# -- the worker and the limits ------------------------------------------------------------------


def test_the_worker_returns_results_and_reraises_the_parse_errors() -> None:
    assert run_limited(bombs.double, 21) == 42
    with pytest.raises(ValueError, match="not a workbook"):
        run_limited(bombs.refuse, "not a workbook")
    with pytest.raises(RuntimeError, match="_Picky: odd"):
        run_limited(bombs.refuse_oddly)


def test_the_worker_turns_memory_and_time_into_verdicts() -> None:
    started = time.monotonic()
    verdict = run_limited(bombs.hog_memory, limits=FileLimits(memory_mb=256))
    assert isinstance(verdict, LimitExceeded) and verdict.what == "memory", verdict
    assert verdict.message.startswith("the file exceeds the 256 MB memory limit (reached ")
    verdict = run_limited(bombs.spin, limits=FileLimits(seconds=1.5))
    assert isinstance(verdict, LimitExceeded) and verdict.what == "time", verdict
    assert 1.5 <= verdict.observed < 60  # stopped at the limit (the spin never ends by itself)
    assert time.monotonic() - started < 300  # generous: a loaded machine is slow, a hang is not
    with pytest.raises(ReaderCrashed, match="SIGSEGV"):
        run_limited(bombs.crash)


def test_the_time_limit_counts_from_the_last_progress() -> None:
    """A PDF OCR'd page by page reports each page: 12 steps of 0.5 s (6 s) pass a 5 s limit; a
    step that never ends does not. 5 s, not 1.5 s: a loaded machine may delay a step's report by
    a second, and the verdict must not depend on that."""
    assert run_limited(bombs.slow_steps, 12, 0.5, limits=FileLimits(seconds=5)) == 12
    verdict = run_limited(bombs.slow_steps, 1, 3600, limits=FileLimits(seconds=5))
    assert isinstance(verdict, LimitExceeded) and verdict.what == "time", verdict
    # stopped at the limit or a moment after it (how late depends on the load)
    said = r"the file exceeds the 5 s time limit \(stopped after \d+\.\d s without progress"
    assert re.match(said, verdict.message), verdict.message
    assert 5 <= verdict.observed < 60


def test_limits_come_from_one_place_and_a_bad_value_is_one_line() -> None:
    assert limits_from_env({}) == FileLimits()
    assert limits_from_env({"DESKBENCH_LIMIT_CELLS": "10"}).cells == 10
    from deskbench.errors import UserError

    with pytest.raises(UserError, match=r"^DESKBENCH_LIMIT_SECONDS='soon': .*unset it or give a valid number$"):
        limits_from_env({"DESKBENCH_LIMIT_SECONDS": "soon"})


def test_a_lowered_limit_applies_to_a_normal_file(tmp_path: Path) -> None:
    ref = bombs.xlsx_small_total(tmp_path / "ref.xlsx")
    assert run_cli("compare-sheets", str(ref), str(ref)).stdout.strip() == "PASS"
    proc = run_cli("compare-sheets", str(ref), str(ref), env={"DESKBENCH_LIMIT_CELLS": "3"})
    assert proc.returncode == 2, proc  # the reference is the user's own file
    assert proc.stderr.strip().splitlines() == [
        f"error: reference {ref} exceeds the 3-cell limit (holds 7 cells); "
        "check the reference file (or give --file-judge MODEL)"]


# -- spreadsheets: a formula over a whole sheet, a zip bomb of rows ------------------------------


def test_compare_sheets_whole_sheet_formula(tmp_path: Path) -> None:
    ref = bombs.xlsx_small_total(tmp_path / "ref.xlsx")
    bomb = bombs.xlsx_whole_sheet_sum(tmp_path / "out.xlsx")
    assert bomb.stat().st_size < 5_000
    run = bounded_cli("compare-sheets", str(ref), str(bomb))
    run.held()
    assert run.returncode == 1, run
    assert run.stdout.strip() == (
        f"FAIL at open: the prediction does not open: {bomb} exceeds the 10,000,000-cell formula-range "
        "limit (the range A3:XFD1048576 in Sheet1!A2 covers 17,179,836,416 cells)")


def test_compare_sheets_rows_bomb(tmp_path: Path) -> None:
    ref = bombs.xlsx_small_total(tmp_path / "ref.xlsx")
    bomb = bombs.xlsx_rows_bomb(tmp_path / "rows.xlsx")
    assert bomb.stat().st_size < 1_000_000
    run = bounded_cli("compare-sheets", str(ref), str(bomb))
    run.held()
    assert run.returncode == 1, run
    assert run.stdout.startswith(f"FAIL at open: the prediction does not open: {bomb} exceeds the "
                                 "1,000,000-cell limit (holds at least 1,0"), run.stdout
    assert run.stdout.strip().endswith(" cells)")


def test_compare_sheets_memory_limit_stops_a_parse(tmp_path: Path) -> None:
    """Under the cell limit but over a lowered memory limit: the worker's cap, not a count."""
    ref = bombs.xlsx_small_total(tmp_path / "ref.xlsx")
    rows = bombs.xlsx_rows_bomb(tmp_path / "rows.xlsx", 600_000)
    run = bounded_cli("compare-sheets", str(ref), str(rows), env={"DESKBENCH_LIMIT_MEMORY_MB": "200"})
    run.held()
    assert run.returncode == 1, run
    assert run.stdout.startswith(f"FAIL at open: the prediction does not open: {rows} exceeds the "
                                 "200 MB memory limit (reached "), run.stdout


def _analytics_run(root: Path, output: Path) -> tuple[Path, str]:
    """An analytics run of two file tasks: the first episode's output is `output`, the second's
    the right file (its own reference); (run dir, the first task's id)."""
    from deskbench.runs.store import Episode, RunStore
    from deskbench.tasks.outputs import OutputFileRecord
    from deskbench.tracks.analytics.generate.tasks import generate_analytics
    from deskbench.tracks.analytics.tasks import AnalyticsSubmission, read_tasks

    tasks_dir = root / "tasks"
    generate_analytics(tasks_dir, tasks=11, seed=7)
    files = [t for t in read_tasks(tasks_dir / "tasks.jsonl").items if t.reference_file is not None][:2]
    run = root / "run"
    store = RunStore(run)
    store.save_tasks(files)
    store.set_meta("tasks_file", str(tasks_dir / "tasks.jsonl"))
    for task, src in ((files[0], output), (files[1], tasks_dir / files[1].reference_file.path)):
        rel = Path("outputs") / "sys" / task.id.replace("/", "_") / "0"
        (run / rel).mkdir(parents=True)
        name = task.reference_file.output_name
        shutil.copyfile(src, run / rel / name)
        data = (run / rel / name).read_bytes()
        store.record(Episode(task_id=task.id, system="sys", status="ok", submission=AnalyticsSubmission(
            id=task.id, answer="done", files=[OutputFileRecord(name=name, size=len(data),
                                                               sha256=hashlib.sha256(data).hexdigest())],
            files_dir=rel.as_posix())))
    store.close()
    return run, files[0].id


def test_analytics_scoring_whole_sheet_formula(tmp_path: Path) -> None:
    """The issue's hang in scoring: the item fails with the verdict stored in its row, the other
    item is scored as before, and `score` ends."""
    bomb = bombs.xlsx_whole_sheet_sum(tmp_path / "bomb.xlsx")
    run, bad = _analytics_run(tmp_path, bomb)
    items = tmp_path / "items.jsonl"
    out = bounded_cli("score", str(run), "--items-out", str(items), "--json")
    out.held()
    assert out.returncode == 0, out.stderr
    rows = {r["task_id"]: r for r in map(json.loads, items.read_text().splitlines())}
    assert len(rows) == 2
    text = json.dumps(rows[bad])
    assert "exceeds the 10,000,000-cell formula-range limit (the range A3:XFD1048576" in text, text
    assert (rows[bad]["status"], rows[bad]["score"], rows[bad]["comparator"]["stage"]) == ("scored", 0.0, "open")
    good = next(r for k, r in rows.items() if k != bad)
    assert (good["status"], good["score"]) == ("scored", 1.0), good


# -- documents: a zip bomb of paragraphs, a long document on the grading page ---------------------


def _package(tmp_path: Path, name: str, output: str, bomb: Path) -> tuple[Path, Path, Path]:
    pkg = tmp_path / name
    shutil.copytree(DEMO_DELIVERABLES / name, pkg)
    out = tmp_path / "out"
    out.mkdir()
    shutil.copyfile(bomb, out / output)
    (tmp_path / "response.md").write_text("# Memo\nSee the attached file.\n")
    return pkg, tmp_path / "response.md", out


def _verify(pkg: Path, response: Path, out: Path, output: str) -> list[dict]:
    run = bounded_cli("verify", str(pkg), str(response), "--outputs", str(out), "--json")
    run.held()
    assert run.returncode == 0, run.stderr
    import yaml

    on_file = {v["id"] for v in yaml.safe_load((pkg / "task.yaml").read_text())["verifiers"]
               if v.get("file") == output}
    results = [r for r in json.loads(run.stdout)["results"] if r["id"] in on_file]
    # a file over a limit is a check that could not pass: failed, or unobservable (counted as failed)
    assert results and all(r["status"] in ("fail", "unobservable") for r in results), results
    return results


def test_verify_docx_paragraph_bomb(tmp_path: Path) -> None:
    bomb = bombs.docx_paragraphs(tmp_path / "bomb.docx", 3_000_000)
    assert bomb.stat().st_size < 500_000
    results = _verify(*_package(tmp_path, "dl-0005-fsp", "zbb_memo.docx", bomb), "zbb_memo.docx")
    assert all(r["evidence"].startswith("output file zbb_memo.docx exceeds the 100,000-paragraph limit "
                                        "(holds at least ") for r in results), results


def test_verify_xlsx_rows_bomb(tmp_path: Path) -> None:
    bomb = bombs.xlsx_rows_bomb(tmp_path / "bomb.xlsx")
    results = _verify(*_package(tmp_path, "dl-0002-rcp", "benchmark_table.xlsx", bomb), "benchmark_table.xlsx")
    assert all(r["evidence"].startswith("output file benchmark_table.xlsx exceeds the 1,000,000-cell limit "
                                        "(holds at least ") for r in results), results


def test_grading_page_with_a_40k_paragraph_docx(tmp_path: Path) -> None:
    from deskbench.runs.store import Episode, RunStore
    from deskbench.tasks.outputs import OutputFileRecord
    from deskbench.tracks.deliverables.tasks import DeliverableSubmission
    from tests.tracks.deliverables.test_web_grading import make_run
    from tests.web.test_web import Client

    run = tmp_path / "run"
    task, tokens = make_run(run)
    files_dir = Path("outputs") / "sys-b" / task.id / "0"
    (run / files_dir).mkdir(parents=True)
    memo = bombs.docx_paragraphs(run / files_dir / "memo.docx", 40_000, styled=True)
    assert memo.stat().st_size < 50_000
    data = memo.read_bytes()
    store = RunStore(run, create=False)
    store.record(Episode(task_id=task.id, system="sys-b", status="ok", submission=DeliverableSubmission(
        id=task.id, response="# Memo\nsee memo.docx", files_dir=files_dir.as_posix(),
        files=[OutputFileRecord(name="memo.docx", size=len(data), sha256=hashlib.sha256(data).hexdigest())])))
    store.close()
    server = Server("serve", "--out", str(run))
    try:
        client = Client(server.port)
        client.login(tokens["alice"])
        from urllib.parse import urlencode

        q = urlencode({"task": task.id, "system": "sys-b", "attempt": 0})
        for _ in range(2):  # every load, not only the first
            status, html, seconds = server.get(client, f"/grade?{q}")
            assert status == 200
            # the suite's bound for a hostile file, in CPU time of the server (wall time failed
            # on a loaded machine); the cut below is what keeps the page small
            assert server.cpu_seconds < SECONDS, f"the grading page used {server.cpu_seconds:.1f} s of CPU"
            assert "memo.docx" in html and "cut at 20000 characters" in html
    finally:
        server.stop()
    assert server.watch.peak < RSS_MB


# -- PDFs: a content-stream bomb at ingest, huge pages rendered ---------------------------------


def test_ingest_content_stream_bomb(tmp_path: Path) -> None:
    bomb = bombs.pdf_content_bomb(tmp_path / "bomb.pdf")
    plain = bombs.pdf_plain(tmp_path / "plain.pdf")
    assert bomb.stat().st_size < 1_200_000
    run = bounded_cli("ingest", str(bomb), str(plain), "--corpus", str(tmp_path / "corpus"), "--json")
    run.held()
    summary = json.loads(run.stdout)
    assert summary["files_new"] == 1 and summary["pages"] == 1, summary
    [failed] = summary["files_failed"]
    assert failed["file"] == str(bomb)
    assert failed["reason"].startswith("the PDF exceeds the 1,024 MB memory limit (reached "), failed


@pytest.fixture(scope="module")
def huge_pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("huge")
    pdfs = [bombs.pdf_media_box(root / "big.pdf", 14_400), bombs.pdf_media_box(root / "huge.pdf", 3_000_000),
            bombs.pdf_plain(root / "plain.pdf")]
    proc = run_cli("ingest", *map(str, pdfs), "--corpus", str(root / "corpus"))
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.parametrize(("doc", "size"), [("big.pdf", "22,000 x 22,000 px, 484"),
                                           ("huge.pdf", "4,583,333 x 4,583,333 px, 21,006,944")])
def test_page_with_a_huge_media_box(huge_pages: Path, doc: str, size: str) -> None:
    side = "14,400" if doc == "big.pdf" else "3,000,000"
    run = bounded_cli("page", "--corpus", str(huge_pages / "corpus"), doc, "1", "--dpi", "110",
                      "--output", str(huge_pages / "p.png"))
    run.held()
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"error: page 1 of {doc} exceeds the 200-megapixel page-image limit ({side} x {side} pt at 110 dpi "
        f"is {size} megapixels); render it at a lower dpi or with a pixel cap (--dpi, --max-pixels)"]
    ok = run_cli("page", "--corpus", str(huge_pages / "corpus"), "plain.pdf", "1", "--dpi", "110",
                 "--output", str(huge_pages / "p.png"))
    assert ok.returncode == 0 and (huge_pages / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("app", ["serve", "view"])
def test_web_page_image_with_a_huge_media_box(huge_pages: Path, app: str) -> None:
    """The human baseline app (serve) and the episode viewer (view) serve corpus pages the same way."""
    from tests.web.test_web import Client

    tasks = huge_pages / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "h/1", "question": "What is on the page?", "answer_variants": [["x"]],
                                 "evidence": [{"document": "big.pdf", "page": 1}]}) + "\n")
    out = huge_pages / f"run-{app}"
    assert run_cli("serve", "batches", "--out", str(out), "--tasks", str(tasks)).returncode == 0
    token = run_cli("serve", "add-user", "hal", "--out", str(out)).stdout.strip()
    corpus = str(huge_pages / "corpus")
    args = (["serve", "--corpus", corpus, "--tasks", str(tasks), "--out", str(out)] if app == "serve"
            else ["view", str(out), "--corpus", corpus])
    server = Server(*args)
    try:
        client = Client(server.port)
        client.login(token)
        which = "" if app == "serve" else "&corpus=0"
        for doc, size, want in [("big.pdf", "view", 413), ("huge.pdf", "view", 413), ("huge.pdf", "thumb", 413),
                                ("big.pdf", "thumb", 200), ("plain.pdf", "view", 200)]:
            status, body, seconds = server.get(client, f"/page-image?doc={doc}&page=1&size={size}{which}")
            assert status == want, (doc, size, status, body)
            assert server.cpu_seconds < SECONDS, (doc, size, server.cpu_seconds, seconds)
            if want == 413:
                assert f"page 1 of {doc} exceeds the 200-megapixel page-image limit" in body, body
        assert server.proc.poll() is None  # the server goes on
    finally:
        server.stop()
    assert server.watch.peak < RSS_MB, server.watch.peak


def test_an_agent_shown_a_huge_page_is_told_why_and_goes_on(huge_pages: Path) -> None:
    """The agents' page view: a page over the pixel limit becomes a line the model reads (the
    verdict), the other pages of the step are images as usual."""
    from deskbench.agents.base import AgentContext, AgentSettings, load_page_parts
    from deskbench.corpus import Corpus
    from deskbench.models.types import ImagePart, TextPart

    ctx = AgentContext(model=None, corpus=Corpus.open(huge_pages / "corpus"), settings=AgentSettings(dpi=110))
    parts = load_page_parts(ctx, [("big.pdf", 1), ("plain.pdf", 1)])
    assert [type(p) for p in parts] == [TextPart, TextPart, TextPart, ImagePart]
    told = parts[1]
    assert isinstance(told, TextPart) and told.text.startswith("[page image not shown: ") and "pixel" in told.text
