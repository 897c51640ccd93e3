"""VRS and ACCEPT by hand on two small packages the test writes: a memo (one verifier of each
text kind, a trap, a judged check) and a JSON deliverable (strict JSON, exact value, a figure
and the file's sections in an output file, a trap). Every V, VRS and ACCEPT below is computed in
the comments from the rules of the consulting paper (Eq. 1-3)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.outputs import OutputFileRecord
from deskbench.tracks.deliverables.grades import GradeStore
from deskbench.tracks.deliverables.scoring.deliverables_run import score_run
from deskbench.tracks.deliverables.scoring.rubric import CriterionGrade, RubricGrade
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import QCAction
from deskbench.tracks.deliverables.scoring.rubric_qc_checks import priority_findings
from deskbench.tracks.deliverables.tasks import (
    RUBRIC_CODES,
    DeliverableSubmission,
    DeliverableTask,
    dump_task,
    load_packages,
    parse_task,
    table19_rubric,
)

BASE: dict[str, Any] = {
    "golden": {"answer": "see solution"}, "solution_logic": ["by hand"], "lazy_ai_test": "lazy",
    "expert_test": "expert",
}


def write_package(root: Path, data: dict[str, Any], files: dict[str, str]) -> None:
    pkg = root / data["id"]
    pkg.mkdir(parents=True)
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    task = parse_task({**BASE, **data, "rubric": [c.model_dump() for c in table19_rubric()]}, pkg / "task.yaml")
    (pkg / "task.yaml").write_text(dump_task(task), encoding="utf-8")


MEMO = {
    "id": "memo", "prompt_class": "CRP", "corpus_discipline": "hybrid",
    "prompt": "Decide GO or NO GO on export-only entry; achievable revenue in INR Cr; cite Mordor Intelligence.",
    "inputs": ["market.csv"],
    "authorized_sources": [{"name": "Mordor Intelligence", "kind": "external"}],
    "traps": [{"id": "entry_method", "kind": "default_assumption",
               "description": "The notes restrict entry to exports; a JV flips the decision.",
               "lure": "joint venture", "verifiers": ["no_jv", "decision"]}],
    "verifiers": [
        {"id": "revenue", "kind": "numeric", "label": "Achievable revenue", "range": [1300, 3050], "unit": "crore"},
        {"id": "decision", "kind": "decision_line", "expected": "DECISION: NO GO"},
        {"id": "source", "kind": "regex_present", "pattern": "Mordor Intelligence"},
        {"id": "no_jv", "kind": "regex_absent", "pattern": r"joint venture|manufacturing setup"},
        {"id": "short", "kind": "word_limit", "max_words": 120},
        {"id": "sections", "kind": "section_count", "min_sections": 3},
        {"id": "domains", "kind": "citation_domains", "allowed": ["mordorintelligence.com"]},
        {"id": "assumptions", "kind": "llm_check", "criterion": "States its assumptions."},
    ],
}
SCP = {
    "id": "plan", "prompt_class": "SCP", "corpus_discipline": "closed",
    "prompt": "Write plan.json with the operational unit cost (exclude the INR 7 allocation) and a decision.",
    "inputs": ["costs.csv"],
    "required_outputs": [{"name": "plan.json", "format": "json"}],
    "traps": [{"id": "allocation", "kind": "footnote_override", "description": "INR 7 is non-operational.",
               "lure": "110", "verifiers": ["unit_cost"]}],
    "verifiers": [
        {"id": "strict", "kind": "json_strict", "file": "plan.json",
         "schema": {"unit_cost_operational": "number", "decision": {"recommendation": "string"}}},
        {"id": "recommendation", "kind": "exact_value", "file": "plan.json", "json_path": "decision.recommendation",
         "expected": "ACCEPT"},
        {"id": "unit_cost", "kind": "numeric", "file": "plan.json", "json_path": "unit_cost_operational",
         "expected": 103, "abs_tol": 0.01},
        {"id": "keys", "kind": "file_sections", "file": "plan.json", "sections": ["unit_cost_operational", "decision"]},
    ],
}
GOOD_MEMO = """# GTM decision
## Market
Achievable revenue: INR 1,300 Cr to 3,050 Cr (Mordor Intelligence, https://www.mordorintelligence.com/eu).
## Assumptions
Export-only entry, as the client's notes require.
## Decision
DECISION: NO GO
"""
LAZY_MEMO = """# GTM decision
## Market
Achievable revenue: INR 4,350 Cr through a joint venture (Mordor Intelligence; see
https://stackoverflow.com/questions/13385860).
## Decision
DECISION: GO
"""


def scores(*values: int) -> dict[str, CriterionGrade]:
    return {c: CriterionGrade(code=c, score=v, justification=f"{c} graded {v}")  # type: ignore[arg-type]
            for c, v in zip(RUBRIC_CODES, values, strict=True)}


@pytest.fixture()
def run(tmp_path: Path) -> RunStore:
    root = tmp_path / "packages"
    write_package(root, MEMO, {"market.csv": "segment,share\nOEM,80\nAftermarket,20\n"})
    write_package(root, SCP, {"costs.csv": "item,inr\nTotal reported,110\nAllocation,7\n"})
    store = RunStore(tmp_path / "run")
    store.save_tasks(load_packages(root))
    for system, memo, plan in (("good", GOOD_MEMO, {"unit_cost_operational": 103, "decision": {"recommendation": "ACCEPT"}}),
                               ("lazy", LAZY_MEMO, None)):
        store.record(Episode(task_id="memo", system=system, status="ok",
                             submission=DeliverableSubmission(id="memo", response=memo)))
        files_dir = Path("outputs") / system / "plan" / "0"  # the episode's own folder (runs/outputs.py)
        records = []
        if plan is not None:
            (store.dir / files_dir).mkdir(parents=True)
            (store.dir / files_dir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
            records = [OutputFileRecord(name="plan.json", size=1, sha256="0" * 64)]
        store.record(Episode(task_id="plan", system=system, status="ok", submission=DeliverableSubmission(
            id="plan", response="Plan written." if plan else "I could not write the file.",
            files=records, files_dir=str(files_dir))))
    return store


def grade(store: RunStore, task: str, system: str, *values: int) -> None:
    ep = next(e for e in store.episodes(system) if e.task_id == task)
    GradeStore(store.dir).save_grade(RubricGrade(task_id=task, system=system, grader="sme", source="human",
                                                 criteria=scores(*values), episode_stamp=ep.finished_at))


def items(store: RunStore) -> dict[tuple[str, str], Any]:
    return {(i.system, i.task_id): i for i in asyncio.run(score_run(store))}


def test_vrs_and_accept_by_hand(run: RunStore) -> None:
    grade(run, "memo", "good", 3, 3, 2, 3, 2)
    grade(run, "memo", "lazy", 0, 1, 2, 1, 2)
    grade(run, "plan", "good", 3, 3, 3, 3, 3)
    got = items(run)

    good = got[("good", "memo")]
    # 7 of 8 pass; the judged check has no judge: unobservable, counted as failed -> V = 87.5
    assert (good.passed, good.failed, good.unobservable, good.judged) == (7, 0, 1, 1)
    assert good.v == pytest.approx(87.5)
    # rbar = 13/5 = 2.6; VRS0 = 0.5*87.5 + 0.5*2.6/3*100 = 43.75 + 43.333 = 87.083
    assert good.reasoning_mean == pytest.approx(2.6)
    assert good.vrs_relaxed == pytest.approx(87.0833, abs=1e-3) == good.vrs_strict
    assert good.accept is True and good.auto_reject is False
    assert [(t.id, t.outcome) for t in good.traps] == [("entry_method", "avoided")]

    lazy = got[("lazy", "memo")]
    # passes: source, short, sections (3 of 8); revenue 4,350 out of range, GO, JV, stackoverflow fail
    assert {r.id for r in lazy.verifiers if r.status == "pass"} == {"source", "short", "sections"}
    assert lazy.v == pytest.approx(37.5)
    # rbar = 6/5 = 1.2; VRS0 = 18.75 + 20 = 38.75; DI = 0 -> strict 0, auto-reject
    assert lazy.vrs_relaxed == pytest.approx(38.75) and lazy.vrs_strict == 0.0
    assert lazy.accept is False and lazy.auto_reject is True
    assert [(t.id, t.outcome) for t in lazy.traps] == [("entry_method", "fell")]

    plan = got[("good", "plan")]
    assert plan.v == 100.0 and plan.vrs_strict == pytest.approx(100.0) and plan.accept is True
    assert plan.files_ok is True

    missing = got[("lazy", "plan")]  # ungraded: no VRS, no ACCEPT (could not score, not zero)
    assert missing.scores is None and missing.accept is None and missing.vrs_strict is None
    # plan.json missing: three checks unobservable, the file check fails -> V = 0
    assert (missing.passed, missing.failed, missing.unobservable) == (0, 1, 3)
    assert missing.files_ok is False
    assert [(t.id, t.outcome) for t in missing.traps] == [("allocation", "unobservable")]


def test_judge_qc_edit_and_no_deliverable(run: RunStore) -> None:
    grade(run, "memo", "lazy", 0, 1, 2, 1, 2)
    # QC: DI's justification describes Score-1 behaviour -> Edit to 1 (C.5), and the C.2 verifiers
    # re-derived (confirmed): the row is reviewed
    task = next(t for t in run.tasks_of(DeliverableTask) if t.id == "memo")
    rederived = [QCAction(task_id="memo", system="lazy", target=f.target, action="confirm", reviewer="qc")
                 for f in priority_findings(task, None, {"DI": 0, "AR": 1, "RF": 2, "EP": 1, "FD": 2})]
    GradeStore(run.dir).add_qc([QCAction(task_id="memo", system="lazy", target="DI", action="edit", score=1,
                                         justification="Multiple factual errors: the JV revenue is not in the files.",
                                         reason="justification describes score 1", reviewer="qc"), *rederived])
    # a refusal with nothing delivered: every criterion 0 by rule, without any grader
    run.record(Episode(task_id="plan", system="refuser", status="error", error="content policy refusal"))
    # an empty memo: run on "", the lure check (no_jv, regex_absent) would pass and give V 12.5
    run.record(Episode(task_id="memo", system="refuser", status="ok",
                       submission=DeliverableSubmission(id="memo", response="  \n")))

    async def judge(criterion: str, text: str) -> tuple[bool, str]:
        return ("Assumptions" in text, "has an assumptions section" if "Assumptions" in text else "none")

    async def scored() -> dict[tuple[str, str], Any]:
        from deskbench.tracks.deliverables.scoring.deliverables import score_episodes
        from deskbench.tracks.deliverables.scoring.deliverables_run import grade_inputs

        tasks = {t.id: t for t in run.tasks_of(DeliverableTask)}
        got = await score_episodes(tasks, run.episodes(), run.dir, grades=grade_inputs(run), judge=judge)
        return {(i.system, i.task_id): i for i in got}

    got = asyncio.run(scored())
    good = got[("good", "memo")]
    assert good.v == 100.0 and good.judged == 1  # the judge decided the eighth check
    lazy = got[("lazy", "memo")]
    # the judge says no assumptions: still 3 of 8, the eighth now failed rather than unobservable
    assert lazy.v == pytest.approx(37.5) and (lazy.failed, lazy.unobservable) == (5, 0)
    # after the edit: 1,1,2,1,2 -> rbar 1.4; VRS0 = 18.75 + 23.333 = 42.083; no zero -> strict = relaxed
    assert lazy.scores == {"DI": 1, "AR": 1, "RF": 2, "EP": 1, "FD": 2}
    assert lazy.vrs_strict == pytest.approx(42.0833, abs=1e-3) == lazy.vrs_relaxed
    assert lazy.auto_reject is False and lazy.accept is False and lazy.grade_status == "reviewed"
    refuser = got[("refuser", "plan")]
    assert refuser.grader == "auto:no-deliverable" and refuser.scores == dict.fromkeys(RUBRIC_CODES, 0)
    assert refuser.v == 0.0 and refuser.vrs_relaxed == 0.0 and refuser.accept is False
    empty = got[("refuser", "memo")]
    assert empty.v == 0.0 and empty.vrs_relaxed == 0.0 and empty.failed == len(empty.verifiers) == 8
    assert {r.status for r in empty.verifiers} == {"fail"} and "nothing delivered" in empty.verifiers[0].evidence
    # it did not take the JV lure either: the trap is unobservable, not fallen into
    assert [t.outcome for t in empty.traps] == ["unobservable"]


def test_a_rerun_makes_old_grades_stale(run: RunStore) -> None:
    grade(run, "memo", "good", 3, 3, 3, 3, 3)
    assert items(run)[("good", "memo")].accept is True
    run.record(Episode(task_id="memo", system="good", status="ok",
                       submission=DeliverableSubmission(id="memo", response=LAZY_MEMO)), replace=True)
    again = items(run)[("good", "memo")]
    assert again.scores is None and again.accept is None  # the grade was of the old response
