"""docqa's reliability across attempts end to end: two guess runs with scripted models and
--attempts 3, `score` printing pass^3 and the consistency of answers, `compare --json` and its
page testing the pair on pass^3. Figures computed by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.tracks.docqa.scoring.docqa_attempts import answer_key
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

TASKS = [DocQATask(id=f"q{i}", question=f"Question {i}?", answer_variants=[["yes"]]) for i in range(3)]
# per task, the answer of attempts 0, 1, 2
ALPHA = {"q0": ["yes", "yes", "yes"], "q1": ["yes", "no", "yes"], "q2": ["no", "no", "no"]}
BETA = {"q0": ["yes", "yes", "yes"], "q1": ["Yes", "yes ", "YES"], "q2": ["no", "No", " no"]}


def _run(tmp_path: Path, name: str, answers: dict[str, list[str]]) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    calls: dict[str, int] = {}

    def script(body: dict, n: int) -> dict[str, object]:
        text = json.dumps(body["messages"])
        task = next(t.id for t in TASKS if t.question in text)
        attempt = calls.get(task, 0)
        calls[task] = attempt + 1
        return {"kind": "text", "text": json.dumps({"answer": [answers[task][attempt]], "citations": []})}

    out = tmp_path / name
    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--tasks", str(tasks), "--agent", "guess", "--model", f"openai-compat/fake@{fake.base_url}",
                       "--out", str(out), "--concurrency", "1", "--quiet", "--attempts", "3")
    assert proc.returncode == 0, proc.stderr
    return out


def test_answer_key_normalises_as_anls_and_ignores_order() -> None:
    assert answer_key(DocQASubmission(id="q", answer=[" Paris ", "LONDON"])) == answer_key(
        DocQASubmission(id="q", answer=["london", "paris"])) == "london | paris"
    assert answer_key(None) == ""


def test_score_and_compare_show_pass_hat_and_consistency(tmp_path: Path) -> None:
    alpha, beta = _run(tmp_path, "alpha", ALPHA), _run(tmp_path, "beta", BETA)
    scored = run_cli("score", str(alpha), "--json")
    assert scored.returncode == 0, scored.stderr
    r = json.loads(scored.stdout)["guess:openai-compat/fake"]["attempts"]["reliability"]
    # alpha: q0 3 of 3, q1 2 of 3, q2 0 of 3 -> pass^3 = 1/3; pass^1 = (1 + 2/3 + 0) / 3 = 5/9;
    # pass^2 = (1 + C(2,2)/C(3,2) + 0) / 3 = (1 + 1/3) / 3 = 4/9; answers agree on q0 and q2, not q1
    assert r["pass_hat"] == pytest.approx(1 / 3) and r["solved"] == [1, 0, 1, 1]
    assert r["curve"] == [pytest.approx(5 / 9), pytest.approx(4 / 9), pytest.approx(1 / 3)]
    assert (r["consistency"], r["n_consistency"]) == (pytest.approx(2 / 3), 3)
    text = run_cli("score", str(beta))
    assert text.returncode == 0, text.stderr
    # beta: q0 and q1 right every time, q2 never; its answers agree once normalised (case, spaces)
    assert ("reliability (k=3): pass^3 66.7 over 3 tasks with 3 scored attempts (every attempt correct); "
            "pass^1..3 66.7 66.7 66.7; tasks solved 0..3 times 1/0/0/2; same answer every attempt 100.0 of 3 tasks"
            in " ".join(text.stdout.split()))
    page = tmp_path / "compare.html"
    cmp = run_cli("compare", str(alpha), str(beta), "--json", "--output", str(page))
    assert cmp.returncode == 0, cmp.stderr
    held = json.loads(cmp.stdout)["reliability"]
    assert held["k"] == 3
    assert {x["system"]: x["pass_hat"] for x in held["rows"]} == {
        "guess:openai-compat/fake (alpha)": pytest.approx(1 / 3), "guess:openai-compat/fake (beta)": pytest.approx(2 / 3)}
    (p,) = held["pairs"]
    # every attempt right: both on q0, beta alone on q1, neither on q2 -> b10 = 0, b01 = 1, diff -1/3
    assert (p["n_paired"], p["both"], p["a_only"], p["b_only"], p["neither"]) == (3, 1, 0, 1, 1)
    assert p["mcnemar_p"] == 1.0 and p["mean_diff"] == pytest.approx(-1 / 3)
    html = page.read_text()
    assert 'id="comparison-docqa-reliability"' in html and 'id="comparison-docqa-reliability-pairs"' in html
    terminal = run_cli("compare", str(alpha), str(beta))
    assert "reliability across attempts (k=3)" in terminal.stdout and "pairs on pass^3" in terminal.stdout


def test_report_shows_the_reliability_of_docqa_runs(tmp_path: Path) -> None:
    alpha, beta = _run(tmp_path, "alpha", ALPHA), _run(tmp_path, "beta", BETA)
    page = tmp_path / "report.html"
    proc = run_cli("report", str(alpha), str(beta), "--output", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    table = html.split('id="comparison-docqa-reliability"')[1].split("</table>")[0]
    # alpha pass^3 33.3 (1 of 3 tasks), beta 66.7 (2 of 3); beta first
    assert table.index("(beta)") < table.index("(alpha)") and "66.7" in table and "33.3" in table


def test_report_of_one_system_shows_its_reliability(tmp_path: Path) -> None:
    alpha = _run(tmp_path, "alpha", ALPHA)
    page = tmp_path / "report.html"
    proc = run_cli("report", str(alpha), "--output", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    section = html.split('<section id="reliability-docqa">')[1].split("</section>")[0]
    # pass^3 1 of 3 tasks; solved 0..3 times: q2, none, q1, q0
    assert "33.3" in section and "1 / 0 / 1 / 1" in section and "66.7 of 3" in section
