"""The episode viewer (deskbench view) over HTTP: the login and CSRF rules, the episodes table's
filters and sorting, an episode's page (question, gold, answer, score, the transcript with the
pages each search returned, marked), escaping of hostile model output, 404 pages, two runs, the
compare page; and for each track, an agent run against the scripted fake OpenAI server whose exact
question and exact reply are found in the episode's HTML."""

from __future__ import annotations

import html
import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_operator_corpus
from fake_openai import FakeOpenAI
from fastapi.testclient import TestClient

from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app

SYSTEM = "bm25-agent:openai/gpt-4.1"
HOSTILE = "<script>alert(1)</script>"
TASKS = [
    {"id": "v/1", "question": "Which vehicle rental rates are given for the winter season (quetzal-7)?",
     "answer_variants": [["Mountain car"]],
     "evidence": [{"document": "alpha.pdf", "page": 1}, {"document": "beta.pdf", "page": 1}]},
    {"id": "v/2", "question": "Which helicopter model is listed besides the Bell 407? <img src=x onerror=alert(2)>",
     "answer_variants": [["Bell 412"]], "evidence": [{"document": "beta.pdf", "page": 2}]},
]
SEARCHES = {"v/1": "mountain", "v/2": "helicopter"}
ANSWERS = {  # v/1 right (cites one of its two gold pages); v/2 wrong, cites another document: retrieval
    "v/1": {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]},
    "v/2": {"answer": [f"Bell 999 {HOSTILE}"], "citations": [{"file": "alpha.pdf", "page": 2}]},
}


def _text(content: Any) -> str:
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


def scripted(body: dict[str, Any], n: int) -> dict[str, Any]:
    """Search once, then answer (the arguments are compact JSON, sent as a string)."""
    asked = _text(next(m for m in body["messages"] if m["role"] == "user")["content"])
    task = next(t for t in TASKS if t["question"] in asked)
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"kind": "tool", "name": "search_documents", "arguments": json.dumps({"query": SEARCHES[task["id"]]})}
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(ANSWERS[task["id"]])}


def _run_docqa(root: Path, out: Path, fake: FakeOpenAI, view: str) -> None:
    proc = run_cli("run", "--tasks", str(root / "tasks.jsonl"), "--corpus", str(root / "corpus"), "--out", str(out),
                   "--agent", "bm25-agent", "--model", "openai/gpt-4.1", "--view", view, "--concurrency", "1", "--quiet",
                   "--preset", "paper",  # the Prompt 5 loop (provide_answer) the fake's replies are for
                   env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url})
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run A: bm25-agent (image view) and the lexical baseline; run B: bm25-agent, text view."""
    root = tmp_path_factory.mktemp("viewer")
    write_operator_corpus(root)
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    with FakeOpenAI(script=scripted) as fake:
        _run_docqa(root, root / "runA", fake, "image")
        sent_a = list(fake.requests)
        _run_docqa(root, root / "runB", fake, "text")
    proc = run_cli("run", "--tasks", str(root / "tasks.jsonl"), "--corpus", str(root / "corpus"),
                   "--out", str(root / "runA"), "--agent", "lexical", "--quiet")
    assert proc.returncode == 0, proc.stderr
    token = WebStore(root / "runA").add_user("ann")
    return {"root": root, "token": token, "sent": sent_a}


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


def login(client: TestClient, token: str) -> str:
    page = client.get("/login").text
    r = client.post("/login", data={"csrf": _csrf(page), "token": token}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    return _csrf(client.get("/").text)


@pytest.fixture(scope="module")
def client(runs: dict[str, Any]) -> TestClient:
    root = runs["root"]
    c = TestClient(create_viewer_app([root / "runA", root / "runB"], root / "corpus"))
    login(c, runs["token"])
    return c


ROW = re.compile(r'<tr class="outcome-\w+" data-task="([^"]+)" data-system="([^"]+)">\s*<td>([^<]+)</td>')
THUMB = re.compile(r'<figure class="pagethumb ([a-z ]*)" data-doc="([^"]+)" data-page="(\d+)"')


def _rows(page: str) -> list[tuple[str, str, str]]:
    """(run, system, task) of each row of the episodes table, in order."""
    return [(run, html.unescape(system), html.unescape(task)) for task, system, run in ROW.findall(page)]


def episode(client: TestClient, run: str, task: str, system: str = SYSTEM) -> str:
    r = client.get("/episode", params={"run": run, "system": system, "task": task, "attempt": 0})
    assert r.status_code == 200, r.text[:300]
    return r.text


def test_login_is_required_and_logout_needs_the_csrf_token(runs: dict[str, Any]) -> None:
    root = runs["root"]
    c = TestClient(create_viewer_app([root / "runA"], root / "corpus"))
    r = c.get("/", headers={"Accept": "text/html"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login"
    for path in ("/episode?run=runA&system=lexical&task=v/1", "/compare?task=v/1",
                 "/page-image?corpus=0&doc=alpha.pdf&page=1", "/blob?run=runA&sha=" + "0" * 64):
        assert c.get(path).status_code == 401, path
    page = c.get("/login").text
    assert c.post("/login", data={"csrf": _csrf(page), "token": "wrong"}).status_code == 401
    csrf = login(c, runs["token"])
    assert "Content-Security-Policy" in c.get("/").headers
    assert c.post("/logout", data={}, follow_redirects=False).status_code == 403
    assert c.post("/logout", data={"csrf": "forged"}, follow_redirects=False).status_code == 403
    assert c.get("/", follow_redirects=False).status_code == 200  # still logged in
    r = c.post("/logout", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login"
    assert c.get("/", headers={"Accept": "text/html"}, follow_redirects=False).status_code == 303


def test_the_table_lists_every_episode_of_both_runs(client: TestClient) -> None:
    page = client.get("/").text
    rows = _rows(page)
    assert sorted(rows) == sorted([(run, system, t["id"]) for run, system in
                                   (("runA", SYSTEM), ("runA", "lexical"), ("runB", SYSTEM)) for t in TASKS])
    row = re.search(r'data-task="v/2" data-system="bm25-agent:openai/gpt-4.1">(.*?)</tr>', page, re.S)
    assert row is not None
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]
    # run, system, task, attempt, outcome, score, steps, tool calls, cost, hop type, error class, scored by, question
    assert cells[:6] == ["runA", SYSTEM, "v/2", "0", "wrong", "0.00"]
    assert cells[6:8] == ["2", "1"]  # two model calls, one search
    assert cells[9:11] == ["single", "retrieval"]
    assert cells[11] == "#1" and cells[12].startswith("Which helicopter model")  # scored when the run ended
    assert "cross_doc" in page  # v/1's hop type


def test_filters_and_sorting_on_the_server(client: TestClient) -> None:
    def rows(**params: str) -> list[tuple[str, str, str]]:
        r = client.get("/", params=params)
        assert r.status_code == 200
        return _rows(r.text)

    assert {s for _, s, _ in rows(system="lexical")} == {"lexical"} and len(rows(system="lexical")) == 2
    correct = rows(outcome="correct")
    assert ("runA", SYSTEM, "v/1") in correct and ("runB", SYSTEM, "v/1") in correct
    assert all(t == "v/1" for _, s, t in correct if s == SYSTEM)
    assert ("runA", SYSTEM, "v/2") in rows(outcome="wrong")
    assert rows(outcome="unscored") == []
    assert {t for _, _, t in rows(q="HELICOPTER")} == {"v/2"}  # the question text, any case
    assert {t for _, _, t in rows(q="v/1")} == {"v/1"}  # the task id
    assert {(r, s, t) for r, s, t in rows(error="retrieval")} >= {("runA", SYSTEM, "v/2"), ("runB", SYSTEM, "v/2")}
    assert {r for r, _, _ in rows(run="runB")} == {"runB"}
    assert rows(system="nobody") == [] and "No episode matches." in client.get("/", params={"system": "nobody"}).text
    by_task = rows(sort="task")
    assert [t for _, _, t in by_task] == sorted(t for _, _, t in by_task)
    by_task_desc = rows(sort="task", desc="1")
    assert [t for _, _, t in by_task_desc] == sorted((t for _, _, t in by_task_desc), reverse=True)
    by_system = rows(sort="system", desc="1")
    assert [s for _, s, _ in by_system] == sorted((s for _, s, _ in by_system), reverse=True)
    # the header links keep the filters and flip the direction of the column sorted by
    page = client.get("/", params={"system": "lexical", "sort": "score"}).text
    assert 'href="?system=lexical&amp;sort=score&amp;desc=1"' in page
    assert rows(sort="no-such-column", outcome="maybe")  # bad values are ignored, not errors


def test_episode_page_shows_task_gold_answer_score_and_transcript(client: TestClient, runs: dict[str, Any]) -> None:
    page = episode(client, "runA", "v/1")
    text = html.unescape(page)
    assert TASKS[0]["question"] in text and "Mountain car" in text
    assert 'id="gold-pages"' in page and "cross_doc" in page
    assert re.search(r'id="score"><h2>Score: <span class="outcome">correct</span> \(1\.000\)', page)
    assert "Page F1" in page and "ANLS*" in page
    # its one search returned both gold pages (marked below): the retrieval figures, read off the episode
    assert all(name in page for name in ("searches scored", "evidence recall@5", "MRR", "every gold page returned"))
    # the exact question the server was sent, and the exact reply it returned (the answer's arguments as sent)
    first = runs["sent"][0]
    user = next(m for m in first["messages"] if m["role"] == "user" and TASKS[0]["question"] in _text(m["content"]))
    assert _text(user["content"]) in text
    assert json.dumps(ANSWERS["v/1"]) in text and json.dumps({"query": "mountain"}) in text
    # the search step: every page it returned as a thumbnail, the cited and the gold pages marked
    search = re.search(r'<section class="step step-tool" id="step-2">(.*?)</section>', page, re.S)
    assert search is not None and "tool: search_documents" in search.group(1)
    thumbs = {(d, int(p)): css for css, d, p in THUMB.findall(search.group(1))}
    assert thumbs[("alpha.pdf", 1)] == "cited gold" and thumbs[("beta.pdf", 1)] == "gold"
    assert all(css == "" for key, css in thumbs.items() if key not in {("alpha.pdf", 1), ("beta.pdf", 1)})
    assert '<span class="mark mark-cited">cited</span>' in search.group(1)
    assert '<span class="mark mark-gold">gold</span>' in search.group(1)
    image = re.search(r'<img src="(/page-image\?[^"]+)"', search.group(1))
    assert image is not None
    r = client.get(html.unescape(image.group(1)))
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content[:4] == b"\x89PNG"
    # a link to the other systems' episodes of the task, side by side
    assert "/compare?task=v%2F1" in page and ">lexical</a>" in page


def test_model_output_is_shown_as_text(client: TestClient) -> None:
    page = episode(client, "runA", "v/2")
    assert HOSTILE not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the answer, and the reply's arguments
    assert "&lt;img src=x onerror=alert(2)&gt;" in page  # the question
    assert '<b class="error-class">retrieval</b>' in page
    table = client.get("/").text
    assert "<img src=x" not in table and "&lt;img src=x onerror=alert(2)&gt;" in table


def test_text_view_pages_are_shown_from_the_recorded_corpus(client: TestClient, runs: dict[str, Any]) -> None:
    """Run B read pages as text, stored by reference: the page's text is back on the page."""
    text = html.unescape(episode(client, "runB", "v/1"))
    assert "Mountain car rental rates for the winter season" in text
    assert "is not shown" not in text


def test_unknown_episodes_and_tasks_are_404_pages(client: TestClient) -> None:
    for params in ({"run": "runA", "system": SYSTEM, "task": "nope"}, {"run": "nope", "system": SYSTEM, "task": "v/1"},
                   {"run": "runA", "system": SYSTEM, "task": "v/1", "attempt": 7}, {}):
        r = client.get("/episode", params=params)
        assert r.status_code == 404 and "text/html" in r.headers["content-type"], params
        assert "Not found" in r.text and "Back to the episodes" in r.text
    assert client.get("/episode", params={"run": "runA", "system": "x", "task": "v/1", "attempt": "x"}).status_code == 400
    assert client.get("/compare", params={"task": "nope"}).status_code == 404
    assert client.get("/blob", params={"run": "runA", "sha": "0" * 64}).status_code == 404
    for doc in ("../runA/run.sqlite", "/etc/passwd", "..", "nothere.pdf"):
        assert client.get("/page-image", params={"corpus": "0", "doc": doc, "page": 1}).status_code in (400, 404), doc
    assert client.get("/page-image", params={"corpus": "/etc", "doc": "alpha.pdf", "page": 1}).status_code == 404
    assert client.get("/page-image", params={"corpus": "0", "doc": "alpha.pdf", "page": 99}).status_code == 404


def test_compare_shows_two_episodes_of_a_task_side_by_side(client: TestClient) -> None:
    a, b = f"runA:0:{SYSTEM}", f"runB:0:{SYSTEM}"
    page = client.get("/compare", params={"task": "v/2", "a": a, "b": b}).text
    assert page.count('class="side-episode"') == 2
    assert page.count("run <code>runA</code>") == 1 and page.count("run <code>runB</code>") == 1
    assert page.count('<section class="question" id="question">') == 1  # the task once, above both
    assert HOSTILE not in page
    page = client.get("/compare", params={"task": "v/2", "a": a, "b": "runA:0:lexical"}).text
    assert '<div class="episode" data-system="lexical">' in page
    assert '<option value="runA:0:lexical" selected>' in page


def test_deskbench_view_serves_on_localhost_and_says_how_to_add_users(runs: dict[str, Any], tmp_path: Path) -> None:
    empty = tmp_path / "run"
    shutil.copytree(runs["root"] / "runB", empty)  # a run without users
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "deskbench.cli", "view", str(empty), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import http.client

        deadline = time.monotonic() + 300  # a hang guard: a loaded machine starts it late
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/login")
                resp = conn.getresponse()
                assert resp.status == 200 and b"Log in" in resp.read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "deskbench view did not start"
                time.sleep(0.1)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=10)
    assert f"deskbench serve add-user NAME --out {empty}" in err
    assert f"episode viewer at http://127.0.0.1:{port}/" in err


def test_bad_arguments_are_one_line(tmp_path: Path, runs: dict[str, Any]) -> None:
    for args, needle in (((str(tmp_path / "nope"),), "nope does not exist"),
                         ((str(tmp_path),), "is not a deskbench run"),
                         ((str(runs["root"] / "runA"), "--corpus", str(tmp_path / "nope")), "--corpus")):
        proc = run_cli("view", *args)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# -- each track: the exact question sent and the exact text returned, in the episode's HTML ----------

def _viewer(run_dir: Path) -> TestClient:
    c = TestClient(create_viewer_app([run_dir]))
    login(c, WebStore(run_dir).add_user("reader"))
    return c


def _only_episode(c: TestClient, run_dir: Path) -> str:
    page = c.get("/").text
    link = re.search(r'href="(/episode\?[^"]+)"', page)
    assert link is not None, page[-2000:]
    r = c.get(html.unescape(link.group(1)))
    assert r.status_code == 200
    return r.text


def test_docqa_episode_holds_what_was_sent_and_returned(runs: dict[str, Any]) -> None:
    c = _viewer(runs["root"] / "runA")
    text = html.unescape(episode(c, "runA", "v/2"))
    sent = next(b for b in runs["sent"] if TASKS[1]["question"] in json.dumps(b))
    system_prompt = sent["messages"][0]["content"]
    assert isinstance(system_prompt, str) and system_prompt in text
    assert TASKS[1]["question"] in text and json.dumps(ANSWERS["v/2"]) in text


def test_analytics_episode_holds_what_was_sent_and_returned(bwrap: str, tmp_path: Path) -> None:
    from deskbench.tracks.analytics.generate.tasks import generate_analytics
    from deskbench.tracks.analytics.tasks import read_tasks

    generate_analytics(tmp_path / "tasks", tasks=11, seed=5)
    qa = next(t for t in read_tasks(tmp_path / "tasks" / "tasks.jsonl").items if t.template == "qa_quarter_total")
    (tmp_path / "tasks" / "one.jsonl").write_text(qa.model_dump_json() + "\n")
    reply = f"Final answer: {qa.answer} {HOSTILE} (quetzal-analytics)"
    code = "print('stdout marker <b>7</b>')"

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": code})}
        return {"kind": "text", "text": reply}

    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--agent", "analyst-agent", "--tasks", str(tmp_path / "tasks" / "one.jsonl"), "--out", str(out),
                       "--model", f"openai-compat/scripted@{fake.base_url}", "--concurrency", "1", "--quiet")
        assert proc.returncode == 0, proc.stderr
        sent = fake.requests[0]
    page = _only_episode(_viewer(out), out)
    text = html.unescape(page)
    assert HOSTILE not in page and reply in text
    assert qa.instruction in text
    for m in sent["messages"]:
        assert _text(m["content"]) in text  # every message of the first request, as sent
    assert code in text and "stdout marker <b>7</b>" in text  # the code, and what it printed
    assert re.search(r'<h2>Score: <span class="outcome">correct</span>', page)


def test_deliverables_episode_holds_what_was_sent_and_returned(bwrap: str, tmp_path: Path) -> None:
    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.deliverables.tasks import load_packages

    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", tmp_path / "packages" / "dl-0003-scp")
    (task,) = load_packages(tmp_path / "packages")
    reply = f"# Memo (quetzal-deliverable)\n\nThe figures {HOSTILE} are in the table."

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": "print('looked')"})}
        return {"kind": "text", "text": reply}

    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--tasks", str(tmp_path / "packages"), "--out", str(out), "--quiet",
                       "--model", f"openai-compat/consultant@{fake.base_url}")
        assert proc.returncode == 0, proc.stderr
        sent = fake.requests[0]
    page = _only_episode(_viewer(out), out)
    text = html.unescape(page)
    assert HOSTILE not in page and reply in text
    assert task.prompt in text and _text(sent["messages"][0]["content"]) in text
    # ungraded: unscored, not wrong; the deterministic verifiers' results are listed
    assert re.search(r'<h2>Score: <span class="outcome">unscored</span>', page)
    assert '<table class="verifiers">' in page and all(v.id in text for v in task.verifiers)


def test_score_time_judge_calls_are_shown(runs: dict[str, Any], tmp_path: Path) -> None:
    from deskbench.runs.store import RunStore
    from deskbench.runs.transcript import ModelCallEvent, TranscriptDoc

    run = tmp_path / "judged"
    shutil.copytree(runs["root"] / "runB", run)
    said = "The answer names the <b>right</b> car (quetzal-judge)."
    asked = [{"role": "user", "content": f"Question: {TASKS[0]['question']}"}]
    call = ModelCallEvent(at=0.0, seconds=0.5, model="openai/judge", prefix=0, messages=asked,
                          reply={"message": {"role": "assistant", "content": said}, "finish_reason": "stop"})
    RunStore(run, create=False).record_judge_transcript("v/1", SYSTEM, 0, "answer-judge", TranscriptDoc(events=[call]))
    c = _viewer(run)
    page = episode(c, "judged", "v/1")
    judges = re.search(r'<section class="judges" id="judges">(.*?)</section>\s*<section class="transcript"', page, re.S)
    assert judges is not None and "<h3>answer-judge</h3>" in judges.group(1)
    assert said not in page and said in html.unescape(judges.group(1)) and asked[0]["content"] in html.unescape(judges.group(1))
    assert '<section class="judges"' not in episode(c, "judged", "v/2")  # only the episode judged


def test_report_links_rows_and_bad_cases_to_the_viewer(client: TestClient, runs: dict[str, Any], tmp_path: Path) -> None:
    viewer = "http://127.0.0.1:8770"
    linked, plain = tmp_path / "linked.html", tmp_path / "plain.html"
    for target, extra in ((linked, ("--viewer-url", viewer)), (plain, ())):
        proc = run_cli("report", str(runs["root"] / "runA"), "--output", str(target), *extra)
        assert proc.returncode == 0, proc.stderr
    assert 'class="episodes"' not in plain.read_text() and viewer not in plain.read_text()  # a standalone file
    page = linked.read_text()
    leaderboard = re.search(r'<table id="leaderboard">(.*?)</table>', page, re.S)
    errors = re.search(r'<table id="errors-table">(.*?)</table>', page, re.S)
    assert leaderboard is not None and errors is not None
    rows = re.findall(r'<a class="episodes" href="([^"]+)">([^<]+)</a>', leaderboard.group(1))
    assert {html.unescape(text) for _, text in rows} == {SYSTEM, "lexical"}
    bad = {html.unescape(href) for href, _ in re.findall(r'<a class="episodes" href="([^"]+)">([^<]+)</a>', errors.group(1))}
    retrieval = f"{viewer}/?system=bm25-agent%3Aopenai%2Fgpt-4.1&error=retrieval"
    assert retrieval in bad
    # the link, followed in the viewer, lists the episode the report counted there
    assert ("runA", SYSTEM, "v/2") in _rows(client.get(retrieval.removeprefix(viewer)).text)
    proc = run_cli("report", str(runs["root"] / "runA"), "--output", str(tmp_path / "x.html"), "--viewer-url", "127.0.0.1:8770")
    assert proc.returncode == 2 and "--viewer-url" in proc.stderr and "Traceback" not in proc.stderr
