"""Every number traceable: what `deskbench score` (and `run`) computed is kept in the run store
(runs/scorings.py), and the viewer shows the latest stored scoring of each episode, naming it,
instead of rescoring offline: a judged docqa run shows the judge's verdicts, not ANLS*; an
analytics QA item only a judge decides shows its verdict, not "unscored"; a re-score with other
settings becomes the one shown on the next page load, as does a rubric grade given while the
viewer runs; `info RUNDIR` lists the scorings; an older run file gets the tables on open. And the
viewer's output files: a chart image served inline, other files as downloads, files named by
their position only."""

from __future__ import annotations

import hashlib
import html
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_operator_corpus
from fake_openai import FakeOpenAI
from fastapi.testclient import TestClient

from deskbench.runs.store import RunStore
from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app

AGENT, JUDGE = "agent", "judge"
SYSTEM = f"bm25-agent:openai-compat/{AGENT}"
TASKS = [  # (id, question, gold, the agent's answer): ANLS* says q1 right, q2 wrong; the judge says partial, correct
    ("q1", "Which vehicle rental rates are given for the winter season (scorings-1)?", "Mountain car", "Mountain car hire"),
    ("q2", "Which helicopter model is listed besides the Bell 407 (scorings-2)?", "Bell 412", "Bell 412 helicopter"),
]
VERDICTS = {"q1": ("partial", "Hire adds a word the gold lacks — «partial» (scorings-why-1)."),
            "q2": ("correct", "The model is the Bell 412; the extra word is harmless (scorings-why-2).")}
ROW = re.compile(r'<tr class="outcome-(\w+)" data-task="([^"]+)" data-system="([^"]+)">(.*?)</tr>', re.S)


def cli(*args: str, cache: Path) -> Any:
    quiet = ("--quiet",) if args[0] == "run" else ()
    proc = run_cli(*args, *quiet, "--json", env={"DESKBENCH_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def docqa_script(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The agent answers at once; the judge answers by the question in its prompt."""
    asked = json.dumps(body["messages"], ensure_ascii=False)
    task_id, _, _, answer = next(t for t in TASKS if t[1] in asked)
    if body["model"] == JUDGE:
        verdict, why = VERDICTS[task_id]
        return {"kind": "tool", "name": "submit_judgment", "arguments": json.dumps(
            {"judgment": verdict, "main_issue": "none", "explanation": why}, ensure_ascii=False)}
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(
        {"answer": [answer], "citations": [{"file": "alpha.pdf", "page": 1}]})}


def judged_docqa_run(root: Path) -> dict[str, Any]:
    """A docqa run scored when it ended (no judge: ANLS*), then `score --judge` (the fake judge):
    the run directory, the two reports (`plain`, `judged`) and a viewer login token."""
    corpus = write_operator_corpus(root)
    (root / "tasks.jsonl").write_text("".join(json.dumps(
        {"id": i, "question": q, "answer_variants": [[g]], "evidence": [{"document": "alpha.pdf", "page": 1}]}) + "\n"
        for i, q, g, _ in TASKS))
    out, cache = root / "run", root / "cache"
    with FakeOpenAI(script=docqa_script) as fake:
        model = f"openai-compat/{AGENT}@{fake.base_url}"
        judge = f"openai-compat/{JUDGE}@{fake.base_url}"
        plain = cli("run", "--agent", "bm25-agent", "--tasks", str(root / "tasks.jsonl"), "--corpus", str(corpus.root),
                    "--view", "text", "--out", str(out), "--model", model, "--concurrency", "1", cache=cache)
        judged = cli("score", str(out), "--judge", judge, cache=cache)
    token = WebStore(out).add_user("ann")
    return {"out": out, "cache": cache, "judge": judge, "plain": plain[SYSTEM], "judged": judged[SYSTEM],
            "token": token}


@pytest.fixture(scope="module")
def docqa(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return judged_docqa_run(tmp_path_factory.mktemp("scorings"))


def viewer(*runs: Path, token: str) -> TestClient:
    c = TestClient(create_viewer_app(list(runs)))
    page = c.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    r = c.post("/login", data={"csrf": csrf.group(1), "token": token}, follow_redirects=False)
    assert r.status_code == 303
    return c


def rows(c: TestClient) -> dict[str, tuple[str, list[str]]]:
    """task -> (outcome, the row's cells as text)."""
    page = c.get("/").text
    return {html.unescape(task): (outcome, [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
                                            for cell in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)])
            for outcome, task, _, body in ROW.findall(page)}


def episode(c: TestClient, run: Path, task: str, system: str = SYSTEM) -> str:
    r = c.get("/episode", params={"run": run.name, "system": system, "task": task, "attempt": 0})
    assert r.status_code == 200, r.text[:300]
    return r.text


def score_box(page: str) -> str:
    found = re.search(r'<section class="score-box[^"]*" id="score">(.*?)</section>', page, re.S)
    assert found is not None
    return html.unescape(found.group(1))


def test_a_judged_docqa_run_shows_the_judges_verdicts(docqa: dict[str, Any]) -> None:
    out = docqa["out"]
    store = RunStore(out, create=False)
    first, second = store.scorings()
    assert first.settings.flags == {"kuiper_ties": "robust", "effort": "steps"} and "judge" not in first.settings.flags
    assert second.settings.flags["judge"] == docqa["judge"] and second.track == "docqa"
    assert second.reports[SYSTEM]["accuracy"] == docqa["judged"]["accuracy"]  # the report the user saw, kept
    assert store.latest_scoring() == second
    _, item = store.scored_item("q1", SYSTEM) or (None, None)
    assert item is not None and item.row["judge"]["llm_judge"]["verdict"] == "partial"
    assert item.row["question"] == TASKS[0][1] and item.row["prediction"]["answer"] == [TASKS[0][3]]
    # what ANLS* said when the run ended, and what the judge said: they differ on both items
    assert docqa["plain"]["accuracy"] == 0.5 and docqa["judged"]["accuracy"] == 0.75

    c = viewer(out, token=docqa["token"])
    shown = rows(c)
    assert shown["q1"][0] == "correct" and shown["q1"][1][5] == "0.50"  # the judge's partial, not ANLS*'s 1
    assert shown["q2"][0] == "correct" and shown["q2"][1][5] == "1.00"  # ANLS* said wrong
    assert all(cells[11] == f"#{second.id}" for _, cells in shown.values())
    scores = [float(cells[5]) for _, cells in shown.values()]
    assert sum(scores) / len(scores) == docqa["judged"]["accuracy"]  # the number the user saw, from its episodes
    box = score_box(episode(c, out, "q1"))
    assert f"Scored by scoring #{second.id} (judge {docqa['judge']}), scored {second.when}" in box
    assert VERDICTS["q1"][1] in box and "judge verdict" in box and "ANLS*" in box


def test_a_rescore_with_other_settings_is_shown_on_the_next_load(docqa: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "run"
    import shutil

    shutil.copytree(docqa["out"], out)
    c = viewer(out, token=docqa["token"])
    assert rows(c)["q2"][0] == "correct"
    again = cli("score", str(out), cache=docqa["cache"])  # no judge: ANLS* >= 0.5
    assert again[SYSTEM]["accuracy"] == 0.5
    shown = rows(c)  # the same viewer, the next page load
    assert shown["q2"][0] == "wrong" and shown["q1"][1][5] == "1.00" and shown["q2"][1][11] == "#3"
    box = score_box(episode(c, out, "q2"))
    assert "Scored by scoring #3 (ANLS* >= 0.5, no judge)" in box and VERDICTS["q2"][1] not in box
    # info RUNDIR: every scoring, when and with which settings, a headline per system
    info = run_cli("info", str(out))
    assert info.returncode == 0, info.stderr
    lines = info.stdout
    assert "scorings (3" in lines and f"judge {docqa['judge']}" in lines and "ANLS* >= 0.5, no judge" in lines
    assert f"{SYSTEM}: 2 items, 2 scored, 2 correct (100.0%), mean score 0.750, 0 unscored" in " ".join(lines.split())
    data = json.loads(run_cli("info", str(out), "--json").stdout)
    assert [s["id"] for s in data["scorings"]] == [1, 2, 3]
    assert data["scorings"][2]["systems"][SYSTEM] == {"items": 2, "scored": 2, "correct": 1, "mean_score": 0.5}


def test_a_rerun_episode_falls_back_to_the_offline_scorer_labelled(docqa: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    out = tmp_path / "run"
    shutil.copytree(docqa["out"], out)
    with sqlite3.connect(out / RunStore.FILENAME) as con:  # q2 ran again after the scoring (as --rerun does)
        con.execute("UPDATE episodes SET finished_at = '2999-01-01T00:00:00.000+00:00' WHERE task_id = 'q2'")
    c = viewer(out, token=docqa["token"])
    shown = rows(c)
    assert shown["q1"][1][11] == "#2" and shown["q2"][1][11] == "offline"
    assert shown["q2"][0] == "wrong"  # ANLS*, offline
    box = score_box(episode(c, out, "q2"))
    assert "the track's default scorer, offline (no judge): the episode was run again after scoring #2" in box


def test_a_predictions_file_records_nothing_and_old_run_files_get_the_tables(docqa: dict[str, Any],
                                                                             tmp_path: Path) -> None:
    import shutil

    out = tmp_path / "old"
    shutil.copytree(docqa["out"], out)
    with sqlite3.connect(out / RunStore.FILENAME) as con:  # a run file from before scorings were kept
        con.execute("DROP TABLE scoring_items")
        con.execute("DROP TABLE scorings")
    store = RunStore(out, create=False)
    assert store.scorings() == [] and store.latest_scoring() is None and store.scored_item("q1", SYSTEM) is None
    c = viewer(out, token=docqa["token"])
    shown = rows(c)
    assert {cells[11] for _, cells in shown.values()} == {"offline"} and shown["q2"][0] == "wrong"
    assert "no stored scoring covers it" in score_box(episode(c, out, "q1"))
    cli("score", str(out), cache=docqa["cache"])
    assert [s.id for s in RunStore(out, create=False).scorings()] == [1]
    assert rows(c)["q1"][1][11] == "#1"
    # a predictions file has no store: scoring it writes nothing anywhere
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "q1", "answer": ["Mountain car"], "citations": []}) + "\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q1", "question": TASKS[0][1], "answer_variants": [["Mountain car"]],
                                 "evidence": [{"document": "alpha.pdf", "page": 1}]}) + "\n")
    proc = run_cli("score", str(preds), "--tasks", str(tasks), "--json")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old", "preds.jsonl", "tasks.jsonl"]


# -- analytics: a QA item only a judge decides; output files ----------------------------------

QA_REASON = "The conclusion names the largest quarter as the reference does (scorings-qa)."
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


@pytest.fixture(scope="module")
def analytics(bwrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """analyst-agent on a QA task (answered in words: the deterministic check cannot decide it) and
    a chart task (a real matplotlib PNG, plus an SVG with a script and an HTML file named .png);
    scored without a judge when the run ended, then `score --judge` (the QA judge says 1)."""
    from deskbench.tracks.analytics.generate.tasks import generate_analytics
    from deskbench.tracks.analytics.tasks import read_tasks

    root = tmp_path_factory.mktemp("analytics-scorings")
    generate_analytics(root / "tasks", tasks=11, seed=5)
    picked = [t for t in read_tasks(root / "tasks" / "tasks.jsonl").items
              if t.template in ("qa_quarter_total", "viz_city_bar_cjk")]
    (root / "tasks" / "two.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in picked))
    qa, chart = sorted(picked, key=lambda t: t.category != "qa")
    draw = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.bar(['a', 'b'], [1, 2])\nplt.savefig('/mnt/result/chart.png')\n"
            f"open('/mnt/result/evil.svg', 'w').write({SVG!r})\n"
            "open('/mnt/result/fake.png', 'w').write('<html><script>alert(2)</script></html>')\n")

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if body["model"] == JUDGE:
            return {"kind": "text", "text": json.dumps({"score": 1, "reason": QA_REASON})}
        is_qa = qa.instruction in json.dumps(body["messages"], ensure_ascii=False)
        if not any(m["role"] == "tool" for m in body["messages"]):
            code = "print('looked')" if is_qa else draw
            return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": code})}
        return {"kind": "text", "text": "Final answer: the fourth quarter is the largest." if is_qa else "Chart saved."}

    out, cache = root / "run", root / "cache"
    with FakeOpenAI(script=script) as fake:
        cli("run", "--agent", "analyst-agent", "--tasks", str(root / "tasks" / "two.jsonl"), "--out", str(out),
            "--model", f"openai-compat/{AGENT}@{fake.base_url}", "--concurrency", "1", cache=cache)
        c = viewer(out, token=WebStore(out).add_user("ann"))
        before = rows(c)
        cli("score", str(out), "--judge", f"openai-compat/{JUDGE}@{fake.base_url}", cache=cache)
    return {"out": out, "qa": qa, "chart": chart, "client": c, "before": before,
            "system": f"analyst-agent:openai-compat/{AGENT}"}


def test_an_analytics_qa_item_judged_shows_its_verdict_not_unscored(analytics: dict[str, Any]) -> None:
    qa, c = analytics["qa"], analytics["client"]
    assert analytics["before"][qa.id][0] == "unscored" and analytics["before"][qa.id][1][11] == "#1"
    after = rows(c)  # the viewer that showed scoring #1, on its next load
    assert after[qa.id][0] == "correct" and after[qa.id][1][5] == "1.00" and after[qa.id][1][11] == "#2"
    box = score_box(episode(c, analytics["out"], qa.id, analytics["system"]))
    assert "Scored by scoring #2 (judge openai-compat/judge@" in box and QA_REASON in box
    store = RunStore(analytics["out"], create=False)
    scoring, item = store.scored_item(qa.id, analytics["system"]) or (None, None)
    assert scoring is not None and item is not None and item.outcome == "correct"
    assert item.row["judge"]["qa_judge"]["reasoning"] == QA_REASON and scoring.reports[analytics["system"]]["k"] == 1


def test_output_files_a_chart_inline_the_rest_as_downloads(analytics: dict[str, Any]) -> None:
    c, out, chart, system = analytics["client"], analytics["out"], analytics["chart"], analytics["system"]
    page = episode(c, out, chart.id, system)
    files = dict(re.findall(r'<li class="output-file" data-n="(\d+)"><code>([^<]+)</code>', page))
    by_name = {name: n for n, name in files.items()}
    assert set(by_name) == {"chart.png", "evil.svg", "fake.png"}
    base = {"run": out.name, "system": system, "task": chart.id, "attempt": "0"}
    img = re.findall(r'<img src="(/output\?[^"]+)"', page)
    assert len(img) == 1 and f"n={by_name['chart.png']}" in html.unescape(img[0])  # only the real image inline
    r = c.get(html.unescape(img[0]))
    (ep,) = [e for e in RunStore(out, create=False).episodes(system) if e.task_id == chart.id]
    result = out / ep.submission.files_dir  # type: ignore[union-attr]
    on_disk = (result / "chart.png").read_bytes()
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content == on_disk
    assert r.headers["content-disposition"].startswith("inline") and "default-src 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    for name in ("evil.svg", "fake.png"):  # neither is served as what it claims: a download, as bytes
        r = c.get("/output", params={**base, "n": by_name[name]})
        assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
        assert r.headers["content-disposition"].startswith("attachment")
    assert hashlib.sha256(c.get("/output", params={**base, "n": by_name["evil.svg"]}).content).hexdigest() == \
        hashlib.sha256(SVG.encode()).hexdigest()
    listed = re.search(rf'data-n="{by_name["evil.svg"]}">(.*?)</li>', page, re.S)
    assert listed is not None and "download</a>" in listed.group(1) and "<img" not in listed.group(1)
    assert f"({len(SVG.encode()):,} bytes)" in listed.group(1)
    # files are named by position only: not a position is a 400 (web/params.py), a position with no
    # file or another episode a 404
    for n in ("../run.sqlite", "/etc/passwd", "-1", "0x0", "1e0", ""):
        assert c.get("/output", params={**base, "n": n}).status_code == 400, n
    assert c.get("/output", params={**base, "n": "99"}).status_code == 404
    assert c.get("/output", params={**base, "n": "0", "attempt": "../0"}).status_code == 400
    assert c.get("/output", params={**base, "n": "0", "task": "no-such-task"}).status_code == 404
    # a listed file swapped for a symlink out of the run directory is refused
    target = result / "fake.png"
    outside = out.parent / "secret.txt"
    outside.write_text("secret")
    target.unlink()
    target.symlink_to(outside)
    assert c.get("/output", params={**base, "n": by_name["fake.png"]}).status_code == 404
    c2 = TestClient(create_viewer_app([out]))  # not logged in
    assert c2.get("/output", params={**base, "n": by_name["chart.png"]}).status_code == 401


# -- deliverables: a rubric grade given while the viewer runs -----------------------------------


def test_a_rubric_grade_given_while_the_viewer_runs_is_shown_on_the_next_load(tmp_path: Path) -> None:
    from test_transcripts_tracks import deliverables_run

    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.rubric import CriterionGrade, RubricGrade
    from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

    run = deliverables_run(tmp_path)  # scored with the llm_check judge when it ended: scoring #1, ungraded
    c = viewer(run.out, token=WebStore(run.out).add_user("ann"))
    before = rows(c)[run.task_id]
    assert before[0] == "unscored" and before[1][11] == "#1"
    box = score_box(episode(c, run.out, run.task_id, run.system))
    assert "Scored by scoring #1 (judge openai-compat/judge@" in box and "not graded yet" in box
    assert "(judged)" in box  # the llm_check verifier the judge decided, from the stored row

    (ep,) = RunStore(run.out, create=False).episodes(run.system)
    GradeStore(run.out).save_grade(RubricGrade(
        task_id=run.task_id, system=run.system, grader="sme", source="human", episode_stamp=ep.finished_at,
        criteria={code: CriterionGrade(code=code, score=3, justification=f"{code} graded 3 (scorings-grade)")
                  for code in RUBRIC_CODES}))
    after = rows(c)[run.task_id]  # the same viewer, the next load: the grade is applied (offline, labelled)
    assert after[0] != "unscored" and after[1][11] == "offline"
    box = score_box(episode(c, run.out, run.task_id, run.system))
    assert "its grade changed after scoring #1" in box and "Rubric (0–3)" in box
    cli("score", str(run.out), cache=tmp_path / "cache")  # scored again: the stored scoring holds again
    again = rows(c)[run.task_id]
    assert again[1][11] == "#2" and again[0] == after[0] and again[1][5] == after[1][5]
    assert "scorings-grade" in score_box(episode(c, run.out, run.task_id, run.system))  # the grade's justifications
