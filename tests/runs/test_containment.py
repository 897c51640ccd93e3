"""Containment where files are opened, and numeric route parameters (issue 33 items 3 and 4).

The issue's rows: `get_page` over MCP on a corpus whose document row points outside the corpus
folder rendered the page (the viewer refused the same document); the viewer's `/output` with a
stored `files_dir` of "." served run.sqlite (files were confined to the run folder, not to the
episode's); `/output?...&n=` with 5,000 digits answered 500. Each is driven here as the reader
sees it: the MCP session's get_page, the agents' load_page_parts, `deskbench page`, the viewer
and the human baseline app; a forged row is written into the store with sqlite3, as an attacker
with write access to the corpus or run folder would."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_operator_corpus
from fastapi.testclient import TestClient

from deskbench.agents.base import AgentContext, load_page_parts
from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.runs.runner import episode_dir
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.outputs import OutputFileRecord
from deskbench.tracks.analytics.tasks import AnalyticsSubmission
from deskbench.tracks.docqa.tasks import DocQATask
from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app

SECRET = b"%PDF-1.4 outside the corpus"


def _forge(corpus: Path, doc_id: str, stored_path: str) -> None:
    with sqlite3.connect(corpus / "pages.sqlite") as con:
        con.execute("UPDATE documents SET stored_path = ? WHERE doc_id = ?", (stored_path, doc_id))


@pytest.fixture
def forged(tmp_path: Path) -> dict[str, Path]:
    """The operator corpus with alpha.pdf's row pointing at a real PDF outside the corpus folder
    (`../elsewhere/alpha.pdf`) and beta.pdf's at a symlink inside docs/ that leads outside."""
    write_operator_corpus(tmp_path).close()
    corpus = tmp_path / "corpus"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for name in ("alpha.pdf", "beta.pdf"):
        shutil.copyfile(tmp_path / "pdfs" / name, outside / name)  # renders: the old code served it
    (corpus / "docs" / "link.pdf").symlink_to(outside / "beta.pdf")
    _forge(corpus, "alpha.pdf", "../elsewhere/alpha.pdf")
    _forge(corpus, "beta.pdf", "docs/link.pdf")
    return {"root": tmp_path, "corpus": corpus}


def test_corpus_refuses_a_document_stored_outside_it(forged: dict[str, Path]) -> None:
    """The one home: Corpus.page_image (and pdf_path) refuse both forged rows with one line
    naming the document and the corpus and saying to ingest again; the page text (read from
    pages.sqlite, no file) is still given."""
    c = Corpus.open(forged["corpus"])
    for doc in ("alpha.pdf", "beta.pdf"):
        with pytest.raises(UserError) as caught:
            c.page_image(doc, 1)
        line = str(caught.value)
        assert "\n" not in line and doc in line and str(forged["corpus"]) in line
        assert "outside the corpus" in line and "ingest" in line
        with pytest.raises(UserError):
            c.pdf_path(doc)
    assert c.page_text("alpha.pdf", 1).text


def test_mcp_get_page_refuses_a_document_outside_the_corpus(forged: dict[str, Path]) -> None:
    """The issue's row: the MCP session's get_page (what the server's tool calls) answers a
    tool error, not the rendered page; nothing is recorded as read."""
    from deskbench.tracks.docqa.mcp_session import DocqaSession, ToolError

    c = Corpus.open(forged["corpus"])
    task = DocQATask(id="q", question="?", answer_variants=[["x"]])
    session = DocqaSession(AgentContext(model=None, corpus=c), task)
    for doc in ("alpha.pdf", "beta.pdf"):
        with pytest.raises(ToolError, match="outside the corpus"):
            asyncio.run(session.get_page(doc, 1))
    assert session.tool_calls == 0


def test_agents_load_page_parts_refuses_it(forged: dict[str, Path]) -> None:
    """The built-in agents read pages through load_page_parts: refused the same way."""
    ctx = AgentContext(model=None, corpus=Corpus.open(forged["corpus"]))
    with pytest.raises(UserError, match="outside the corpus"):
        load_page_parts(ctx, [("alpha.pdf", 1)])
    with pytest.raises(UserError, match="outside the corpus"):
        load_page_parts(ctx, [("beta.pdf", 2)])


def test_deskbench_page_refuses_it_in_one_line(forged: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    proc = run_cli("page", "--corpus", str(forged["corpus"]), "alpha.pdf", "1", "--output", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "outside the corpus" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_a_cached_image_is_not_served_for_a_forged_row(tmp_path: Path) -> None:
    """A page rendered while the row was honest is not served once the row points outside: the
    check comes before the image cache."""
    c = write_operator_corpus(tmp_path)
    assert c.page_image("alpha.pdf", 1)[:4] == b"\x89PNG"
    c.close()
    _forge(tmp_path / "corpus", "alpha.pdf", "/etc/hostname")
    with pytest.raises(UserError, match="outside the corpus"):
        Corpus.open(tmp_path / "corpus").page_image("alpha.pdf", 1)


# -- the viewer ---------------------------------------------------------------------------------

def _login(client: TestClient, token: str) -> None:
    import re

    page = client.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf
    r = client.post("/login", data={"csrf": csrf.group(1), "token": token}, follow_redirects=False)
    assert r.status_code == 303


SYSTEM = "analyst:openai/gpt-4.1"


def _analytics_run(run: Path, files_dir: str | None = None) -> tuple[Path, bytes]:
    """A run with one analytics episode (task t/1, attempt 0) whose result/ holds total.csv;
    `files_dir` replaces the stored folder (a forged row). Returns (run dir, the file's bytes)."""
    store = RunStore(run)
    store.set_meta("track", "analytics")
    folder = episode_dir(run, SYSTEM, "t/1", 0) / "result"
    folder.mkdir(parents=True)
    data = b"total\n60\n"
    (folder / "total.csv").write_bytes(data)
    import hashlib

    rel = files_dir if files_dir is not None else folder.relative_to(run).as_posix()
    store.record(Episode(task_id="t/1", system=SYSTEM, status="ok", submission=AnalyticsSubmission(
        id="t/1", answer="60", files=[OutputFileRecord(name="run.sqlite", size=1, sha256="0" * 64),
                                      OutputFileRecord(name="total.csv", size=len(data),
                                                       sha256=hashlib.sha256(data).hexdigest())],
        files_dir=rel)))
    store.close()
    return run, data


def _viewer(run: Path, corpus: Path | None = None) -> TestClient:
    token = WebStore(run).add_user("ann")
    client = TestClient(create_viewer_app([run], corpus))
    _login(client, token)
    return client


def _output(client: TestClient, run: Path, n: str, attempt: str = "0") -> Any:
    return client.get("/output", params={"run": run.name, "system": SYSTEM, "task": "t/1", "attempt": attempt,
                                         "n": n})


def test_viewer_output_serves_only_the_episodes_own_folder(tmp_path: Path) -> None:
    """The issue's row: a stored files_dir of "." named run.sqlite as the episode's file 0 and
    the viewer served it. Now 404, while the honest run's own file is served."""
    honest, data = _analytics_run(tmp_path / "honest")
    client = _viewer(honest)
    r = _output(client, honest, "1")
    assert r.status_code == 200 and r.content == data
    assert _output(client, honest, "0").status_code == 404  # run.sqlite is not in the episode's folder

    forged, _ = _analytics_run(tmp_path / "forged", files_dir=".")
    client = _viewer(forged)
    r = _output(client, forged, "0")
    assert r.status_code == 404 and b"SQLite format" not in r.content
    assert _output(client, forged, "1").status_code == 404  # total.csv is not at the run's top either


def test_viewer_output_refuses_another_episodes_folder_and_a_symlink_out(tmp_path: Path) -> None:
    """files_dir naming another episode's folder (a forged episode scored on someone else's
    files), or a file in the episode's folder that is a symlink to run.sqlite: both 404."""
    run, _ = _analytics_run(tmp_path / "run")
    other = episode_dir(run, "someone:else", "t/1", 0) / "result"
    other.mkdir(parents=True)
    (other / "total.csv").write_text("total\n99\n")
    with sqlite3.connect(run / "run.sqlite") as con:
        (raw,) = con.execute("SELECT submission FROM episodes").fetchone()
        sub = json.loads(raw)
        sub["files_dir"] = other.relative_to(run).as_posix()
        con.execute("UPDATE episodes SET submission = ?", (json.dumps(sub),))
    client = _viewer(run)
    assert _output(client, run, "1").status_code == 404

    run2, _ = _analytics_run(tmp_path / "run2")
    folder = episode_dir(run2, SYSTEM, "t/1", 0) / "result"
    (folder / "run.sqlite").symlink_to(run2 / "run.sqlite")
    client = _viewer(run2)
    r = _output(client, run2, "0")
    assert r.status_code == 404 and b"SQLite format" not in r.content


def test_scoring_reads_only_the_episodes_own_folder(tmp_path: Path) -> None:
    """score's reader of analytics outputs: a files_dir of "." finds none of the run's files."""
    from deskbench.tracks.analytics.scoring.analytics import _output_paths

    run, _ = _analytics_run(tmp_path / "honest")
    ep = RunStore(run, create=False).episodes(SYSTEM)[0]
    assert [p.name for p in _output_paths(ep, run)] == ["total.csv"]
    forged, _ = _analytics_run(tmp_path / "forged", files_dir=".")
    ep = RunStore(forged, create=False).episodes(SYSTEM)[0]
    assert _output_paths(ep, forged) == []


@pytest.mark.parametrize("n", ["9" * 5000, "-1", "99999999999999999999", "²", "1e3", " 1", ""])
def test_viewer_output_n_is_validated(tmp_path: Path, n: str) -> None:
    """The issue's row (5,000 digits gave a 500): every malformed or out-of-range n is a 4xx
    with a message naming n, never a 500."""
    run, _ = _analytics_run(tmp_path / "run")
    client = TestClient(create_viewer_app([run]), raise_server_exceptions=False)
    _login(client, WebStore(run).add_user("bo"))
    r = _output(client, run, n)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:200])
    assert len(r.content) < 2000  # the 5,000 digits are not echoed back
    r = _output(client, run, "1", attempt="9" * 5000)
    assert 400 <= r.status_code < 500 and len(r.content) < 2000


def test_viewer_numeric_parameters_are_validated(tmp_path: Path, forged: dict[str, Path]) -> None:
    """/episode's attempt, /page-image's page and corpus key: 4xx (400 or 404) with a short
    body for huge, negative and non-ASCII numbers; never a 500. The forged corpus's documents
    are refused by the viewer too (the corpus's own check)."""
    run, _ = _analytics_run(tmp_path / "run")
    client = TestClient(create_viewer_app([run], forged["corpus"]), raise_server_exceptions=False)
    _login(client, WebStore(run).add_user("cy"))
    bad = ["9" * 5000, "-1", "99999999999999999999", "²"]
    for value in bad:
        r = client.get("/episode", params={"run": run.name, "system": SYSTEM, "task": "t/1", "attempt": value})
        assert 400 <= r.status_code < 500 and len(r.content) < 20_000, (value, r.status_code)
        r = client.get("/page-image", params={"doc": "alpha.pdf", "page": value, "corpus": "0"})
        assert 400 <= r.status_code < 500 and len(r.content) < 2000, (value, r.status_code)
        r = client.get("/page-image", params={"doc": "alpha.pdf", "page": "1", "corpus": value})
        assert 400 <= r.status_code < 500 and len(r.content) < 2000, (value, r.status_code)
    for doc in ("alpha.pdf", "beta.pdf"):
        r = client.get("/page-image", params={"doc": doc, "page": "1", "corpus": "0"})
        assert r.status_code == 404 and not r.content.startswith(b"\x89PNG")
    r = client.get("/", params={"page": "9" * 5000})
    assert r.status_code == 200  # the table's page: a bad value is ignored, as before


def test_human_app_numeric_parameters_are_validated(tmp_path: Path) -> None:
    """The human baseline app's /q/{n} and /page-image page: 400 for huge, negative, non-ASCII."""
    from deskbench.tracks.docqa.web.app import create_app

    write_operator_corpus(tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "question": "Which?", "answer_variants": [["x"]],
                                 "evidence": [{"document": "alpha.pdf", "page": 1}]}) + "\n")
    run = tmp_path / "run"
    app = create_app(tmp_path / "corpus", tasks, run)
    web = WebStore(run)
    token = web.add_user("dee", [web.batches()[0].name])
    client = TestClient(app, raise_server_exceptions=False)
    _login(client, token)
    assert client.get("/q/1").status_code == 200
    for value in ("9" * 5000, "-1", "0", "99999999999999999999", "²"):
        r = client.get(f"/q/{value}")
        assert 400 <= r.status_code < 500 and len(r.content) < 20_000, (value, r.status_code)
        r = client.get("/page-image", params={"doc": "alpha.pdf", "page": value})
        assert 400 <= r.status_code < 500 and len(r.content) < 2000, (value, r.status_code)
    assert client.get("/page-image", params={"doc": "alpha.pdf", "page": "1"}).status_code == 200
