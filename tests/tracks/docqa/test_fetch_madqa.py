"""`deskbench fetch madqa`, offline: a snapshot written here in the dataset's layout, a local PDF
server that fails in the ways real servers do, a download killed with SIGKILL and resumed, and a
strict local double of the Hugging Face hub for the token and gated-terms messages.

Facts the doubles follow (no test reads the official repository):
- The dataset (github OxRML/MADQA examples/load_dataset.py, examples/download_pdfs.py,
  baselines/bm25-mllm-agent/utils.py, eval/evaluate.py at 978fa76): splits train/dev/test with
  `id, question, answer_variants, evidence` ({document, page}), `document_category, domain`; a
  `documents` configuration whose `links` split maps `document` (the PDF's file name) to `url`.
  The data files are named by the card's `configs:` (parquet here, as the hub stores datasets).
- The hub's refusals of a gated repository (401 without a token, 403 for a user who has not been
  granted access, 401 for a token it does not know): tests/hf_hub_double.py, which names its sources.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli, write_text_pdf
from hf_hub_double import GRANTED, PENDING, SHA, FakeHub, hub_env
from http_double import HandlerDouble, QuietHandler
from typer.testing import CliRunner

from deskbench.cli.app import app
from deskbench.fetch import download as dl
from deskbench.tracks.docqa.fetch import FetchOptions, fetch_madqa

REPO = "OxRML/MADQA"
CARD = """---
license: cc-by-nc-4.0
extra_gated_prompt: You need to agree to share your contact information to access this dataset
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
  - split: dev
    path: data/dev-*
  - split: test
    path: data/test-*
- config_name: documents
  data_files:
  - split: links
    path: documents/links-*
---
# MADQA
"""
PAGES = {  # document -> its pages' text (the words the corpus is searched for)
    "ok.pdf": ["Harbour authority annual report", "Tariff schedule for moorings"],
    "flaky.pdf": ["Mountain railway winter rates"],
    "cut.pdf": ["Glacier observatory budget"],
    "norange.pdf": ["Lighthouse keepers roster"],
    "slow.pdf": ["Ferry timetable summer"],
    "gone.pdf": ["Vanished ledger"],
    "page.pdf": ["Served as HTML"],
    "down.pdf": ["Server always down"],
}


def _row(split: str, i: int, doc: str, page: int = 1) -> dict[str, Any]:
    return {"id": f"{split}-{i:04d}", "question": f"What does {doc} say on page {page}?",
            "answer_variants": [[f"answer {i}"], [f"alt {i}"]], "evidence": [{"document": doc, "page": page}],
            "document_category": "Report", "domain": "Transport"}


def write_snapshot(root: Path, urls: dict[str, str], docs: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The dataset's layout as the hub serves it: README.md with `configs:`, parquet shards."""
    tasks = {
        "train": [_row("train", i, d) for i, d in enumerate(docs)],
        "dev": [_row("dev", i, d, p) for i, (d, p) in enumerate([(docs[0], 2), *((d, 1) for d in docs[1:3])])],
        "test": [_row("test", 0, docs[-1])],
    }
    (root / "data").mkdir(parents=True)
    (root / "documents").mkdir()
    for split, rows in tasks.items():
        pq.write_table(pa.Table.from_pylist(rows), root / "data" / f"{split}-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist([{"document": d, "url": u} for d, u in urls.items()]),
                   root / "documents" / "links-00000-of-00001.parquet")
    (root / "README.md").write_text(CARD, encoding="utf-8")
    return tasks


@pytest.fixture(scope="module")
def pdf_bytes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("pdfs")
    return {name: write_text_pdf(folder / name, pages).read_bytes() for name, pages in PAGES.items()}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the PDF server ------------------------------------------------------------------------------


class PdfServer(HandlerDouble):
    """PDFs on 127.0.0.1. Each name has a behaviour; the n-th request for a name is counted:
    ok            200, or 206 for `Range: bytes=N-` (If-Range on the ETag honoured)
    404           Not Found, always
    500-once      500 first, then ok
    500-always    500, always
    429-once      429 with Retry-After: 7 first, then ok
    truncate-once first: 200 with the whole Content-Length, half the body, connection closed
    norange-once  as truncate-once, and it never honours Range (200 with the whole file)
    slow-once     first: no answer until the server stops (the client's read timeout ends it)
    html          200 with an HTML page
    hang-half     first: half the body, then nothing until the server stops; then ok
    Every request is logged: (name, Range, If-Range, Authorization, status)."""

    def __init__(self, files: dict[str, bytes], behaviours: dict[str, str]) -> None:
        self.files = files
        self.behaviours = behaviours
        self.log: list[tuple[str, str | None, str | None, str | None, int]] = []
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer._get(self)

        super().__init__(Handler)

    def requests(self, name: str) -> list[tuple[str, str | None, str | None, str | None, int]]:
        return [r for r in self.log if r[0] == name]

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str],
              length: int | None = None) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body) if length is None else length))
        h.end_headers()
        h.wfile.write(body)

    def _get(self, h: BaseHTTPRequestHandler) -> None:
        name = unquote(urlsplit(h.path).path.lstrip("/"))
        with self.lock:
            self.hits[name] += 1
            n = self.hits[name]
        how = self.behaviours.get(name, "ok")
        rng, if_range = h.headers.get("Range"), h.headers.get("If-Range")

        def log(status: int) -> None:
            with self.lock:
                self.log.append((name, rng, if_range, h.headers.get("Authorization"), status))

        data = self.files.get(name)
        etag = f'"{hashlib.sha1(data or b"").hexdigest()}"'
        pdf = {"Content-Type": "application/pdf", "ETag": etag, "Accept-Ranges": "bytes"}
        if data is None or how == "404":
            log(404)
            return self._send(h, 404, b"Not Found", {"Content-Type": "text/plain"})
        if how == "429-once" and n == 1:
            log(429)
            return self._send(h, 429, b"Too Many Requests", {"Content-Type": "text/plain", "Retry-After": "7"})
        if how == "500-always" or (how == "500-once" and n == 1):
            log(500)
            return self._send(h, 500, b"Internal Server Error", {"Content-Type": "text/plain"})
        if how == "html":
            log(200)
            return self._send(h, 200, b"<!DOCTYPE html><html><body>Sign in</body></html>", {"Content-Type": "text/html"})
        if how == "slow-once" and n == 1:
            log(0)
            self.release.wait()
            h.close_connection = True
            return None
        if how in ("truncate-once", "norange-once", "hang-half") and n == 1:
            log(200)
            self._send(h, 200, data[: len(data) // 2], pdf, length=len(data))
            h.wfile.flush()
            if how == "hang-half":
                self.release.wait()
            h.close_connection = True
            return None
        if rng and how != "norange-once" and (if_range is None or if_range == etag):
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(data):
                log(416)
                return self._send(h, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
            log(206)
            return self._send(h, 206, data[start:], {**pdf, "Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
        log(200)
        return self._send(h, 200, data, pdf)


def _settings(sleeps: list[float], **kw: Any) -> dl.Settings:
    return dl.Settings(workers=kw.pop("workers", 3), attempts=3, backoff=1.0, timeout=kw.pop("timeout", 5.0),
                       sleep=sleeps.append, **kw)


def _manifest(out: Path) -> dict[str, dict[str, Any]]:
    return json.loads((out / "pdfs" / "manifest.json").read_text())["files"]


# -- faults, retries, the report -----------------------------------------------------------------


def test_a_fetch_through_every_fault_keeps_what_it_got_and_names_what_it_did_not(
        tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    behaviours = {"gone.pdf": "404", "flaky.pdf": "500-once", "cut.pdf": "truncate-once",
                  "norange.pdf": "norange-once", "slow.pdf": "slow-once", "page.pdf": "html",
                  "down.pdf": "500-always"}
    page_text = tmp_path / "textract.jsonl"  # the official Textract script's shape, one page a line
    page_text.write_text("".join(json.dumps({"file": d, "page_number": 1, "total_pages": 1, "service": "textract",
                                             "text": f"zanzibarite {d}"}) + "\n" for d in ("ok.pdf", "gone.pdf")))
    sleeps: list[float] = []
    with PdfServer(pdf_bytes, behaviours) as server:
        snap = tmp_path / "snap"
        tasks = write_snapshot(snap, {d: f"{server.url}/{d}" for d in PAGES}, list(PAGES))
        out = tmp_path / "madqa"
        # the slow server never answers its first request: the read timeout ends it (5 s: the other
        # requests, answered at once, keep a wide margin on a loaded machine)
        summary = fetch_madqa(FetchOptions(out=out, source=snap, page_text=page_text,
                                           download=_settings(sleeps, timeout=5.0)))

    good = ["cut.pdf", "flaky.pdf", "norange.pdf", "ok.pdf", "slow.pdf"]
    assert summary.downloads == {"downloaded": 5, "failed": 3}
    assert {f.document: f.reason for f in summary.failed} == {
        "down.pdf": "HTTP 500 Internal Server Error (gave up after 3 attempts)",
        "gone.pdf": "HTTP 404 Not Found",
        "page.pdf": "not a PDF: it starts with '<!DOCTYPE html><html><bo'",
    }
    # no retry on 404 or on a body that is no PDF; 5xx retried with exponential back-off
    assert [r[4] for r in server.requests("gone.pdf")] == [404]
    assert [r[4] for r in server.requests("page.pdf")] == [200]
    assert [r[4] for r in server.requests("down.pdf")] == [500, 500, 500]
    assert sorted(sleeps) == [1.0, 1.0, 1.0, 1.0, 1.0, 2.0]  # down: 1 then 2; flaky, cut, norange, slow: 1
    assert [r[4] for r in server.requests("flaky.pdf")] == [500, 200]
    # a truncated body continues where it stopped; a server that ignores Range gives the whole file again
    half = len(pdf_bytes["cut.pdf"]) // 2
    assert [(r[1], r[4]) for r in server.requests("cut.pdf")] == [(None, 200), (f"bytes={half}-", 206)]
    assert server.requests("cut.pdf")[1][2] == f'"{hashlib.sha1(pdf_bytes["cut.pdf"]).hexdigest()}"'  # If-Range
    half = len(pdf_bytes["norange.pdf"]) // 2
    assert [(r[1], r[4]) for r in server.requests("norange.pdf")] == [(None, 200), (f"bytes={half}-", 200)]
    assert [r[4] for r in server.requests("slow.pdf")] == [0, 200]
    assert all(r[3] is None for r in server.log)  # no credentials go to the PDFs' host

    # what arrived is whole, checksummed, and the only thing in the folder
    manifest = _manifest(out)
    assert sorted(manifest) == good
    for name in good:
        assert (out / "pdfs" / name).read_bytes() == pdf_bytes[name]
        assert manifest[name] == {"url": f"{server.url}/{name}", "size": len(pdf_bytes[name]),
                                  "sha256": sha(pdf_bytes[name])}
    assert sorted(p.name for p in (out / "pdfs").iterdir()) == sorted([*good, "manifest.json"])
    failed = [json.loads(line) for line in (out / "failed_downloads.jsonl").read_text().splitlines()]
    assert [(f["document"], f["url"]) for f in failed] == [(d, f"{server.url}/{d}") for d in ("down.pdf", "gone.pdf", "page.pdf")]

    # the tasks: deskbench's docqa format, the official rows and ids as they are
    from deskbench.tracks.docqa.tasks import read_tasks

    for split, rows in tasks.items():
        assert [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()] == rows
        assert [t.id for t in read_tasks(out / f"{split}.jsonl").items] == [r["id"] for r in rows]
    # the corpus: the PDFs that arrived, the official OCR text for the pages it holds
    from deskbench.corpus import Corpus

    corpus = Corpus.open(out / "corpus")
    assert sorted(d.doc_id for d in corpus.documents()) == good
    assert summary.page_text is not None and summary.page_text.pages == 1 and summary.page_text_skipped == 1
    assert [(h.document, h.page) for h in corpus.search("zanzibarite")] == [("ok.pdf", 1)]
    assert [(h.document, h.page) for h in corpus.search("observatory")] == [("cut.pdf", 1)]
    assert json.loads((out / "fetch.json").read_text())["failed"][0]["document"] == "down.pdf"


def test_the_command_exits_1_and_lists_the_failed_downloads_keeping_the_rest(
        tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    with PdfServer(pdf_bytes, {"gone.pdf": "404"}) as server:
        snap = tmp_path / "snap"
        write_snapshot(snap, {d: f"{server.url}/{d}" for d in ("ok.pdf", "gone.pdf")}, ["ok.pdf", "gone.pdf"])
        out = tmp_path / "m"
        result = CliRunner().invoke(app, ["fetch", "madqa", "--from", str(snap), "--out", str(out), "-q"])
    assert result.exit_code == 1, result.output
    assert f"failed gone.pdf ({server.url}/gone.pdf): HTTP 404 Not Found" in result.output
    assert "1 of 2 PDFs failed (listed in" in result.output and "failed_downloads.jsonl" in result.output
    assert "Traceback" not in result.output
    assert (out / "pdfs" / "ok.pdf").read_bytes() == pdf_bytes["ok.pdf"]
    assert (out / "corpus" / "pages.sqlite").exists()


def test_a_second_run_verifies_what_is_there_and_redownloads_what_is_damaged(
        tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    docs = ["ok.pdf", "flaky.pdf", "cut.pdf"]
    with PdfServer(pdf_bytes, {}) as server:
        snap = tmp_path / "snap"
        write_snapshot(snap, {d: f"{server.url}/{d}" for d in docs}, docs)
        out = tmp_path / "m"
        first = fetch_madqa(FetchOptions(out=out, source=snap, download=_settings([])))
        assert first.downloads == {"downloaded": 3} and first.ingest is not None and first.ingest.files_new == 3
        requests = len(server.log)

        again = fetch_madqa(FetchOptions(out=out, source=snap, download=_settings([])))
        assert again.downloads == {"verified": 3} and len(server.log) == requests  # nothing fetched again
        assert again.ingest is not None and again.ingest.files_unchanged == 3 and again.ingest.files_new == 0

        pdfs = out / "pdfs"
        flipped = bytearray(pdf_bytes["ok.pdf"])
        flipped[len(flipped) // 2] ^= 0xFF  # same size, other bytes: only the checksum tells
        (pdfs / "ok.pdf").write_bytes(bytes(flipped))
        (pdfs / "cut.pdf").write_bytes(pdf_bytes["cut.pdf"][:100])  # truncated
        third = fetch_madqa(FetchOptions(out=out, source=snap, download=_settings([])))
    assert third.downloads == {"verified": 1, "redownloaded": 2}
    assert sorted(r[0] for r in server.log[requests:]) == ["cut.pdf", "ok.pdf"]
    for d in docs:
        assert (pdfs / d).read_bytes() == pdf_bytes[d] and _manifest(out)[d]["sha256"] == sha(pdf_bytes[d])


def test_a_pdf_put_there_by_hand_is_kept_when_whole_and_replaced_when_not(
        tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    with PdfServer(pdf_bytes, {}) as server:
        snap = tmp_path / "snap"
        write_snapshot(snap, {d: f"{server.url}/{d}" for d in ("ok.pdf", "cut.pdf")}, ["ok.pdf", "cut.pdf"])
        out = tmp_path / "m"
        (out / "pdfs").mkdir(parents=True)
        (out / "pdfs" / "ok.pdf").write_bytes(pdf_bytes["ok.pdf"])  # e.g. from the official download_pdfs.py
        (out / "pdfs" / "cut.pdf").write_bytes(pdf_bytes["cut.pdf"][:-40])  # lost its end
        summary = fetch_madqa(FetchOptions(out=out, source=snap, download=_settings([])))
    assert summary.downloads == {"redownloaded": 1, "adopted": 1}
    assert [r[0] for r in server.log] == ["cut.pdf"]
    assert _manifest(out)["ok.pdf"]["sha256"] == sha(pdf_bytes["ok.pdf"])
    assert (out / "pdfs" / "cut.pdf").read_bytes() == pdf_bytes["cut.pdf"]


def test_split_and_limit_fetch_a_trial_of_the_cited_pdfs_only(tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    docs = list(PAGES)[:4]
    with PdfServer(pdf_bytes, {}) as server:
        snap = tmp_path / "snap"
        tasks = write_snapshot(snap, {d: f"{server.url}/{d}" for d in docs}, docs)
        out = tmp_path / "m"
        result = CliRunner().invoke(app, ["fetch", "madqa", "--from", str(snap), "--out", str(out), "--split", "dev",
                                          "--limit", "2", "--json", "-q"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["task_counts"] == {"dev": 2} and summary["trial"] is True
    assert not (out / "train.jsonl").exists() and not (out / "test.jsonl").exists()
    cited = sorted({e["document"] for r in tasks["dev"][:2] for e in r["evidence"]})
    assert sorted(r[0] for r in server.log) == cited == sorted(_manifest(out))


def test_a_snapshot_in_jsonl_with_the_card_s_other_data_files_shapes(tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    """data_files as a mapping split -> patterns and as a list of patterns; rows in JSON Lines."""
    snap = tmp_path / "snap"
    (snap / "qa").mkdir(parents=True)
    with PdfServer(pdf_bytes, {}) as server:
        rows = [_row("dev", 0, "ok.pdf")]
        (snap / "qa" / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (snap / "links.jsonl").write_text(json.dumps({"document": "ok.pdf", "url": f"{server.url}/ok.pdf"}) + "\n")
        (snap / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n    dev: qa/dev.jsonl\n"
                                        "- config_name: documents\n  data_files:\n  - split: links\n"
                                        "    path: [links.jsonl]\n---\n")
        summary = fetch_madqa(FetchOptions(out=tmp_path / "m", source=snap, splits=("dev",), download=_settings([])))
    assert summary.task_counts == {"dev": 1} and summary.downloads == {"downloaded": 1}


@pytest.mark.parametrize(("card", "expected"), [
    (None, "has no README.md, so it is not a dataset snapshot; give the folder `hf download REPO --repo-type dataset --local-dir DIR` made"),
    ("# no header\n", "has no YAML header"),
    ("---\nlicense: x\n---\n", "its YAML header has no `configs:` naming the data files"),
    (CARD, "no file matches ['data/dev-*'] (configuration 'default', split 'dev'); the snapshot is incomplete"),
])
def test_a_folder_that_is_no_snapshot_is_one_line(tmp_path: Path, card: str | None, expected: str) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    if card is not None:
        (snap / "README.md").write_text(card)
    done = run_cli("fetch", "madqa", "--from", str(snap), "--out", str(tmp_path / "m"), "--split", "dev", "-q")
    assert done.returncode == 2 and expected in done.stderr, done
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_retry_after_lengthens_the_back_off_and_a_name_that_is_no_plain_file_is_refused(
        tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    sleeps: list[float] = []
    with PdfServer(pdf_bytes, {"ok.pdf": "429-once"}) as server:
        items = [dl.Item("ok.pdf", f"{server.url}/ok.pdf"), dl.Item("../ok.pdf", f"{server.url}/ok.pdf"),
                 dl.Item(".hidden.pdf", f"{server.url}/ok.pdf")]
        result = dl.download(items, tmp_path / "pdfs", _settings(sleeps))
    assert result.outcomes == {"ok.pdf": "downloaded", "../ok.pdf": "failed", ".hidden.pdf": "failed"}
    assert sleeps == [7.0]  # the server asked for 7 s; the back-off alone would wait 1 s
    assert [r[4] for r in server.log] == [429, 200]  # the refused names were never requested
    assert [f.reason for f in result.failures] == ["'../ok.pdf' is not a plain file name; refused",
                                                   "'.hidden.pdf' is not a plain file name; refused"]
    assert not (tmp_path / "ok.pdf").exists()


# -- kill -9 in the middle of a download, then resume -------------------------------------------


def test_a_download_killed_with_sigkill_resumes_from_its_part_file(tmp_path: Path, pdf_bytes: dict[str, bytes]) -> None:
    docs = ["ok.pdf", "slow.pdf"]
    data = pdf_bytes["slow.pdf"]
    half = len(data) // 2
    with PdfServer(pdf_bytes, {"slow.pdf": "hang-half"}) as server:
        snap = tmp_path / "snap"
        write_snapshot(snap, {d: f"{server.url}/{d}" for d in docs}, docs)
        out = tmp_path / "m"
        part = out / "pdfs" / "slow.pdf.part"
        proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", "fetch", "madqa", "--from", str(snap),
                                 "--out", str(out), "--workers", "2", "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # wait for the first half to be on disk (the server sends no more until it stops) and for
        # ok.pdf to be whole (in the manifest, then renamed into place; downloaded beside slow.pdf,
        # it may finish after that half on a loaded machine)
        done = out / "pdfs" / "ok.pdf"
        try:
            deadline = time.monotonic() + 120
            while not (done.exists() and part.exists() and part.stat().st_size == half) and time.monotonic() < deadline:
                assert proc.poll() is None, "the fetch ended before it was killed"
                time.sleep(0.05)
            assert done.exists() and part.exists() and part.stat().st_size == half
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert not (out / "pdfs" / "slow.pdf").exists() and part.stat().st_size == half
        assert (out / "pdfs" / "slow.pdf.part.json").exists()

        result = CliRunner().invoke(app, ["fetch", "madqa", "--from", str(snap), "--out", str(out), "--json", "-q"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["downloads"] == {"resumed": 1, "verified": 1}
    etag = f'"{hashlib.sha1(data).hexdigest()}"'
    assert server.requests("slow.pdf")[-1][1:3] == (f"bytes={half}-", etag)
    assert server.requests("slow.pdf")[-1][4] == 206
    assert len(server.requests("ok.pdf")) == 1  # verified from the manifest, not fetched again
    assert (out / "pdfs" / "slow.pdf").read_bytes() == data
    assert _manifest(out)["slow.pdf"] == {"url": f"{server.url}/slow.pdf", "size": len(data), "sha256": sha(data)}
    assert not part.exists() and not (out / "pdfs" / "slow.pdf.part.json").exists()
    assert summary["ingest"]["files_ok"] == 2


# -- the hub: the strict local double of tests/hf_hub_double.py, serving this gated dataset ------

REVOKED = "hf_revoked_token"  # a token the hub does not know


def _fetch(out: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskbench.cli", "fetch", "madqa", "--out", str(out), "-q", *args],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def hub_and_pdfs(tmp_path: Path, pdf_bytes: dict[str, bytes]) -> Iterator[tuple[FakeHub, PdfServer]]:
    with PdfServer(pdf_bytes, {}) as pdfs:
        write_snapshot(tmp_path / "repo", {d: f"{pdfs.url}/{d}" for d in ("ok.pdf", "cut.pdf")}, ["ok.pdf", "cut.pdf"])
        with FakeHub(tmp_path / "repo", REPO, gated=True) as hub:
            yield hub, pdfs


@pytest.mark.parametrize(("token", "expected"), [
    (None, "error: OxRML/MADQA is gated and no Hugging Face token was found: accept its terms at {hub}/datasets/"
           "OxRML/MADQA, then `hf auth login` (or `huggingface-cli login` with huggingface_hub before 1.0), or set "
           "HF_TOKEN; or give a snapshot you downloaded with --from DIR"),
    (PENDING, "error: OxRML/MADQA is gated and the token from HF_TOKEN has not been granted access: accept its terms "
              "at {hub}/datasets/OxRML/MADQA (logged in as the token's user), then run this again"),
    (REVOKED, "error: the Hugging Face hub refused the token from HF_TOKEN as invalid; make a new one at "
              "{hub}/settings/tokens, then `hf auth login`"),
])
def test_no_token_or_terms_not_accepted_is_one_line_saying_what_to_do(
        tmp_path: Path, hub_and_pdfs: tuple[FakeHub, PdfServer], token: str | None, expected: str) -> None:
    hub, pdfs = hub_and_pdfs
    out = tmp_path / "m"
    done = _fetch(out, hub_env(tmp_path, hub, token))
    assert done.returncode == 2, done
    assert done.stderr.strip().startswith(expected.format(hub=hub.url)), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    refusals = [r for r in hub.log if r[3] in (401, 403)]
    assert refusals and refusals[0][2] == (None if token is None else f"Bearer {token}")
    assert not pdfs.log and not (out / "pdfs").exists()  # nothing else was downloaded


def test_with_the_login_cache_s_token_the_hub_snapshot_becomes_tasks_pdfs_and_a_corpus(
        tmp_path: Path, hub_and_pdfs: tuple[FakeHub, PdfServer], pdf_bytes: dict[str, bytes]) -> None:
    hub, pdfs = hub_and_pdfs
    env = hub_env(tmp_path, hub, None)
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text(GRANTED)  # where `hf auth login` stores it
    out = tmp_path / "m"
    done = _fetch(out, env, "--json")
    assert done.returncode == 0, done
    summary = json.loads(done.stdout)
    assert summary["revision"] == SHA and summary["source"] == f"{hub.url}/datasets/{REPO}"
    assert summary["task_counts"] == {"train": 2, "dev": 2, "test": 1}
    assert summary["downloads"] == {"downloaded": 2}
    assert all(r[2] == f"Bearer {GRANTED}" for r in hub.log), hub.log
    assert all(r[3] is None for r in pdfs.log)  # the hub token never goes to the PDFs' host
    got = {p.relative_to(out / "snapshot").as_posix() for p in (out / "snapshot").rglob("*")
           if p.is_file() and ".cache" not in p.parts}
    assert got == {"README.md", "data/train-00000-of-00001.parquet", "data/dev-00000-of-00001.parquet",
                   "data/test-00000-of-00001.parquet", "documents/links-00000-of-00001.parquet"}
    for d in ("ok.pdf", "cut.pdf"):
        assert (out / "pdfs" / d).read_bytes() == pdf_bytes[d]

    gets = [r for r in hub.log if r[0] == "GET" and "/resolve/" in r[1]]
    assert len(gets) == len(got)  # each file once
    again = _fetch(out, env, "--json")  # idempotent: nothing new from the hub's files or the PDFs
    assert again.returncode == 0, again
    assert json.loads(again.stdout)["downloads"] == {"verified": 2}
    assert [r for r in hub.log if r[0] == "GET" and "/resolve/" in r[1]] == gets
