"""`deskbench report --judge` reads the verdicts `deskbench score --judge` stored with the run
(tracks/docqa/analysis/judged.py, the analyses' reuse): a stored verdict is never asked again, an
answer no scoring judged is, and the method note says how many of each; without a judge the note no
longer claims runs store no verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.report.data import build_report
from deskbench.report.models import Report
from deskbench.runs.store import Episode, RunStore
from deskbench.tracks.docqa.report_models import DocqaSection
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

TASKS = [DocQATask(id=f"t{i}", question=f"Question {i}?", answer_variants=[[f"gold answer {i}"]]) for i in range(6)]
FIRST = {2: "correct", 3: "partial", 4: "incorrect", 5: "correct"}  # the judge when `score` ran


def verdict(judgment: str) -> dict[str, str]:
    """The judge's tool call (MADQA Prompt 4's function), as tests/tracks/docqa/test_llm_judge.py scripts it."""
    return {"kind": "tool", "name": "submit_judgment",
            "arguments": json.dumps({"judgment": judgment, "main_issue": "none", "explanation": "compared"})}


def _record(run: Path, system: str) -> None:
    """t0, t1 exact (never judged); t2-t5 other strings, for the judge."""
    store = RunStore(run)
    if not store.tasks_of(DocQATask):
        store.save_tasks(TASKS)
    for i, task in enumerate(TASKS):
        answer = f"gold answer {i}" if i < 2 else f"{system} says something else {i}"
        store.record(Episode(task_id=task.id, system=system, status="ok",
                             submission=DocQASubmission(id=task.id, answer=[answer], citations=[])))
    store.close()


def docqa(report: Report) -> DocqaSection:
    data = report.section("docqa").data
    assert isinstance(data, DocqaSection)
    return data


def test_report_reuses_the_stored_verdicts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _record(run, "sys")
    phase = {"now": "score"}

    def script(body: dict[str, Any], n: int) -> dict[str, str]:
        q = int(body["messages"][0]["content"].split("Question ")[1].split("?")[0])
        # after `score`, the judge would call everything incorrect: a reused verdict cannot be it
        return verdict(FIRST[q] if phase["now"] == "score" else "incorrect")

    with FakeOpenAI(script=script) as fake:
        judge = f"openai-compat/judge-model@{fake.base_url}"
        proc = run_cli("score", str(run), "--judge", judge, "--no-cache", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["sys"]["accuracy"] == pytest.approx(4.5 / 6)
        assert len(fake.requests) == 4
        _record(run, "late")  # a system run after the scoring: no verdict of it is stored
        phase["now"] = "report"
        report = build_report([run], judge=judge, cache=False)
        # only late's four non-exact answers were asked for
        assert len(fake.requests) == 8
    rows = {s.row.system: s.row for s in docqa(report).systems}
    # sys: 2 exact + stored t2 correct 1 + t3 partial 0.5 + t4 0 + t5 1 = 4.5 of 6 (asked now: 2 of 6)
    assert rows["sys"].accuracy == pytest.approx(4.5 / 6)
    assert rows["late"].accuracy == pytest.approx(2 / 6)
    method = docqa(report).accuracy_method
    scoring_id = RunStore(run, create=False).scorings()[0].id
    assert f"Verdicts: 4 read from the runs' stored scorings with this judge (run#{scoring_id}), 4 asked now." in method


def test_without_a_judge_the_note_says_stored_verdicts_are_read(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _record(run, "sys")
    method = docqa(build_report([run])).accuracy_method
    assert "store no judge verdicts" not in method
    assert "stored with the run are read back" in method
