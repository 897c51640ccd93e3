"""`deskbench compare`: one leaderboard over the tasks every system ran, exact McNemar with Holm,
a paired bootstrap, effect sizes, for every track (issue 21 item 4). Runs are built directly in
run stores with known outcomes; the p-values are checked against scipy's exact binomial test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from deskbench.analysis.compare import Comparison, SystemOutcomes, compare
from deskbench.contract.registry import tracks
from deskbench.runs.outcomes import ItemOutcome
from deskbench.runs.store import Episode, RunStore
from deskbench.runs.track_outcomes import outcomes_of
from deskbench.tracks.analytics.outcomes import analytics_outcomes
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

TASKS = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[[f"answer {i}"]]) for i in range(12)]

# which tasks each system answers correctly (the others: a wrong answer, or a failed episode)
CORRECT = {
    "A": set(range(10)),  # t0-t9
    "B": {0, 1, 2, 3, 10},
    "C": {0, 1, 2, 3, 4, 5, 10, 11},
}
# A vs B: b10 = t4-t9 (6), b01 = t10 (1); A vs C: b10 = t6-t9 (4), b01 = t10, t11 (2);
# B vs C: b10 = 0, b01 = t4, t5, t11 (3)
DISCORDANT = {("A", "B"): (6, 1), ("A", "C"): (4, 2), ("B", "C"): (0, 3)}


def docqa_run(run_dir: Path, system: str, correct: set[int], *, tasks: range = range(12), failed: int | None = None) -> Path:
    """One docqa system: a right answer on `correct`, a wrong one elsewhere; `failed`: that task's
    episode ended in an error (scored 0). Only `tasks` have episodes."""
    store = RunStore(run_dir)
    store.save_tasks(TASKS)
    for i in tasks:
        if i == failed:
            store.record(Episode(task_id=f"t{i}", system=system, status="error", error="ValueError: boom"))
            continue
        answer = f"answer {i}" if i in correct else "something else"
        store.record(Episode(task_id=f"t{i}", system=system, status="ok",
                             submission=DocQASubmission(id=f"t{i}", question=f"q{i}?", answer=[answer])))
    store.close()
    return run_dir


def _json(*args: str) -> dict:
    proc = run_cli("compare", *args, "--json", "--resamples", "200")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_docqa_outcomes_reuse_the_scorer(tmp_path: Path) -> None:
    run = docqa_run(tmp_path / "r", "s", {0, 1}, tasks=range(4), failed=3)
    store = RunStore(run, create=False)
    got = {o.task_id: o for o in outcomes_of(store, "s")}
    store.close()
    assert sorted(got) == ["t0", "t1", "t2", "t3"]  # only the tasks it ran
    assert (got["t0"].score, got["t0"].correct) == (1.0, True)
    assert (got["t2"].score, got["t2"].correct) == (0.0, False)
    assert (got["t3"].status, got["t3"].score, got["t3"].correct) == ("scored", 0.0, False)  # a failed episode is wrong
    assert {"docqa", "analytics", "deliverables"} <= set(tracks())


def test_two_docqa_runs_mcnemar_is_scipys_exact_binomial(tmp_path: Path) -> None:
    from scipy.stats import binomtest
    a = docqa_run(tmp_path / "runA", "bm25-agent:m", CORRECT["A"])
    b = docqa_run(tmp_path / "runB", "bm25-agent:m", CORRECT["B"])
    data = _json(str(a), str(b))
    assert [s["label"] for s in data["systems"]] == ["bm25-agent:m (runA)", "bm25-agent:m (runB)"]
    (pair,) = data["pairs"]
    assert (pair["a_only"], pair["b_only"], pair["both"], pair["neither"]) == (6, 1, 4, 1)
    assert pair["mcnemar_p"] == pytest.approx(binomtest(6, 7, 0.5).pvalue, rel=1e-12)
    assert pair["p_holm"] == pair["mcnemar_p"]  # one pair: Holm changes nothing
    assert pair["mean_diff"] == pytest.approx((10 - 5) / 12)
    lo, hi = pair["mean_diff_ci"]
    assert lo <= pair["mean_diff"] <= hi
    assert pair["odds_ratio"] == 6.0
    board = {r["system"]: r for r in data["leaderboard"]}
    assert board["bm25-agent:m (runA)"]["rank"] == 1 and board["bm25-agent:m (runA)"]["accuracy"] == pytest.approx(10 / 12)
    assert board["bm25-agent:m (runB)"]["n_correct"] == 5 and data["common_tasks"] == [f"t{i}" for i in range(12)]
    # the same seed gives the same interval
    assert _json(str(a), str(b))["pairs"][0]["mean_diff_ci"] == pair["mean_diff_ci"]


def test_holm_over_three_systems_by_hand(tmp_path: Path) -> None:
    from scipy.stats import binomtest
    runs = [docqa_run(tmp_path / name, f"sys-{name}", CORRECT[name]) for name in "ABC"]
    data = _json(*map(str, runs))
    pairs = {(p["a"], p["b"]): p for p in data["pairs"]}
    raw = {}
    for (x, y), (b10, b01) in DISCORDANT.items():
        p = pairs[(f"sys-{x}", f"sys-{y}")]
        assert (p["a_only"], p["b_only"]) == (b10, b01)
        raw[(x, y)] = binomtest(b10, b10 + b01, 0.5).pvalue
        assert p["mcnemar_p"] == pytest.approx(raw[(x, y)], rel=1e-12)
    # Holm by hand: sort ascending, multiply by 3, 2, 1, keep non-decreasing, cap at 1
    order = sorted(raw, key=raw.get)
    expected, running = {}, 0.0
    for rank, key in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * raw[key]))
        expected[key] = running
    for (x, y), q in expected.items():
        assert pairs[(f"sys-{x}", f"sys-{y}")]["p_holm"] == pytest.approx(q, rel=1e-12)
    assert [r["system"] for r in data["leaderboard"]] == ["sys-A", "sys-C", "sys-B"]


def test_different_task_sets_intersection_and_the_rest_listed(tmp_path: Path) -> None:
    a = docqa_run(tmp_path / "a", "big", CORRECT["A"])
    b = docqa_run(tmp_path / "b", "small", {0, 1, 2}, tasks=range(6))
    data = _json(str(a), str(b))
    assert data["common_tasks"] == [f"t{i}" for i in range(6)]
    excluded = {e["system"]: e["task_ids"] for e in data["excluded"]}
    assert excluded == {"big": [f"t{i}" for i in range(6, 12)], "small": []}
    board = {r["system"]: r for r in data["leaderboard"]}
    assert board["big"]["n_common"] == 6 and board["big"]["accuracy"] == 1.0  # t0-t5 only, not 10/12
    assert board["small"]["accuracy"] == 0.5
    assert any("big: 6 task(s) not run by every system" in n for n in data["notes"])
    text = run_cli("compare", str(a), str(b), "--resamples", "50")
    assert text.returncode == 0, text.stderr
    assert "6 common tasks" in text.stdout and "t6, t7" in text.stdout


def _shape(value: object) -> object:
    """The structure of a JSON value: keys and types, list items merged."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        shapes = [_shape(v) for v in value]
        return [shapes[0]] if shapes and all(s == shapes[0] for s in shapes) else ["mixed" if shapes else "empty"]
    return "number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__


def test_json_shape_is_the_same_for_two_and_three_systems(tmp_path: Path) -> None:
    runs = [docqa_run(tmp_path / name, f"sys-{name}", CORRECT[name]) for name in "ABC"]
    two, three = _json(str(runs[0]), str(runs[1])), _json(*map(str, runs))
    assert _shape(two) == _shape(three)
    assert set(two) == set(Comparison.model_fields)
    # a pair without any discordant item keeps the shape (no None in place of a list)
    assert len(two["pairs"]) == 1 and len(three["pairs"]) == 3 and len(three["excluded"]) == 3


def test_unscored_items_are_counted_not_wrong() -> None:
    def o(task: str, system: str, score: float | None) -> ItemOutcome:
        if score is None:
            return ItemOutcome(task_id=task, system=system, status="unscored")
        return ItemOutcome(task_id=task, system=system, status="scored", score=score, correct=score >= 1)

    a = SystemOutcomes("a", "a", "r", [o("x", "a", 1.0), o("y", "a", None), o("z", "a", 1.0),
                                        ItemOutcome(task_id="x", attempt=1, system="a", status="scored", score=0.0,
                                                    correct=False)])
    b = SystemOutcomes("b", "b", "r", [o("x", "b", 0.0), o("y", "b", 1.0), o("z", "b", None)])
    c = compare([a, b], track="docqa", resamples=100)
    row = {r.system: r for r in c.leaderboard}
    assert (row["a"].n_scored, row["a"].n_unscored, row["a"].accuracy) == (2, 1, 1.0)
    assert (row["b"].n_scored, row["b"].n_unscored, row["b"].accuracy) == (2, 1, 0.5)
    (p,) = c.pairs
    assert (p.n_paired, p.n_unpaired, p.a_only, p.b_only) == (1, 2, 1, 0)
    assert p.odds_ratio is None and p.cohens_d is None  # one paired task: no spread
    assert c.systems[0].n_later_attempts == 1 and any("attempt" in n for n in c.notes)
    with pytest.raises(ValueError, match="unscored one neither"):
        ItemOutcome(task_id="x", system="a", status="unscored", score=0.0)


def test_chart_is_correct_when_its_correctness_is_one() -> None:
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore

    def chart(c: float, r: float) -> AnalyticsItemScore:
        return AnalyticsItemScore(task_id=f"c{c}{r}", attempt=0, system="s", category="visualization",
                                  difficulty="easy", status="scored", score=0.7 * c + 0.3 * r, source="chart_judge",
                                  correctness=c, readability=r)

    got = analytics_outcomes([chart(1.0, 0.5), chart(0.9, 1.0)])
    assert [(x.correct, x.score) for x in got] == [(True, pytest.approx(0.85)), (False, pytest.approx(0.93))]


def analytics_run(run_dir: Path) -> Path:
    """Three QA tasks decided by the numeric check: alpha right on a, b; beta right on a only;
    beta has a second attempt (left out)."""
    from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask

    store = RunStore(run_dir)
    store.save_tasks([AnalyticsTask(id=t, category="qa", instruction="Total?", inputs=["x.xlsx"], difficulty_steps=3,
                                    answer="12.5", answer_value=12.5) for t in "abc"])
    store.set_meta("tasks_file", str(run_dir / "tasks.jsonl"))
    answers = {"analyst-agent:alpha": {"a": "12.5", "b": "12.5", "c": "3"},
               "analyst-agent:beta": {"a": "12.5", "b": "7", "c": "3"}}
    for system, by_task in answers.items():
        for task, answer in by_task.items():
            store.record(Episode(task_id=task, system=system, status="ok",
                                 submission=AnalyticsSubmission(id=task, answer=f"Final answer: {answer}", rounds=1)))
    store.record(Episode(task_id="a", system="analyst-agent:beta", attempt=1, status="ok",
                         submission=AnalyticsSubmission(id="a", answer="Final answer: 1", rounds=1)))
    store.close()
    return run_dir


def test_an_analytics_pair(tmp_path: Path) -> None:
    from scipy.stats import binomtest
    data = _json(str(analytics_run(tmp_path / "an")))
    assert data["track"] == "analytics" and data["common_tasks"] == ["a", "b", "c"]
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"], pair["a_only"], pair["b_only"]) == ("analyst-agent:alpha", "analyst-agent:beta", 1, 0)
    assert pair["mcnemar_p"] == pytest.approx(binomtest(1, 1, 0.5).pvalue)
    assert pair["mean_diff"] == pytest.approx(1 / 3)
    assert {r["system"]: r["accuracy"] for r in data["leaderboard"]} == {
        "analyst-agent:alpha": pytest.approx(2 / 3), "analyst-agent:beta": pytest.approx(1 / 3)}
    assert any("attempts after the first" in n for n in data["notes"])


def deliverables_run(run_dir: Path) -> Path:
    """Two packages, two systems, rubric grades by hand: alpha all 3s (ACCEPT when V >= 80), beta
    all 1s on the first and nothing delivered on the second (auto-graded 0)."""
    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.rubric import CriterionGrade, RubricGrade
    from deskbench.tracks.deliverables.tasks import (
        RUBRIC_CODES,
        DeliverableSubmission,
        load_packages,
    )

    tasks = load_packages(bundled_dir() / "deliverables")[:2]
    store = RunStore(run_dir)
    store.save_tasks(tasks)
    for system in ("alpha", "beta"):
        for task in tasks:
            text = "" if (system, task.id) == ("beta", tasks[1].id) else f"Memo for {task.id}: see the analysis."
            store.record(Episode(task_id=task.id, system=system, status="ok",
                                 submission=DeliverableSubmission(id=task.id, response=text)))
    stamps = {(e.system, e.task_id): e.finished_at for e in store.episodes()}
    store.close()
    grades = GradeStore(run_dir)
    for system, task, score in (("alpha", tasks[0], 3), ("alpha", tasks[1], 3), ("beta", tasks[0], 1)):
        grades.save_grade(RubricGrade(
            task_id=task.id, system=system, grader="sme", source="human", episode_stamp=stamps[(system, task.id)],
            criteria={c: CriterionGrade(code=c, score=score, justification="Graded.") for c in RUBRIC_CODES}))
    grades.close()
    return run_dir


def test_a_deliverables_pair(tmp_path: Path) -> None:
    import asyncio

    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run

    run = deliverables_run(tmp_path / "dl")
    store = RunStore(run, create=False)
    items = {(i.system, i.task_id): i for i in asyncio.run(score_run(store))}
    store.close()
    data = _json(str(run))
    assert data["track"] == "deliverables" and len(data["common_tasks"]) == 2
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"], pair["n_paired"]) == ("alpha", "beta", 2)
    accept = {k: bool(i.accept) for k, i in items.items()}
    b10 = sum(accept[("alpha", t)] and not accept[("beta", t)] for t in data["common_tasks"])
    assert (pair["a_only"], pair["b_only"]) == (b10, 0)
    vrs = {k: i.vrs_relaxed / 100 for k, i in items.items()}  # type: ignore[operator]
    diff = sum(vrs[("alpha", t)] - vrs[("beta", t)] for t in data["common_tasks"]) / 2
    assert pair["mean_diff"] == pytest.approx(diff)
    # the converter: ACCEPT is correct, VRS_0 / 100 the score, an ungraded item unscored
    from deskbench.tracks.deliverables.outcomes import deliverables_outcomes

    accepted = items[("alpha", data["common_tasks"][0])].model_copy(update={"accept": True, "vrs_relaxed": 91.0})
    ungraded = items[("alpha", data["common_tasks"][0])].model_copy(update={"scores": None})
    got = deliverables_outcomes([accepted, ungraded])
    assert (got[0].correct, got[0].score, got[1].status) == (True, 0.91, "unscored")
    # --reviewed-only: the SME grades are not QC-reviewed, so only the auto-graded item counts
    only = json.loads(run_cli("compare", str(run), "--json", "--reviewed-only").stdout)
    assert only["pairs"][0]["n_paired"] == 0 and only["pairs"][0]["mcnemar_p"] is None


def test_mixed_tracks_exit_2_with_one_line(tmp_path: Path) -> None:
    a = docqa_run(tmp_path / "dq", "s", {0})
    b = analytics_run(tmp_path / "an")
    proc = run_cli("compare", str(a), str(b))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "one track" in lines[0] and "docqa" in lines[0] and "analytics" in lines[0]
    flag = run_cli("compare", str(a), str(tmp_path / "dq"), "--chart-judge", "openai/x")
    assert flag.returncode == 2 and "--chart-judge is not an option of the docqa track" in flag.stderr
    one = run_cli("compare", str(a))
    assert one.returncode == 2 and "at least two systems" in one.stderr


def test_html_page(tmp_path: Path) -> None:
    from scipy.stats import binomtest
    runs = [docqa_run(tmp_path / name, f"sys-{name}", CORRECT[name]) for name in "AB"]
    page = tmp_path / "compare.html"
    proc = run_cli("compare", *map(str, runs), "--output", str(page), "--resamples", "50")
    assert proc.returncode == 0, proc.stderr
    html = page.read_text(encoding="utf-8")
    assert 'id="comparison-docqa-leaderboard"' in html and 'id="comparison-docqa-pairs"' in html
    assert "sys-A vs sys-B" in html and f"{binomtest(6, 7, 0.5).pvalue:.4f}" in html
    assert "<script" not in html


def test_the_report_has_a_comparison_section_per_track_with_two_systems(tmp_path: Path) -> None:
    """`deskbench report` shows compare's numbers for each track with 2+ systems, from the items it
    scored once (a track with one system has none)."""
    from deskbench.report.data import build_report
    from deskbench.report.render import render_html

    a = docqa_run(tmp_path / "A", "sys-A", CORRECT["A"])
    b = docqa_run(tmp_path / "B", "sys-B", CORRECT["B"], tasks=range(9))
    an, dl = analytics_run(tmp_path / "an"), deliverables_run(tmp_path / "dl")
    rep = build_report([a, b, an, dl])
    assert [c.track for c in rep.comparisons] == ["docqa", "analytics", "deliverables"]
    docqa = rep.comparisons[0]
    cli = _json(str(a), str(b))
    assert docqa.common_tasks == cli["common_tasks"] == [f"t{i}" for i in range(9)]
    assert docqa.pairs[0].mcnemar_p == pytest.approx(cli["pairs"][0]["mcnemar_p"])
    assert docqa.pairs[0].mean_diff_ci == pytest.approx(cli["pairs"][0]["mean_diff_ci"])  # same seed
    assert rep.comparisons[1].pairs[0].a_only == 1 and rep.comparisons[2].pairs[0].n_paired == 2
    html = render_html(rep)
    for track in ("docqa", "analytics", "deliverables"):
        assert f'id="comparison-{track}-pairs"' in html
    assert "sys-A: 3 task(s) not run by every system, left out: t9, t10, t11" in html
    assert build_report([a, an]).comparisons[0].track == "analytics"  # one docqa system: no docqa section
