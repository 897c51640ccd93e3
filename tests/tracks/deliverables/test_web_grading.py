"""Rubric grading and QC of a deliverables run (issue 9 item 2): access, CSRF and file-name safety
over real HTTP on 127.0.0.1, a grader plus a QC reviewer in Debian's headless Chromium, and a
QC edit of a verifier outcome made on the QC screen down to `deskbench score`.
DESKBENCH_DOCS_SCREENSHOT=1 also refreshes docs/web-grading.png and docs/web-qc.png."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from conftest import run_cli, watched_page

from deskbench.generate.demo import bundled_dir
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.outputs import OutputFileRecord
from deskbench.tracks.deliverables.grades import GradeStore
from deskbench.tracks.deliverables.tasks import (
    RUBRIC_CODES,
    DeliverableSubmission,
    DeliverableTask,
    load_packages,
)
from deskbench.tracks.deliverables.web.grading import create_grading_app
from deskbench.web.store import WebStore
from tests.web.test_web import Client, serve, serve_command

SYSTEM = "sys-a"
RESPONSE = "{wrong} <script>alert(1)</script>\nRevenue is INR 1,500 Cr per Mordor Intelligence."
NOTES = "# Memo\nBasic Company Information\nThe market is growing.\n"


def wrong_decision(task: DeliverableTask) -> str:
    """The decision line the task's trap leads to (never the golden one: each package draws its
    golden decision)."""
    lure = next(t.lure for t in task.traps if "DECISION: " in t.lure)
    wrong = "DECISION: " + lure.partition("DECISION: ")[2]
    assert wrong != task.golden.decision
    return wrong


def memo_reads(task: DeliverableTask) -> str:
    """A QC reviewer's reason for passing the decision verifier: the memo has the golden decision."""
    return f"The memo's decision line reads {(task.golden.decision or '').removeprefix('DECISION: ')}"


def make_run(run_dir: Path) -> tuple[DeliverableTask, dict[str, str]]:
    """A deliverables run with one ok episode (a response and notes.md) and one error episode;
    users alice and bob: (the ok episode's task, their login tokens)."""
    store = RunStore(run_dir)
    tasks = load_packages(bundled_dir() / "deliverables")
    store.save_tasks(tasks)
    task = tasks[0]
    files_dir = Path("outputs") / SYSTEM / task.id / "0"
    (run_dir / files_dir).mkdir(parents=True)
    (run_dir / files_dir / "notes.md").write_text(NOTES)
    (run_dir / files_dir / "unlisted.md").write_text("not in the submission")
    (run_dir / "secret.txt").write_text("secret")
    from PIL import Image

    Image.new("RGB", (320, 200), (30, 90, 200)).save(run_dir / files_dir / "chart.png")
    (run_dir / files_dir / "trap.png").write_text("<script>alert(1)</script>")  # not an image
    recs = [OutputFileRecord(name=n, size=len(b), sha256=hashlib.sha256(b).hexdigest())
            for n in ("notes.md", "chart.png", "trap.png") for b in [(run_dir / files_dir / n).read_bytes()]]
    store.record(Episode(task_id=task.id, system=SYSTEM, status="ok", submission=DeliverableSubmission(
        id=task.id, response=RESPONSE.format(wrong=wrong_decision(task)), files=recs, files_dir=files_dir.as_posix())))
    store.record(Episode(task_id=tasks[1].id, system=SYSTEM, status="error", error="boom"))
    web = WebStore(run_dir)
    return task, {u: web.add_user(u) for u in ("alice", "bob")}


def graded_by_alice(port: int, run_dir: Path, task: DeliverableTask, tokens: dict[str, str]) -> tuple[Client, Client, dict[str, str]]:
    """alice and bob logged in; alice has graded the ok episode 2 on every criterion (the form)."""
    alice, bob = Client(port), Client(port)
    alice.login(tokens["alice"])
    bob.login(tokens["bob"])
    stamp = RunStore(run_dir, create=False).episodes(SYSTEM)[0].finished_at
    grade = {"csrf": alice.csrf, "task": task.id, "system": SYSTEM, "attempt": "0", "stamp": stamp,
             **{f"score_{c}": "2" for c in RUBRIC_CODES}, **{f"just_{c}": "Adequate." for c in RUBRIC_CODES}}
    assert alice.request("POST", "/grade", grade)[0] == 303
    return alice, bob, grade


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    run_dir = tmp_path_factory.mktemp("grading") / "run"
    task, tokens = make_run(run_dir)
    with serve(create_grading_app(run_dir)) as port:
        yield {"port": port, "run": run_dir, "tokens": tokens, "task": task,
               "q": urlencode({"task": task.id, "system": SYSTEM, "attempt": 0})}


def test_access_csrf_and_file_names(setup: dict) -> None:
    q = setup["q"]
    anon = Client(setup["port"])
    assert anon.request("GET", "/", headers={"Accept": "text/html"})[0] == 303
    assert anon.request("GET", f"/grade?{q}")[0] == 401
    assert anon.request("GET", f"/file?{q}&name=notes.md")[0] == 401
    assert anon.request("POST", "/grade", {"csrf": "x", "task": setup["task"].id})[0] == 401
    assert anon.request("POST", "/qc", {"csrf": "x"})[0] == 401

    c = Client(setup["port"])
    c.login(setup["tokens"]["alice"])
    status, _, html = c.request("GET", "/")
    assert status == 200 and setup["task"].id in html and html.count("<tr") == 2  # the error episode is not listed
    status, _, html = c.request("GET", f"/grade?{q}")
    assert status == 200 and "&lt;script&gt;alert(1)" in html and "<script>alert" not in html
    assert "Basic Company Information" in html  # the file's text, via read_output
    assert "Completely ignores source constraints" in html  # a Table 19 anchor
    form = {"task": setup["task"].id, "system": SYSTEM, "attempt": "0", "score_DI": "0", "just_DI": ""}
    assert c.request("POST", "/grade", form)[0] == 403  # no CSRF token
    assert c.request("POST", "/grade", {**form, "csrf": "wrong"})[0] == 403
    assert c.request("POST", "/qc", {"target": "DI", "action": "confirm", **form})[0] == 403
    # downloads: only names listed in the submission; nothing from the request reaches the filesystem
    status, headers, body = c.request("GET", f"/file?{q}&name=notes.md")
    assert status == 200 and body == NOTES and "attachment" in headers["content-disposition"]
    # a chart is shown on the page (a raster image that decodes); anything else stays a download
    assert 'src="/file?' in html and "name=chart.png&amp;inline=1" in html and "name=trap.png&amp;inline=1" not in html
    status, headers, _ = c.request("GET", f"/file?{q}&name=chart.png&inline=1")
    assert status == 200 and headers["content-type"] == "image/png" and "inline" in headers["content-disposition"]
    status, headers, _ = c.request("GET", f"/file?{q}&name=trap.png&inline=1")
    assert status == 200 and headers["content-type"] == "application/octet-stream" and "attachment" in headers["content-disposition"]
    for name in ("unlisted.md", "../../../secret.txt", "..%2F..%2F..%2Fsecret.txt", "../../../run.sqlite", "/etc/passwd"):
        assert c.request("GET", f"/file?{q}&name={name}")[0] == 404, name
    assert c.request("GET", f"/file/../secret.txt?{q}")[0] == 404
    assert c.request("GET", "/file?task=../x&system=sys-a&attempt=0&name=notes.md")[0] == 404
    # the Score-0 rule server-side: a 0 without a justification is refused, nothing stored
    stamp = RunStore(setup["run"], create=False).episodes(SYSTEM)[0].finished_at
    full = {**form, "csrf": c.csrf, "stamp": stamp,
            **{f"score_{k}": "2" for k in ("AR", "RF", "EP", "FD")}, **{f"just_{k}": "ok" for k in ("AR", "RF", "EP", "FD")}}
    status, _, html = c.request("POST", "/grade", full)
    assert status == 400 and "DI: a score of 0 needs a justification" in html
    assert GradeStore(setup["run"]).grades() == []


def test_grader_and_qc_reviewer_in_chromium(setup: dict, browser) -> None:  # noqa: ANN001
    base = f"http://127.0.0.1:{setup['port']}"
    task = setup["task"]
    problems: list[list[str]] = []  # per page: console errors, page errors, requests leaving the app

    def open_as(user: str):  # noqa: ANN202
        page, seen = watched_page(browser, base, viewport={"width": 1280, "height": 900})
        problems.append(seen)
        page.goto(base + "/")
        page.fill("#token", setup["tokens"][user])
        page.click("#login button[type=submit]")
        page.wait_for_url(base + "/")
        return page

    page = open_as("alice")
    page.click("#episodes >> text=to grade")
    page.wait_for_selector("#grade-form")
    assert "Basic Company Information" in page.locator("#files").inner_text()
    assert page.locator("#files img.output").evaluate("e => e.complete && e.naturalWidth") == 320
    assert page.locator("#verifiers tbody tr").count() == len(task.verifiers)
    justifications = {"DI": "Multiple factual errors; vague citations.", "AR": "Sound logic, small gaps.",
                      "RF": "Focused on the question.", "EP": "Numbers mostly right.", "FD": "Memo format followed."}
    scores = {"DI": 0, "AR": 2, "RF": 3, "EP": 2, "FD": 2}
    for code, score in scores.items():
        page.check(f"#crit-{code} input[value='{score}']")
        page.fill(f"textarea[name=just_{code}]", justifications[code])
    page.click("#save-grade")
    page.wait_for_selector("#saved")
    # DI 0 with score-1 wording: the Score-0 mismatch is shown as a warning
    assert "DI is 0 but its justification describes score-1 behaviour" in page.locator("#grade").inner_text()
    shot = page.screenshot(full_page=True)
    if os.environ.get("DESKBENCH_DOCS_SCREENSHOT"):
        docs = Path(__file__).resolve().parents[3] / "docs"
        docs.mkdir(exist_ok=True)
        (docs / "web-grading.png").write_bytes(shot)
    page.close()
    store = GradeStore(setup["run"])
    [grade] = store.grades()
    assert grade.grader == "alice" and grade.source == "human" and grade.scores == scores
    final = store.final_grades()[(task.id, SYSTEM, 0)]
    assert final.scores == scores and final.status == "unreviewed"

    page = open_as("bob")
    page.goto(f"{base}/qc?{setup['q']}")
    row = page.locator("#cell-DI")
    row.locator("summary").click()
    row.locator("select[name=score]").select_option("1")
    row.locator("textarea[name=justification]").fill("Multiple factual errors and vague citations; no fabrication.")
    row.locator("input[name=reason]").fill("Score-0 mismatch: the text describes score 1")
    row.locator("form.edit button").click()
    page.wait_for_selector("#cell-DI .final-score:text-is('1')")
    page.locator("#cell-AR button.confirm").click()
    page.wait_for_selector("#log li:has-text('confirm AR')")
    # C.2: the verifiers to re-derive keep the row pending until each is confirmed or edited
    assert page.locator("#final-status").inner_text() == "pending"
    assert "pending: C.2 verifiers to re-derive" in page.locator("#final").inner_text()
    rederive = [t.removeprefix("verifier-") for t in page.locator("#verifiers tr.rederive").evaluate_all(
        "rows => rows.map(r => r.id)")]
    assert "decision" in rederive
    # a verifier outcome: the automatic fail set to pass, with a reason
    row = page.locator("#verifier-decision")
    assert row.locator(".final-outcome").inner_text() == "fail"
    row.locator("summary").click()
    assert row.locator("select[name=score]").input_value() == "1"  # the edit offers the other outcome
    row.locator("input[name=reason]").fill(memo_reads(task))
    row.locator("form.edit button").click()
    page.wait_for_selector("#verifier-decision .final-outcome:text-is('pass')")
    assert f"edited by bob: {memo_reads(task)}" in page.locator("#verifier-decision").inner_text()
    for vid in rederive:
        if vid != "decision":
            page.locator(f"#verifier-{vid} button.confirm").click()
            page.wait_for_selector(f"#log li:has-text('confirm verifier:{vid}')")
    assert page.locator("#final-status").inner_text() == "reviewed"
    assert page.locator("#verifiers tbody tr").count() == len(task.verifiers)
    shot = page.screenshot(full_page=True)
    if os.environ.get("DESKBENCH_DOCS_SCREENSHOT"):
        (Path(__file__).resolve().parents[3] / "docs" / "web-qc.png").write_bytes(shot)
    assert problems == [[], []]
    # an edit without a reason is refused (400) with the qc_problem message
    row = page.locator("#cell-FD")
    row.locator("summary").click()
    row.locator("textarea[name=justification]").fill("Fine.")
    row.locator("form.edit button").click()
    page.wait_for_selector("#qc-error")
    assert "an edit has no reason" in page.locator("#qc-error").inner_text()
    page.close()

    actions = store.qc_actions()
    assert [(a.target, a.action, a.score, a.reviewer) for a in actions] == [
        ("DI", "edit", 1, "bob"), ("AR", "confirm", None, "bob"), ("verifier:decision", "edit", 1, "bob")] + [
        (f"verifier:{v}", "confirm", None, "bob") for v in rederive if v != "decision"]
    assert actions[0].reason == "Score-0 mismatch: the text describes score 1"
    final = store.final_grades()[(task.id, SYSTEM, 0)]
    assert final.scores["DI"] == 1 and final.primary_scores["DI"] == 0 and final.status == "reviewed"
    assert [(o.id, o.automatic, o.final) for o in final.verifier_overrides] == [("decision", "fail", "pass")]
    # the grader may not QC their own grade
    alice = Client(setup["port"])
    alice.login(setup["tokens"]["alice"])
    form = {"csrf": alice.csrf, "task": task.id, "system": SYSTEM, "attempt": "0", "target": "RF", "action": "confirm"}
    status, _, html = alice.request("POST", "/qc", form)
    assert status == 403 and "QC is a second person&#39;s review: alice graded this episode" in html


def test_verifier_qc_over_http_reaches_the_score(tmp_path: Path) -> None:
    """A QC reviewer sets a verifier outcome on the QC screen; `deskbench score` uses it."""
    run_dir = tmp_path / "run"
    task, tokens = make_run(run_dir)
    q = urlencode({"task": task.id, "system": SYSTEM, "attempt": 0})
    items = tmp_path / "items.jsonl"

    def scored() -> dict:
        proc = run_cli("score", str(run_dir), "--items-out", str(items))
        assert proc.returncode == 0, proc.stderr
        [item] = [i for i in map(json.loads, items.read_text().splitlines()) if i["task_id"] == task.id]
        return item

    def outcome(item: dict, vid: str) -> tuple[str, str]:
        [r] = [r for r in item["verifiers"] if r["id"] == vid]
        return r["status"], r["evidence"]

    with serve(create_grading_app(run_dir)) as port:
        alice, bob, grade = graded_by_alice(port, run_dir, task, tokens)
        before = scored()
        assert before["v"] == 50.0 and outcome(before, "decision")[0] == "fail"  # 4 of 8 pass

        # every verifier listed with kind, automatic outcome and (escaped) evidence
        status, _, html = bob.request("GET", f"/qc?{q}")
        assert status == 200 and html.count('<tr id="verifier-') == len(task.verifiers)
        assert f"(want &#39;{task.golden.decision}&#39;)" in html and "<script>alert" not in html
        assert "rubric grading and QC" in html and "human baseline" not in html

        # validation errors come back on the page (400), nothing stored; each form names the grade it shows
        graded = GradeStore(run_dir).primary_grade((task.id, SYSTEM, 0))
        assert graded is not None and f'name="graded_at" value="{graded.created_at}"' in html
        form = {"csrf": bob.csrf, "task": task.id, "system": SYSTEM, "attempt": "0", "target": "verifier:decision",
                "grader": "alice", "graded_at": graded.created_at}
        for extra, message in [
            ({"action": "edit", "score": "1"}, "verifier:decision reason: an edit has no reason"),
            ({"action": "edit", "score": "2", "reason": "r"}, "2 is not a verifier score"),
            ({"action": "edit", "score": "", "reason": "r"}, "an edit has no replacement score"),
            ({"action": "edit", "score": "x", "reason": "r"}, "score: give a whole number"),
            ({"action": "confirm", "target": "verifier:nope"}, "has no such verifier; use one of: file_gtm_onepager"),
            ({"action": "reject", "reason": "r"}, "reject applies to the row"),
        ]:
            status, _, html = bob.request("POST", "/qc", {**form, **extra})
            assert status == 400 and 'id="qc-error"' in html and message in html, (extra, html[-3000:])
        # the grader may not QC their own grade; no CSRF token, no action
        status, _, html = alice.request("POST", "/qc", {**form, "csrf": alice.csrf, "action": "edit", "score": "1",
                                                        "reason": "mine"})
        assert status == 403 and "QC is a second person&#39;s review: alice graded this episode" in html
        assert bob.request("POST", "/qc", {**form, "csrf": "", "action": "confirm"})[0] == 403
        assert GradeStore(run_dir).qc_actions() == []

        reason = f"{memo_reads(task)}; the response quotes a draft"
        assert bob.request("POST", "/qc", {**form, "action": "edit", "score": "1", "reason": reason})[0] == 303
        assert bob.request("POST", "/qc", {**form, "target": "verifier:cites_authorized", "action": "confirm"})[0] == 303
        status, _, html = bob.request("GET", f"/qc?{q}")
        row = html.split('<tr id="verifier-decision"')[1].split("</tr>")[0]
        assert row.startswith(' class="rederive">') and "C.2 re-derive: 1 final answer" in row
        assert '<strong class="final-outcome">pass</strong>' in row and "edited by bob: The memo&#39;s decision" in row
        row = html.split('<tr id="verifier-cites_authorized"')[1].split("</tr>")[0]
        assert '<strong class="final-outcome">pass</strong>' in row and "confirmed by bob" in row
        assert "V 62%" in html and "edit verifier:decision → pass" in html
        # the other C.2 verifiers re-derived and confirmed: the row is reviewed
        rederive = re.findall(r'<tr id="verifier-([^"]+)" class="rederive">', html)
        for vid in set(rederive) - {"decision", "cites_authorized"}:
            assert bob.request("POST", "/qc", {**form, "target": f"verifier:{vid}", "action": "confirm"})[0] == 303

    after = scored()
    assert after["v"] == 62.5 and after["scores"] == dict.fromkeys(RUBRIC_CODES, 2)
    status, evidence = outcome(after, "decision")
    assert status == "pass" and evidence.startswith("QC edit: pass (was fail")
    assert after["grade_status"] == "reviewed"


def test_qc_post_reviewing_a_replaced_grade_is_refused(tmp_path: Path) -> None:
    """The grader regrades while the QC page is open: the reviewer's post names the old grade,
    gets a 409 page saying so, and nothing is stored; the page then offers the new grade."""
    run_dir = tmp_path / "run"
    task, tokens = make_run(run_dir)
    key = (task.id, SYSTEM, 0)
    q = urlencode({"task": task.id, "system": SYSTEM, "attempt": 0})
    with serve(create_grading_app(run_dir)) as port:
        alice, bob, grade = graded_by_alice(port, run_dir, task, tokens)
        status, _, html = bob.request("GET", f"/qc?{q}")  # the reviewer opens the page
        assert status == 200 and 'name="grader" value="alice"' in html
        m = re.search(r'name="graded_at" value="([^"]+)"', html)
        assert m is not None
        opened = m.group(1)
        assert alice.request("POST", "/grade", {**grade, "score_DI": "3", "just_DI": "Regraded."})[0] == 303
        regraded = GradeStore(run_dir).primary_grade(key)
        assert regraded is not None and regraded.created_at != opened

        form = {"csrf": bob.csrf, "task": task.id, "system": SYSTEM, "attempt": "0", "target": "DI",
                "action": "confirm", "grader": "alice", "graded_at": opened}
        status, _, html = bob.request("POST", "/qc", form)
        assert status == 409 and 'id="qc-error"' in html
        assert (f"The grade changed since this page was opened: your action reviewed alice&#39;s grade of {opened}, "
                f"the current grade is alice&#39;s of {regraded.created_at}. Nothing was recorded") in html
        assert f'name="graded_at" value="{regraded.created_at}"' in html  # the page now shows the new grade
        assert GradeStore(run_dir).qc_actions() == []
        # a post naming no grade is refused the same way
        status, _, html = bob.request("POST", "/qc", {k: v for k, v in form.items() if k not in ("grader", "graded_at")})
        assert status == 409 and "the form names none; reload the page" in html
        # an edit too: nothing stored
        edit = {**form, "action": "edit", "score": "1", "justification": "j", "reason": "r"}
        assert bob.request("POST", "/qc", edit)[0] == 409
        assert GradeStore(run_dir).qc_actions() == []

        # naming the current grade, the action is recorded and bound to it
        assert bob.request("POST", "/qc", {**form, "graded_at": regraded.created_at})[0] == 303
        [action] = GradeStore(run_dir).qc_actions()
        assert (action.grader, action.graded_at) == ("alice", regraded.created_at)
        status, _, html = bob.request("GET", "/")
        assert "QC started" in html
        # the grader is told an update makes it stale; another regrade does
        status, _, html = alice.request("GET", f"/grade?{q}")
        assert 'id="qc-note"' in html and "1 QC action(s)" in html
        assert alice.request("POST", "/grade", {**grade, "just_DI": "Regraded again."})[0] == 303
        final = GradeStore(run_dir).final_grade(key)
        assert final is not None and final.status == "unreviewed" and len(final.stale_qc) == 1
        status, _, html = bob.request("GET", f"/qc?{q}")
        assert status == 200 and f"(stale, not applied: reviewed alice&#39;s grade of {regraded.created_at})" in html
        assert "1 stale QC action(s) not applied" in html
        status, _, html = bob.request("GET", "/")
        assert "awaiting QC (earlier QC is stale: regraded)" in html


def test_serve_command_needs_no_corpus_for_a_deliverables_run(setup: dict) -> None:
    with serve_command("--out", str(setup["run"])) as (port, status, html):
        assert status == 200 and 'name="token"' in html
        assert "rubric grading and QC" in html and "human baseline" not in html  # the login page's header too
        assert Client(port).request("GET", f"/grade?{setup['q']}")[0] == 401  # the grading app, not docqa


def test_declared_best_and_star_ratings_over_http(tmp_path: Path) -> None:
    """The grader ticks 'best response'; the QC reviewer gives C.6 star ratings: both reach the
    final grade, stars never change a score, and a bad rating is refused on the page."""
    run_dir = tmp_path / "run"
    task, tokens = make_run(run_dir)
    key = (task.id, SYSTEM, 0)
    q = urlencode({"task": task.id, "system": SYSTEM, "attempt": 0})
    with serve(create_grading_app(run_dir)) as port:
        alice, bob, grade = graded_by_alice(port, run_dir, task, tokens)
        assert GradeStore(run_dir).primary_grade(key).declared_best is False  # type: ignore[union-attr]
        assert alice.request("POST", "/grade", {**grade, "best": "yes"})[0] == 303
        status, _, html = alice.request("GET", f"/grade?{q}")
        assert 'id="best" checked' in html
        graded = GradeStore(run_dir).primary_grade(key)
        assert graded is not None and graded.declared_best
        form = {"csrf": bob.csrf, "task": task.id, "system": SYSTEM, "attempt": "0", "grader": "alice",
                "graded_at": graded.created_at, "action": "rate"}
        status, _, html = bob.request("GET", f"/qc?{q}")
        assert html.count('<tr id="stars-') == 6
        assert bob.request("POST", "/qc", {**form, "target": "stars:verifiers", "score": "4"})[0] == 303
        assert bob.request("POST", "/qc", {**form, "target": "stars:EP", "score": "2"})[0] == 303
        status, _, html = bob.request("POST", "/qc", {**form, "target": "stars:EP", "score": "9"})
        assert status == 400 and "9 is not a star rating" in html
        status, _, html = bob.request("GET", f"/qc?{q}")
        assert '<td class="stars">4</td>' in html.split('<tr id="stars-verifiers">')[1].split("</tr>")[0]
    final = GradeStore(run_dir).final_grade(key)
    assert final is not None and final.stars == {"verifiers": 4, "EP": 2} and final.declared_best
    # ratings are QC of the row, but the C.2 verifiers still await their re-derivation
    assert final.scores == dict.fromkeys(RUBRIC_CODES, 2) and final.status == "pending"
