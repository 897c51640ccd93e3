"""The web app (deskbench serve): access control, CSRF, path safety over real HTTP on 127.0.0.1,
and the docqa human baseline driven in Debian's headless Chromium, down to `deskbench score`.
DESKBENCH_DOCS_SCREENSHOT=1 also refreshes docs/web-annotator.png."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest
import uvicorn
from conftest import run_cli, watched_page, write_operator_corpus

from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.web.app import create_app

TASKS = [
    {"id": "web/1", "question": "What do cars parked overnight at the harbour pay?",
     "answer_variants": [["a fee"]], "evidence": [{"document": "alpha.pdf", "page": 2}]},
    {"id": "web/2", "question": "Which helicopter model is listed besides the Bell 407?",
     "answer_variants": [["Bell 412"]], "evidence": [{"document": "beta.pdf", "page": 2}]},
]


@contextmanager
def serve(app) -> Iterator[int]:  # noqa: ANN001
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 300  # a hang guard: a loaded machine starts it late
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


class Client:
    """Raw HTTP (no redirects followed, paths sent exactly as written)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}
        self.csrf = ""

    def request(self, method: str, path: str, form: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        hdrs = dict(headers or {})
        if self.cookies:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form)
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        for value in resp.headers.get_all("set-cookie") or []:
            name, _, rest = value.partition("=")
            cookie_value = rest.split(";", 1)[0]
            if cookie_value in ('""', "") or "Max-Age=0" in value:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = cookie_value
        text = data.decode("utf-8", "replace") if not resp.headers.get("content-type", "").startswith("image/") else ""
        return resp.status, resp.headers, text

    def login(self, token: str) -> None:
        status, _, html = self.request("GET", "/login")
        assert status == 200
        status, headers, _ = self.request("POST", "/login", {"csrf": _csrf(html), "token": token})
        assert status == 303 and headers["location"] == "/", status
        status, _, html = self.request("GET", "/")
        assert status == 200
        self.csrf = _csrf(html)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:500]
    return found.group(1)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("web")
    write_operator_corpus(root)
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    run_dir = root / "run"
    proc = run_cli("serve", "batches", "--out", str(run_dir), "--tasks", str(tasks))
    assert proc.returncode == 0 and proc.stdout.startswith("Aquarius\t2 questions\tunassigned"), proc
    tokens = {}
    for user in ("alice", "bob"):  # the same batch for both (as when measuring agreement)
        proc = run_cli("serve", "add-user", user, "--out", str(run_dir), "--batch", "Aquarius")
        assert proc.returncode == 0, proc.stderr
        tokens[user] = proc.stdout.strip()
    assert run_cli("serve", "add-user", "alice", "--out", str(run_dir)).returncode != 0  # no duplicates
    stored = (run_dir / "run.sqlite").read_bytes()
    assert tokens["alice"].encode() not in stored  # only the hash is kept
    app = create_app(root / "corpus", tasks, run_dir)
    with serve(app) as port:
        yield {"root": root, "port": port, "run": run_dir, "tokens": tokens, "tasks": tasks}



@contextmanager
def serve_command(*args: str) -> Iterator[tuple[int, int, str]]:
    """The real `deskbench serve ARGS --port P` in a subprocess: (port, status, html) of its
    login page once it answers; stopped on exit."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "deskbench.cli", "serve", *args, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # a hang guard: a loaded machine starts it late
        while True:
            try:
                status, _, html = Client(port).request("GET", "/login")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "deskbench serve did not start"
                time.sleep(0.1)
        yield port, status, html
    finally:
        server.terminate()
        server.wait(10)



def test_unauthenticated_requests_are_refused(setup: dict) -> None:
    c = Client(setup["port"])
    status, headers, _ = c.request("GET", "/", headers={"Accept": "text/html"})
    assert status == 303 and headers["location"] == "/login"
    assert c.request("GET", "/q/1")[0] == 401
    assert c.request("GET", "/page-image?doc=alpha.pdf&page=1")[0] == 401
    assert c.request("POST", "/q/2/search", {"query": "harbour", "csrf": "x"})[0] == 401
    c.cookies["deskbench_session"] = "forged"
    assert c.request("GET", "/q/2")[0] == 401
    assert c.request("GET", "/static/app.css")[0] == 200  # the stylesheet is public, nothing else
    # a wrong token logs no one in
    status, _, html = c.request("GET", "/login")
    assert c.request("POST", "/login", {"csrf": _csrf(html), "token": "not-a-token"})[0] == 401
    assert "deskbench_session" not in c.cookies or c.cookies["deskbench_session"] == "forged"


def test_login_cookie_flags_and_csrf(setup: dict) -> None:
    c = Client(setup["port"])
    status, _, html = c.request("GET", "/login")
    assert c.request("POST", "/login", {"token": setup["tokens"]["alice"]})[0] == 403  # no CSRF token
    status, headers, _ = c.request("POST", "/login", {"csrf": _csrf(html), "token": setup["tokens"]["alice"]})
    assert status == 303
    cookie = next(v for v in headers.get_all("set-cookie") if v.startswith("deskbench_session="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    status, _, html = c.request("GET", "/")
    csrf = _csrf(html)
    assert c.request("POST", "/q/2/search", {"query": "harbour"})[0] == 403
    assert c.request("POST", "/q/2/search", {"query": "harbour", "csrf": "wrong"})[0] == 403
    assert c.request("POST", "/q/2/cite", {"document": "alpha.pdf", "page": "2"})[0] == 403
    assert c.request("POST", "/q/2/submit", {"answer": "x"})[0] == 403
    assert c.request("POST", "/q/2/search", {"query": "harbour", "csrf": csrf})[0] == 303
    assert "Content-Security-Policy" in c.request("GET", "/q/2")[1]


def test_paths_never_reach_the_filesystem(setup: dict) -> None:
    c = Client(setup["port"])
    c.login(setup["tokens"]["alice"])
    status, headers, _ = c.request("GET", "/page-image?doc=alpha.pdf&page=2&size=thumb")
    assert status == 200 and headers["content-type"] == "image/png"
    for doc in ("../run/run.sqlite", "..%2F..%2Fetc%2Fpasswd", "/etc/passwd", "%2Fetc%2Fpasswd",
                "docs/../pages.sqlite", "..", "C:%5Cwindows", "alpha.pdf%00.png"):
        assert c.request("GET", f"/page-image?doc={doc}&page=1")[0] in (400, 404), doc
    assert c.request("GET", "/page-image?doc=nothere.pdf&page=1")[0] == 404
    assert c.request("GET", "/page-image?doc=alpha.pdf&page=99")[0] == 404
    assert c.request("GET", "/page-image?doc=alpha.pdf&page=1&size=../x")[0] == 400
    for path in ("/static/../../run/run.sqlite", "/static/%2e%2e/%2e%2e/etc/passwd",
                 "/static/..%2Fapp.py", "/static/app.py", "/../../etc/passwd", "/static//etc/passwd"):
        status, _, body = c.request("GET", path)
        assert status in (400, 404), path
        assert "root:" not in body
    assert c.request("POST", "/q/2/view", {"csrf": c.csrf, "document": "../../etc/passwd", "page": "1"})[0] == 400
    assert c.request("POST", "/q/2/cite", {"csrf": c.csrf, "document": "/etc/passwd", "page": "1"})[0] == 400


def test_symlink_escape_is_refused(setup: dict, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(setup["root"] / "corpus", corpus, symlinks=True)
    shutil.rmtree(corpus / "cache", ignore_errors=True)
    outside = tmp_path / "outside.pdf"
    stored = sorted((corpus / "docs").glob("*.pdf"))[0]
    shutil.copy(stored, outside)
    stored.unlink()
    stored.symlink_to(outside)  # the stored copy now points out of the corpus
    run_dir = tmp_path / "run"
    run_cli("serve", "batches", "--out", str(run_dir), "--tasks", str(setup["tasks"]))
    token = run_cli("serve", "add-user", "carol", "--out", str(run_dir), "--batch", "Aquarius").stdout.strip()
    with serve(create_app(corpus, setup["tasks"], run_dir)) as port:
        c = Client(port)
        c.login(token)
        codes = {d: c.request("GET", f"/page-image?doc={d}&page=1")[0] for d in ("alpha.pdf", "beta.pdf")}
    assert sorted(codes.values()) == [200, 404], codes  # the symlinked one is refused


def test_other_users_cannot_see_or_submit_my_work(setup: dict) -> None:
    alice, bob = Client(setup["port"]), Client(setup["port"])
    alice.login(setup["tokens"]["alice"])
    bob.login(setup["tokens"]["bob"])
    assert alice.csrf != bob.csrf
    assert alice.request("POST", "/q/2/search", {"csrf": alice.csrf, "query": "helicopter OR zebrafish"})[0] == 303
    assert "zebrafish" in alice.request("GET", "/q/2")[2]
    status, _, page = bob.request("GET", "/q/2")
    assert status == 200 and "zebrafish" not in page
    # bob cannot act with alice's CSRF token, nor submit for her
    assert bob.request("POST", "/q/2/submit", {"csrf": alice.csrf, "answer": "Bell 412"})[0] == 403
    assert bob.request("POST", "/q/2/submit", {"csrf": bob.csrf, "answer": "Bell 412"})[0] == 303
    store = RunStore(setup["run"], create=False)
    assert {e.task_id for e in store.episodes("human:bob")} == {"web/2"}
    assert "web/2" not in {e.task_id for e in store.episodes("human:alice")}
    assert "in progress" in alice.request("GET", "/")[2]
    assert alice.request("POST", "/q/2/search", {"csrf": alice.csrf, "query": "bell"})[0] == 303  # still hers to do
    assert bob.request("POST", "/q/2/search", {"csrf": bob.csrf, "query": "bell"})[0] == 409  # bob's is submitted
    # logging out ends the session server-side
    assert bob.request("POST", "/logout", {"csrf": bob.csrf})[0] == 303
    bob.cookies["deskbench_session"] = "x"
    assert bob.request("GET", "/q/2")[0] == 401


def test_batches_decide_what_each_user_sees(setup: dict, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    out = ("--out", str(run_dir))
    proc = run_cli("serve", "batches", *out, "--tasks", str(setup["tasks"]), "--batch-size", "1")
    assert proc.returncode == 0 and "2 new batches: Aquarius, Orion" in proc.stderr, proc
    again = run_cli("serve", "batches", *out, "--tasks", str(setup["tasks"]), "--batch-size", "1")
    assert "0 new batches" in again.stderr  # existing batches never change
    bad = run_cli("serve", "add-user", "gus", *out, "--batch", "Andromeda")
    assert bad.returncode == 2 and "no batch 'Andromeda'" in bad.stderr and "Traceback" not in bad.stderr
    erin = run_cli("serve", "add-user", "erin", *out, "--batch", "Orion").stdout.strip()
    finn = run_cli("serve", "add-user", "finn", *out).stdout.strip()  # gus was never created: the name is free
    assert run_cli("serve", "add-user", "gus", *out).returncode == 0
    assert run_cli("serve", "assign", "Lyra", "--user", "finn", *out).returncode == 2
    with serve(create_app(setup["root"] / "corpus", setup["tasks"], run_dir)) as port:
        e, f = Client(port), Client(port)
        e.login(erin)
        f.login(finn)
        listing = e.request("GET", "/")[2]
        assert "Batch Orion" in listing and "helicopter" in listing and "cars parked" not in listing
        assert e.request("GET", "/q/1")[0] == 404  # Aquarius is not hers
        assert e.request("POST", "/q/1/search", {"csrf": e.csrf, "query": "harbour"})[0] == 404
        status, _, page = e.request("GET", "/q/2")
        assert status == 200 and "Batch Orion · question 1 of 1" in page
        assert 'id="no-batches"' in f.request("GET", "/")[2] and f.request("GET", "/q/2")[0] == 404
        assert run_cli("serve", "assign", "Aquarius", "Orion", "--user", "finn", *out).returncode == 0
        assert f.request("GET", "/q/1")[0] == 200  # assignment takes effect without a restart
        assert f.request("POST", "/q/1/submit", {"csrf": f.csrf, "answer": "a fee"})[0] == 303
        assert run_cli("serve", "assign", "Aquarius", "--user", "finn", "--remove", *out).returncode == 0
        assert f.request("GET", "/q/1")[0] == 404
    listing = run_cli("serve", "batches", *out).stdout.splitlines()
    assert listing == ["Aquarius\t1 questions\tunassigned", "Orion\t1 questions\terin 0/1, finn 0/1"], listing
    assert [e.task_id for e in RunStore(run_dir, create=False).episodes("human:finn")] == ["web/1"]  # work stays


def test_annotator_in_chromium(setup: dict, browser) -> None:  # noqa: ANN001
    base = f"http://127.0.0.1:{setup['port']}"
    page, problems = watched_page(browser, base, viewport={"width": 1280, "height": 900})
    page.goto(base + "/")
    assert page.url == base + "/login"
    page.fill("#token", setup["tokens"]["alice"])
    page.click("#login button[type=submit]")
    page.wait_for_url(base + "/")
    page.click("text=What do cars parked overnight")
    page.wait_for_url(base + "/q/1")
    assert "cars parked overnight" in page.locator("#question").inner_text()
    page.fill("#query", '"annual report" harbour')
    page.click("#search button")
    page.wait_for_selector("#results .thumb")
    assert page.locator("#results .thumb").count() == 1
    assert "alpha.pdf · p.2" in page.locator("#results").inner_text()
    sizes = page.locator("#results img").evaluate_all("els => els.map(e => [e.complete, e.naturalWidth])")
    assert all(ok and w > 100 for ok, w in sizes), sizes
    page.click("#results .thumb")
    page.wait_for_selector("#viewer")
    assert "alpha.pdf · page 2 of 3" in page.locator("#viewer-ref").inner_text()
    page.click("#next")
    page.wait_for_selector("text=page 3 of 3")
    page.click("#prev")
    page.wait_for_selector("text=page 2 of 3")
    page.click("#cite")
    page.wait_for_selector("text=remove citation")
    assert "alpha.pdf p.2" in page.locator("#citations").inner_text()
    page.fill("#answer", "a fee")
    page.wait_for_selector("#saved:has-text('draft saved')")
    page.reload()  # a closed or reloaded tab loses nothing
    assert page.locator("#answer").input_value() == "a fee"
    assert page.evaluate("() => document.querySelector('img.page').naturalWidth") > 500
    shot = page.screenshot(full_page=True)
    if os.environ.get("DESKBENCH_DOCS_SCREENSHOT"):
        docs = Path(__file__).resolve().parents[2] / "docs"
        docs.mkdir(exist_ok=True)
        (docs / "web-annotator.png").write_bytes(shot)
    page.click("#submit")
    page.wait_for_selector("#submitted")
    page.goto(base + "/")
    assert page.locator("#batch-Aquarius tr.done").count() == 1
    assert problems == []
    page.close()

    store = RunStore(setup["run"], create=False)
    [episode] = [e for e in store.episodes("human:alice") if e.task_id == "web/1"]
    kinds = [s.kind for s in episode.trajectory]
    assert kinds == ["tool_call", "page_view", "page_view", "page_view", "citation_added", "answer"], kinds
    search = episode.trajectory[0]
    assert search.name == "search_documents" and search.arguments == {"query": '"annual report" harbour'}
    assert search.result["pages"] == [["alpha.pdf", 2]]
    times = [s.at for s in episode.trajectory]  # every action's own timestamp, in order (MADQA C.2)
    assert all(times) and times == sorted(times) and times[-1] == episode.finished_at
    assert episode.started_at <= times[0]
    assert [(s.document, s.page) for s in episode.trajectory[1:4]] == [("alpha.pdf", 2), ("alpha.pdf", 3), ("alpha.pdf", 2)]
    sub = episode.submission
    assert sub.answer == ["a fee"] and [(c.document, c.page) for c in sub.citations] == [("alpha.pdf", 2)]
    assert sub.search_history == ['"annual report" harbour'] and sub.iterations == 1
    assert episode.started_at < episode.finished_at and episode.usage.seconds > 0

    proc = run_cli("score", str(setup["run"]), "--system", "human:alice", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert set(payload) == {"human:alice"}
    report = payload["human:alice"]
    text = json.dumps(report)
    assert '"accuracy"' in text


def test_oracle_mode_shows_the_evidence_instead_of_search(setup: dict, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_cli("serve", "batches", "--out", str(run_dir), "--tasks", str(setup["tasks"]))
    token = run_cli("serve", "add-user", "dora", "--out", str(run_dir), "--batch", "Aquarius").stdout.strip()
    with serve(create_app(setup["root"] / "corpus", setup["tasks"], run_dir, oracle=True)) as port:
        c = Client(port)
        c.login(token)
        status, _, html = c.request("GET", "/q/2")
        assert status == 200 and 'id="search"' not in html
        assert "beta.pdf · p.2" in html
        assert c.request("POST", "/q/2/search", {"csrf": c.csrf, "query": "bell"})[0] == 404
        assert c.request("POST", "/q/2/view", {"csrf": c.csrf, "document": "beta.pdf", "page": "2"})[0] == 303
        assert c.request("POST", "/q/2/cite", {"csrf": c.csrf, "document": "beta.pdf", "page": "2", "op": "add"})[0] == 303
        assert c.request("POST", "/q/2/submit", {"csrf": c.csrf, "answer": "Bell 412"})[0] == 303
    [episode] = RunStore(run_dir, create=False).episodes("human-oracle:dora")
    assert episode.submission.iterations == 0 and episode.submission.answer == ["Bell 412"]
    assert [s.kind for s in episode.trajectory] == ["page_view", "citation_added", "answer"]


def test_serve_command_binds_localhost(setup: dict) -> None:
    import subprocess

    proc = run_cli("serve", "--corpus", str(setup["root"] / "corpus"))
    assert proc.returncode != 0 and "--tasks" in proc.stderr and "--out" in proc.stderr
    with serve_command("--corpus", str(setup["root"] / "corpus"), "--tasks", str(setup["tasks"]),
                       "--out", str(setup["run"])) as (port, status, html):
        assert status == 200 and 'name="token"' in html
        if shutil.which("ss"):  # the local address column: 127.0.0.1 only
            rows = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
            assert [r.split()[3] for r in rows.splitlines()] == [f"127.0.0.1:{port}"], rows
