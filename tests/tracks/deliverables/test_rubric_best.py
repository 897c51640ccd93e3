"""The SME's declared best response (§4.4): the `best` column first, else "Response N",
"Response - N" or "RN" in the comments, numbered as the grader saw the responses."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from test_rubric import FSP, GOOD_ROW, SCP, episode_of, graded_run, write_csv

from deskbench.errors import UserError
from deskbench.tracks.deliverables.grades import GradeStore
from deskbench.tracks.deliverables.scoring.rubric_best import (
    CommentGrade,
    comment_picks,
    declared_best,
)
from deskbench.tracks.deliverables.scoring.rubric_csv import (
    GRADE_COLUMNS,
    export_template,
    import_grades,
)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """test_rubric's run: two tasks x (sys-good, sys-lazy), and sys-broken's error episode."""
    return graded_run(tmp_path)


@pytest.mark.parametrize(("comment", "picks"), [
    # the paper's three forms
    ("Response 2 is the strongest: correct decision, every file produced.", [2]),
    ("Best overall: Response - 3 (the others miss the fuel trap).", [3]),
    ("R1 clearly best; the memo is executive-ready.", [1]),
    # their usual spellings
    ("response 2 wins", [2]), ("Response-2 wins", [2]), ("Response \u2013 2 wins", [2]),
    ("Response #3 best", [3]), ("Response: 1 best", [1]), ("best is R3.", [3]), ("(R2)", [2]), ("R2: best", [2]),
    # two responses named: both found (declared_best then calls it ambiguous)
    ("Response 2 is stronger than Response 1", [2, 1]), ("R3 > R1", [3, 1]), ("R2, then Response 2 again", [2]),
    # near misses that must not match
    ("Responses 1-3 all cite the draft policy.", []),
    ("R2 = 0.91 between volume and cost.", []), ("R2 of 0.87 on the fitted curve", []), ("R2: 0.87", []),
    ("R2 score is low", []), ("adjusted R2=0.5", []),
    ("R2D2", []), ("the FR2 filing", []), ("R&D spend", []), ("r2 looks best", []), ("R2.5 revision", []),
    ("Response time 2 minutes", []), ("non-response 2", []), ("Response 2a of the survey", []),
    ("responsive 2", []), ("R-2 form", []), ("RR2", []), ("", []),
])
def test_comment_patterns(comment: str, picks: list[int]) -> None:
    assert comment_picks(comment) == picks


def cg(system: str, comment: str = "", best: bool = False, responses: list[str] | None = None,
       task: str = "t1") -> CommentGrade:
    return CommentGrade(task_id=task, system=system, comment=comment, declared_best=best, responses=responses or [])


SYSTEMS = ["claude", "gemini", "o3"]  # Response 1, 2, 3 (name order)


def test_declared_best_column_first_then_comments() -> None:
    picks = declared_best([cg("claude", "R3 is best"), cg("gemini", best=True), cg("o3")], SYSTEMS)
    assert (picks[("t1", 0)].system, picks[("t1", 0)].source) == ("gemini", "column")  # the column wins
    pick = declared_best([cg("claude", "R3 is best"), cg("gemini", "agree, Response - 3"), cg("o3")], SYSTEMS)[("t1", 0)]
    assert (pick.system, pick.source) == ("o3", "comment") and "response 3 (o3)" in pick.evidence
    # a grade keeps the numbering its grader saw: Response 1 was then o3
    pick = declared_best([cg("o3", "Response 1", responses=["o3", "zeta"])], SYSTEMS)[("t1", 0)]
    assert pick.system == "o3"
    # nothing declared: no entry
    assert declared_best([cg("claude", "fine"), cg("o3")], SYSTEMS) == {}


@pytest.mark.parametrize(("grades", "why"), [
    ([cg("claude", "Response 2 is stronger than Response 1")], "ambiguous"),
    ([cg("claude", "R1"), cg("o3", "R3")], "comments name different responses"),
    ([cg("claude", "Response 4 is best")], "the task has responses 1-3"),
    ([cg("claude", best=True), cg("o3", best=True)], "several grades"),
])
def test_undecided_tasks_say_why(grades: list[CommentGrade], why: str) -> None:
    pick = declared_best(grades, SYSTEMS)[("t1", 0)]
    assert pick.system is None and why in pick.evidence


def filled(run_dir: Path, path: Path, comments: dict[tuple[str, str], str]) -> Path:
    export_template(GradeStore(run_dir), path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    for r in rows:
        r.update({k: v for k, v in GOOD_ROW.items() if k not in ("task_id", "system", "attempt")})
        r["comment"] = comments.get((r["task_id"], r["system"]), "")
    return write_csv(path, GRADE_COLUMNS, rows)


def test_export_numbers_responses_and_comments_pick_the_best(run: Path, tmp_path: Path) -> None:
    """The run's systems: sys-broken (Response 1, no ok episode), sys-good (2), sys-lazy (3)."""
    path = tmp_path / "grades.csv"
    export_template(GradeStore(run), path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert {(r["system"], r["response"]) for r in rows} == {("sys-good", "Response 2"), ("sys-lazy", "Response 3")}

    store = GradeStore(run)
    grades = import_grades(store, filled(run, path, {(FSP, "sys-lazy"): "Weaker than R2, which is the best.",
                                                     (SCP, "sys-good"): "Response - 3 is best here."}))
    assert all(g.responses == ["sys-broken", "sys-good", "sys-lazy"] for g in grades)
    finals = store.final_grades()
    assert finals[(FSP, "sys-good", 0)].declared_best and not finals[(FSP, "sys-lazy", 0)].declared_best
    assert finals[(SCP, "sys-lazy", 0)].declared_best and finals[(SCP, "sys-lazy", 0)].best_source == "comment"
    assert finals.best[(FSP, 0)].system == "sys-good"
    # a system filter still reads the other systems' comments
    assert store.final_grades("sys-good")[(FSP, "sys-good", 0)].declared_best


def test_a_stale_response_number_is_refused(run: Path, tmp_path: Path) -> None:
    row = {**GOOD_ROW, "response": "Response 1"}  # sys-good is Response 2
    path = write_csv(tmp_path / "g.csv", GRADE_COLUMNS, [row])
    with pytest.raises(UserError) as exc:
        import_grades(GradeStore(run), path)
    msg = str(exc.value)
    assert "\n" not in msg and "line 2, column response: says Response 1, but sys-good is Response 2" in msg
    assert "export the template again" in msg
    with pytest.raises(UserError, match="column response: 'first' is not a response number"):
        import_grades(GradeStore(run), write_csv(tmp_path / "h.csv", GRADE_COLUMNS, [{**row, "response": "first"}]))
    (g,) = import_grades(GradeStore(run), write_csv(tmp_path / "ok.csv", GRADE_COLUMNS, [{**row, "response": "2"}]))
    assert g.episode_stamp == episode_of(run, FSP, "sys-good").finished_at
