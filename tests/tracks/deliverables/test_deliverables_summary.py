"""The consulting paper's tables (Tables 6-18) over hand-made scored items, every number of
Table 6, Table 9, Table 17 and the argmax tie split worked out by hand below; the one-system and
nothing-graded cases; the deliverables section of `deskbench report`.

Six tasks: t1 CRP (requires out.docx), t2 CRP, t3 FSP (requires out.xlsx), t4 FSP, t5 LDP, t6 LDP.
Scores are DI AR RF EP FD; relaxed VRS = V/2 + rbar/3*50; strict = 0 with a criterion at 0.

    sys  task  V    scores      rbar  relaxed   strict  ACCEPT  files
    A    t1    100  3 3 3 3 3  3.0   100       100     yes     out.docx produced
    A    t2    80   3 3 3 2 2  2.6   250/3     250/3   yes
    A    t3    100  3 3 3 3 1  2.6   280/3     280/3   yes     out.xlsx MISSING
    A    t4    60   0 3 3 3 3  2.4   70        0       no (zero)
    A    t5    40   ungraded
    A    t6    90   3 3 3 3 3  3.0   95        95      yes
    B    t1    70   3 3 3 3 3  3.0   85        85      no (V)   produced
    B    t2    60   2 2 2 2 2  2.0   190/3     190/3   no
    B    t3    70   3 3 3 3 2  2.8   245/3     245/3   no (V)   produced
    B    t4    50   1 1 0 1 1  0.8   115/3     0       no (zero)
    B    t5    70   2 2 2 1 1  1.6   185/3     185/3   no
    B    t6    90   3 3 3 3 3  3.0   95        95      yes
    C    t1    20   1 1 1 1 1  1.0   80/3      80/3    no       produced
    C    t2    90   2 2 2 2 2  2.0   235/3     235/3   no
    C    t3    100  3 3 3 3 3  3.0   100       100     yes      produced
    C    t4    40   1 2 0 2 2  1.4   130/3     0       no (zero)
    C    t5    30   ungraded (QC returned the grade)
    C    t6    50   2 2 2 2 2  2.0   175/3     175/3   no

Cross-system tasks (graded for all three): t1 t2 t3 t4 t6 (t5 is ungraded for A and C).
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from conftest import watched_page
from rich.console import Console

from deskbench.analysis.stats import bootstrap_means_ci, wilson_interval
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore, TrapResult
from deskbench.tracks.deliverables.scoring.deliverables_print import print_summary
from deskbench.tracks.deliverables.scoring.deliverables_report import DeliverablesReport
from deskbench.tracks.deliverables.scoring.deliverables_summary import NO_GRADES_NOTE, summarize
from deskbench.tracks.deliverables.scoring.vrs import (
    accept,
    auto_reject,
    reasoning_mean,
    vrs_relaxed,
    vrs_strict,
)
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

CLASSES = {"t1": "CRP", "t2": "CRP", "t3": "FSP", "t4": "FSP", "t5": "LDP", "t6": "LDP"}
REQUIRED = {"t1": ["out.docx"], "t3": ["out.xlsx"]}
# (system, task) -> (V, scores or None, files produced, cost, unobservable, judged, trap outcome)
PLAN: dict[tuple[str, str], tuple] = {
    ("A", "t1"): (100, "33333", ["out.docx"], 0.01, 0, 1, "avoided"),
    ("A", "t2"): (80, "33322", [], 0.01, 0, 0, None),
    ("A", "t3"): (100, "33331", [], 0.01, 1, 0, "fell"),
    ("A", "t4"): (60, "03333", [], 0.01, 0, 0, "unobservable"),
    ("A", "t5"): (40, None, [], 0.04, 2, 1, "fell"),
    ("A", "t6"): (90, "33333", [], 0.01, 0, 0, None),
    ("B", "t1"): (70, "33333", ["out.docx"], 0.02, 0, 1, "fell"),
    ("B", "t2"): (60, "22222", [], 0.02, 0, 0, None),
    ("B", "t3"): (70, "33332", ["out.xlsx"], 0.02, 0, 0, "avoided"),
    ("B", "t4"): (50, "11011", [], 0.02, 0, 0, "fell"),
    ("B", "t5"): (70, "22211", [], 0.02, 0, 0, None),
    ("B", "t6"): (90, "33333", [], 0.02, 0, 0, None),
    ("C", "t1"): (20, "11111", ["out.docx"], 0.0, 0, 0, "fell"),
    ("C", "t2"): (90, "22222", [], 0.0, 0, 0, None),
    ("C", "t3"): (100, "33333", ["out.xlsx"], 0.0, 0, 0, "avoided"),
    ("C", "t4"): (40, "12022", [], 0.0, 0, 0, "fell"),
    ("C", "t5"): (30, None, [], 0.0, 0, 0, None),
    ("C", "t6"): (50, "22222", [], 0.0, 0, 0, None),
}


def make_item(system: str, task: str, v: float, digits: str | None, files: list[str], cost: float = 0.0,
              unobservable: int = 0, judged: int = 0, trap: str | None = None, attempt: int = 0,
              grade_status: str | None = None) -> DeliverableItemScore:
    extra: dict = {}
    if digits is not None:
        s = {c: int(d) for c, d in zip(RUBRIC_CODES, digits, strict=True)}
        extra = {"scores": s, "grader": "human:x", "grade_status": "reviewed", "reasoning_mean": reasoning_mean(s),
                 "vrs_relaxed": vrs_relaxed(v, s), "vrs_strict": vrs_strict(v, s), "accept": accept(v, s),
                 "auto_reject": auto_reject(s)}
    elif grade_status:
        extra = {"grader": "llm:m", "grade_status": grade_status}
    traps = [TrapResult(id="tr", kind="footnote_override", outcome=trap, verifiers=["x"])] if trap else []
    return DeliverableItemScore(
        task_id=task, system=system, attempt=attempt, prompt_class=CLASSES.get(task, "CRP"), status="ok",
        verifiers=[], v=v, passed=0, failed=5 - unobservable, unobservable=unobservable, judged=judged,
        traps=traps, required_files=REQUIRED.get(task, []), files_produced=files, cost_usd=cost, **extra)


def all_items() -> list[DeliverableItemScore]:
    items = [make_item(s, t, v, d, f, c, u, j, tr, grade_status="returned" if (s, t) == ("C", "t5") else None)
             for (s, t), (v, d, f, c, u, j, tr) in PLAN.items()]
    # A later attempt: left out of every table.
    items.append(make_item("A", "t1", 0, "00000", [], attempt=1))
    return items


@pytest.fixture(scope="module")
def report() -> DeliverablesReport:
    return summarize(all_items(), [], resamples=500, seed=3)


def row(report: DeliverablesReport, system: str):  # noqa: ANN201
    return next(r for r in report.rows if r.system == system)


def test_table6_row_by_hand(report: DeliverablesReport) -> None:
    a = row(report, "A")
    assert (a.n_items, a.n_graded, a.n_ungraded, a.ungraded) == (6, 5, 1, ["t5"])
    # rbar over the 5 graded: (3 + 2.6 + 2.6 + 2.4 + 3) / 5
    assert a.rbar.mean == pytest.approx(13.6 / 5) and a.rbar.n == 5
    # V over all 6 attempt-0 items, the ungraded t5 included
    assert a.v.mean == pytest.approx(470 / 6) and a.v.n == 6
    # strict: (100 + 250/3 + 280/3 + 0 + 95) / 5 = 223/3; relaxed adds t4's 70
    assert a.vrs_strict.mean == pytest.approx(223 / 3)
    assert a.vrs_relaxed.mean == pytest.approx((1115 / 3 + 70) / 5)
    assert a.vrs_delta == pytest.approx(70 / 5)
    assert (a.accept.count, a.accept.n, a.accept.rate) == (4, 5, 0.8)
    lo, hi = wilson_interval(4, 5)
    z = 1.959963984540054  # Wilson by hand: (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    center, half = (0.8 + z * z / 10) / (1 + z * z / 5), z / (1 + z * z / 5) * math.sqrt(0.16 / 5 + z * z / 100)
    assert a.accept.ci == pytest.approx((center - half, center + half))
    assert (lo, hi) == pytest.approx((center - half, center + half))
    assert (a.auto_reject.count, a.auto_reject.n) == (1, 5) and a.auto_reject.rate == pytest.approx(0.2)
    assert a.zeros == 1
    assert (a.files.count, a.files.n, a.files.rate) == (1, 2, 0.5)  # t3's out.xlsx is missing
    assert (a.verifiers, a.unobservable, a.judged) == (30, 3, 2)
    assert a.cost_usd == pytest.approx(0.09) and a.mean_cost_usd == pytest.approx(0.015)
    assert (a.traps.fell, a.traps.avoided, a.traps.unobservable) == (2, 1, 1)
    # the bootstrap intervals: paired over the graded items for rbar and VRS, V on its own
    for m in (a.rbar, a.vrs_strict, a.vrs_relaxed, a.v):
        assert m.ci is not None and m.ci[0] <= m.mean <= m.ci[1]
    graded = [i for i in all_items() if i.system == "A" and i.attempt == 0 and i.graded]
    cis = bootstrap_means_ci({"rbar": [i.reasoning_mean for i in graded], "vrs_strict": [i.vrs_strict for i in graded],
                              "vrs_relaxed": [i.vrs_relaxed for i in graded]}, resamples=500, seed=3)
    assert a.rbar.ci == pytest.approx(cis["rbar"]) and a.vrs_strict.ci == pytest.approx(cis["vrs_strict"])

    b, c = row(report, "B"), row(report, "C")
    assert (b.n_graded, b.n_ungraded, b.zeros, b.accept.count) == (6, 0, 1, 1)
    assert b.vrs_strict.mean == pytest.approx((85 + 190 / 3 + 245 / 3 + 0 + 185 / 3 + 95) / 6)
    assert (b.files.count, b.files.n) == (2, 2)
    assert (c.n_graded, c.ungraded, c.zeros, c.accept.count, c.auto_reject.count) == (5, ["t5"], 1, 1, 1)
    assert c.rbar.mean == pytest.approx((1 + 2 + 3 + 1.4 + 2) / 5)
    assert c.mean_cost_usd == 0.0


def test_ungraded_items_are_listed_not_zeroed(report: DeliverablesReport) -> None:
    assert [(u.system, u.task_id, u.grade_status) for u in report.ungraded] == [
        ("A", "t5", None), ("C", "t5", "returned")]
    assert report.n_other_attempts == 1
    assert any("attempt 0" in n for n in report.notes)
    assert any("t5" in n and "cross-system" in n for n in report.notes)


def test_per_class_and_criteria_tables(report: DeliverablesReport) -> None:
    cls = {r.prompt_class: r for r in report.by_class}
    assert list(cls) == ["CRP", "FSP", "LDP"]
    crp = cls["CRP"]
    assert crp.cells["A"].vrs_strict == pytest.approx((100 + 250 / 3) / 2) and crp.cells["A"].n == 2
    assert crp.winners == ["A"]
    ldp = cls["LDP"]  # A and C have only t6 graded there
    assert (ldp.cells["A"].n, ldp.cells["B"].n, ldp.cells["C"].n) == (1, 2, 1)
    assert ldp.winners == ["A"]  # 95 vs (185/3 + 95) / 2 vs 175/3
    d_ab = next(p for p in crp.cohens_d if (p.a, p.b) == ("A", "B"))
    # rbar A: 3.0, 2.6; B: 3.0, 2.0 -> means 2.8, 2.5; pooled var (0.08 + 0.5) / 2 = 0.29
    assert d_ab.d == pytest.approx(0.3 / math.sqrt(0.29))
    assert [(p.a, p.b) for p in crp.cohens_d] == [("A", "B"), ("A", "C"), ("B", "C")]
    a = row(report, "A").criteria
    assert a["DI"].zeros == 1 and a["DI"].mean == pytest.approx(12 / 5) and a["DI"].pass_rate == pytest.approx(4 / 5)
    assert a["FD"].pass_rate == pytest.approx(4 / 5) and a["FD"].mean == pytest.approx(12 / 5)
    pooled = report.criteria_pooled
    assert pooled["RF"].zeros == 2 and pooled["RF"].n == 16


def test_cross_system_tables_by_hand(report: DeliverablesReport) -> None:
    cross = report.cross
    assert cross is not None
    assert cross.tasks == ["t1", "t2", "t3", "t4", "t6"] and cross.excluded_tasks == ["t5"]
    # ACCEPTs per task: t1 A; t2 A; t3 A C; t4 none; t6 A B
    assert [(r.k, r.tasks) for r in cross.accept_counts] == [(0, 1), (1, 2), (2, 2), (3, 0)]
    assert [r.share for r in cross.accept_counts] == pytest.approx([0.2, 0.4, 0.4, 0.0])
    # argmax of strict VRS: t1 A; t2 A (250/3 > 235/3 > 190/3); t3 C; t4 all 0 -> 1/3 each;
    # t6 A = B = 95 -> 1/2 each
    wins = {w.system: w.wins for w in cross.argmax}
    assert wins == pytest.approx({"A": 1 + 1 + 1 / 3 + 1 / 2, "B": 1 / 3 + 1 / 2, "C": 1 + 1 / 3})
    assert sum(wins.values()) == pytest.approx(5)
    assert {w.system: w.share for w in cross.argmax}["C"] == pytest.approx(4 / 15)
    # McNemar: A vs B: both t6, A only t1 t2 t3, neither t4 -> p = 2 / 2^3
    # A vs C: both t3, A only t1 t2 t6 -> 0.25; B vs C: B only t6, C only t3 -> p = 1.
    # Holm: sorted 0.25, 0.25, 1 -> 3 x 0.25, max(0.75, 2 x 0.25), 1
    got = {(m.a, m.b): (m.both, m.a_only, m.b_only, m.neither, m.p, m.p_holm) for m in cross.mcnemar}
    assert got == {("A", "B"): (1, 3, 0, 1, 0.25, 0.75), ("A", "C"): (1, 3, 0, 1, 0.25, 0.75),
                   ("B", "C"): (0, 1, 1, 3, 1.0, 1.0)}
    assert set(cross.criterion_pearson) == set(RUBRIC_CODES)
    assert cross.criterion_pearson["DI"]["DI"] == 1.0
    assert cross.v_rbar_pooled.n == 15 and set(cross.v_rbar) == {"A", "B", "C"}
    assert [r.predictor for r in cross.accept_spearman] == ["V", *RUBRIC_CODES]
    # Sole cause (§4.10.2): rejected, V >= 80, exactly one criterion below 2. A t3 (FD = 1) has
    # rbar 2.6 and V 100: accepted, so no sole-cause rejection, only the funnel's accepted count.
    assert cross.sole_cause.counts == dict.fromkeys(RUBRIC_CODES, 0) and cross.sole_cause.total == 0
    assert cross.sole_cause.one_below_2_accepted == 1
    # Table 14: the raw p and the Bonferroni p over the six tests, named apart
    for r in cross.accept_spearman:
        assert r.p_bonferroni is None if r.pooled.p is None else r.p_bonferroni == pytest.approx(min(1, 6 * r.pooled.p))
    assert any(r.p_bonferroni is not None and r.p_bonferroni > r.pooled.p for r in cross.accept_spearman)
    assert cross.sole_cause.auto_rejected == 3
    assert [r.weighting for r in cross.sensitivity_relaxed] == ["baseline", "A", "B", "C", "D"]
    base_relaxed, base_strict = cross.sensitivity_relaxed[0], cross.sensitivity_strict[0]
    assert base_strict.mean_vrs["A"] == pytest.approx((100 + 250 / 3 + 280 / 3 + 0 + 95) / 5)
    assert base_relaxed.mean_vrs["A"] == pytest.approx((100 + 250 / 3 + 280 / 3 + 70 + 95) / 5)
    assert base_strict.rule_accepts == 6


def test_json_round_trip_and_no_nan(report: DeliverablesReport) -> None:
    text = report.model_dump_json()
    assert "NaN" not in text and "Infinity" not in text
    assert DeliverablesReport.model_validate_json(text) == report


def render(report: DeliverablesReport) -> str:
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=240, color_system=None))
    return buf.getvalue()


def test_printed_tables(report: DeliverablesReport) -> None:
    text = render(report)
    for title in ("Table 6", "Table 7", "Table 8", "Tables 10 and 16", "Table 12", "Table 9", "argmax",
                  "Table 17", "Table 13", "V with rbar", "Table 14", "Table 15", "Table 18"):
        assert title in text, title
    assert "nan" not in text.lower()
    assert "80.0% [" in text and "(4/5)" in text
    assert "ungraded (left out of rubric metrics): A/t5, C/t5 (returned)" in text


def test_one_system_has_no_pairwise_tables() -> None:
    items = [i for i in all_items() if i.system == "B"]
    rep = summarize(items, [], resamples=100)
    assert rep.systems == ["B"] and rep.cross is not None
    assert rep.cross.mcnemar == [] and rep.cross.argmax == [] and rep.cross.accept_counts == []
    assert all(r.cohens_d == [] for r in rep.by_class)
    assert all(r.winners == [] for r in rep.by_class)
    assert any("one system" in n for n in rep.notes)
    text = render(rep)
    assert "Table 17" not in text and "Table 8" not in text and "Table 13" in text
    assert "nan" not in text.lower()


def test_nothing_graded_shows_verifier_metrics_only() -> None:
    items = [make_item(s, t, v, None, f, c, u, j, tr) for (s, t), (v, _, f, c, u, j, tr) in PLAN.items()]
    rep = summarize(items, [], resamples=100)
    assert rep.n_graded == 0 and not rep.graded and rep.cross is None
    assert NO_GRADES_NOTE in rep.notes
    a = row(rep, "A")
    assert a.v.mean == pytest.approx(470 / 6) and a.v.ci is not None
    assert a.rbar.mean is None and a.rbar.ci is None and a.vrs_strict.mean is None and a.accept.rate is None
    assert a.files.count == 1 and a.n_ungraded == 6
    text = render(rep)
    assert "no rubric grades: run `deskbench rubric grade` or `deskbench rubric import`" in text
    assert "Table 7" not in text and "VRS, strict" not in text and "nan" not in text.lower()
    assert "Mean verifier pass rate V" in text


def test_tasks_without_episodes_are_noted() -> None:
    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.deliverables.tasks import load_packages

    tasks = load_packages(bundled_dir() / "deliverables")
    items = [make_item("A", tasks[0].id, 80, "33333", [])]
    rep = summarize(items, tasks, resamples=50)
    assert rep.tasks == [t.id for t in tasks]
    assert row(rep, "A").missing == [t.id for t in tasks[1:]]
    assert {r.prompt_class: r.n_tasks for r in rep.by_class} == {t.prompt_class: 1 for t in tasks}


def test_a_repeated_attempt_zero_is_an_error() -> None:
    item = make_item("A", "t1", 80, "33333", [])
    with pytest.raises(ValueError, match="two attempt-0 items"):
        summarize([item, item], [])


# --- the report section ----------------------------------------------------------------------


def _report_of(summary: DeliverablesReport):  # noqa: ANN202
    from deskbench.report.models import Report, ReportSection
    from deskbench.tracks.deliverables.report import TEMPLATE, DeliverablesSection

    section = ReportSection(track="deliverables", title="deliverables (consulting DRA)", template=TEMPLATE,
                            data=DeliverablesSection(report=summary, runs=["runs/dl"]))
    return Report(run_dirs=["runs/dl"], sections=[section])


def test_report_section_html(report: DeliverablesReport) -> None:
    from deskbench.report.render import render_html

    html = render_html(_report_of(report))
    assert 'id="deliverables-leaderboard"' in html and 'id="leaderboard"' not in html
    for part in ("deliverables-by-class", "deliverables-zeros", "deliverables-mcnemar", "plot-deliverables-class"):
        assert f'id="{part}"' in html, part
    board = html[html.index('id="deliverables-leaderboard"'):html.index("</table>", html.index('id="deliverables-leaderboard"'))]
    assert board.count("<tr data-system=") == 3
    assert "74.3" in board  # A's strict VRS, 223/3
    assert "(4/5)" in board and "(1/2)" in board  # A's ACCEPTs and output files
    assert "nan" not in html.lower()
    mc = html[html.index('id="deliverables-mcnemar"'):]
    assert "<td>0.250</td><td>0.750</td>" in mc


def test_report_section_without_grades_or_pairs() -> None:
    from deskbench.report.render import render_html

    items = [make_item(s, t, v, None, f) for (s, t), (v, _, f, *_rest) in PLAN.items()]
    html = render_html(_report_of(summarize(items, [], resamples=50)))
    assert 'id="deliverables-leaderboard"' in html and "deskbench rubric grade" in html
    assert 'id="deliverables-by-class"' not in html and 'id="deliverables-mcnemar"' not in html
    one = render_html(_report_of(summarize([i for i in all_items() if i.system == "A"], [], resamples=50)))
    assert 'id="deliverables-by-class"' in one and 'id="deliverables-mcnemar"' not in one


def test_build_report_scores_a_deliverables_run(tmp_path: Path) -> None:
    """A real run store of the deliverables track: `deskbench report` scores it (verifiers, no
    grades yet) and shows the section; an episode that delivered nothing is auto-graded 0."""
    from deskbench.generate.demo import bundled_dir
    from deskbench.report.data import build_report
    from deskbench.report.render import render_html
    from deskbench.runs.store import Episode, RunStore
    from deskbench.tracks.deliverables.tasks import DeliverableSubmission, load_packages

    tasks = load_packages(bundled_dir() / "deliverables")[:2]
    store = RunStore(tmp_path / "dl")
    store.save_tasks(tasks)
    for system in ("alpha", "beta"):
        for task in tasks:
            text = "" if (system, task.id) == ("beta", tasks[1].id) else f"Memo for {task.id}: see the analysis."
            store.record(Episode(task_id=task.id, system=system, status="ok",
                                 submission=DeliverableSubmission(id=task.id, response=text)))
    assert store.track() == "deliverables"
    store.close()
    rep = build_report([tmp_path / "dl"])
    d = rep.section("deliverables").data.report
    assert d is not None and [s.track for s in rep.sections] == ["deliverables"] and d.systems == ["alpha", "beta"]
    assert rep.section("deliverables").data.runs == [str(tmp_path / "dl")]
    beta = row(d, "beta")
    assert (beta.n_graded, beta.zeros, beta.auto_reject.count) == (1, 5, 1)  # the empty episode
    assert row(d, "alpha").n_graded == 0
    html = render_html(rep)
    assert 'id="deliverables-leaderboard"' in html and "1 / 1" in html


def test_report_section_in_chromium(browser, tmp_path: Path, report: DeliverablesReport) -> None:  # noqa: ANN001
    """Last in the module: the browser fixture holds an event loop (see conftest)."""
    from deskbench.report.render import write_report

    target = tmp_path / "report.html"
    write_report(_report_of(report), target)
    page, problems = watched_page(browser, ("file:", "data:"), viewport={"width": 1280, "height": 900})
    page.goto(target.as_uri(), wait_until="load")
    assert problems == []
    rows = page.locator("table#deliverables-leaderboard tbody tr")
    assert rows.count() == 3 and rows.first.is_visible()
    img = page.locator("#plot-deliverables-class img")
    ok, w, h = img.evaluate("e => [e.complete, e.naturalWidth, e.naturalHeight]")
    assert ok and w > 100 and h > 100
    page.close()


# --- QC, star ratings, the declared best, protocol --------------------------------------------


def qc_items() -> list[DeliverableItemScore]:
    """All items with B/t2 unreviewed and C/t6 pending; C/t5 returned (as in PLAN); stars on A's
    reviewed t1 and t2; declared best: t1 A (argmax A), t2 C (argmax A), t3 B and C (conflict),
    t6 B (argmax A = B tied), t4 none."""
    items = all_items()
    status = {("B", "t2"): "unreviewed", ("C", "t6"): "pending"}
    best = {("A", "t1"), ("C", "t2"), ("B", "t3"), ("C", "t3"), ("B", "t6")}
    stars = {("A", "t1"): {"verifiers": 5, "DI": 4}, ("A", "t2"): {"verifiers": 2}}
    out = []
    for i in items:
        key = (i.system, i.task_id)
        update: dict = {"declared_best": key in best and i.attempt == 0, "stars": stars.get(key, {}) if i.attempt == 0 else {}}
        if key in status and i.attempt == 0:
            update["grade_status"] = status[key]
        out.append(i.model_copy(update=update))
    return out


def test_reviewed_share_and_reviewed_only() -> None:
    every = summarize(qc_items(), [], resamples=50)
    # grades held (attempt 0): 16 usable + C/t5 returned = 17; reviewed: 17 - 3
    assert (every.reviewed.count, every.reviewed.n) == (14, 17)
    assert (row(every, "B").reviewed.count, row(every, "B").reviewed.n) == (5, 6)
    assert (row(every, "C").reviewed.count, row(every, "C").reviewed.n) == (4, 6)  # t5 returned, t6 pending
    assert row(every, "B").n_graded == 6 and not every.reviewed_only
    assert every.protocol[0].aspect == "grades counted" and every.protocol[0].source == "deskbench"
    assert "14 of 17 grades QC-reviewed" in every.protocol[0].detail
    assert any("3 of 17 grade(s) are not reviewed by QC and still count" in n for n in every.notes)

    only = summarize(qc_items(), [], resamples=50, reviewed_only=True)
    assert only.reviewed_only and only.protocol[0].source == "paper"
    b, c = row(only, "B"), row(only, "C")
    assert b.n_graded == 5 and "t2" in b.ungraded and c.n_graded == 4 and set(c.ungraded) == {"t5", "t6"}
    # B without t2 (60, 22222): VRS strict over t1 t3 t4 t5 t6
    assert b.vrs_strict.mean == pytest.approx((85 + 245 / 3 + 0 + 185 / 3 + 95) / 5)
    assert (b.reviewed.count, b.reviewed.n) == (5, 6)  # the share is of every grade held, flag or not
    assert {(u.system, u.task_id, u.grade_status) for u in only.ungraded} >= {("B", "t2", "unreviewed"),
                                                                              ("C", "t6", "pending")}
    assert only.cross is not None and "t2" not in only.cross.tasks and "t6" not in only.cross.tasks
    assert only.cross.reviewed.rate == 1.0
    assert any(n.startswith("--reviewed-only: 2 grade(s) not (yet) reviewed") for n in only.notes)
    text = printed(only)
    assert "grades QC-reviewed: 82.4% (14/17) (--reviewed-only: only these count)" in text
    assert text.startswith("protocol: significance correction (Table 17): deskbench")  # non-paper first
    assert "grades counted: paper (QC-reviewed grades only" in text
    assert "Grades QC-reviewed (only these count)" in text


def test_stars_and_the_declared_best() -> None:
    report = summarize(qc_items(), [], resamples=50)
    a = row(report, "A")
    assert a.stars["verifiers"].mean == pytest.approx(3.5) and a.stars["verifiers"].n == 2
    assert a.stars["DI"].mean == 4 and a.stars["DI"].n == 1 and a.stars["FD"].n == 0
    assert a.vrs_strict.mean == row(summarize(all_items(), [], resamples=50), "A").vrs_strict.mean  # never scored
    best = report.cross.sme_best  # type: ignore[union-attr]
    assert best is not None
    # t1 A = argmax A: agree; t2 C vs argmax A: disagree; t6 B in the tied argmax {A, B}: agree
    assert (best.declared, best.agree, best.tied, best.conflicting, best.undeclared) == (3, 2, 1, 1, 1)
    assert best.share == pytest.approx(2 / 3) and best.disagree_tasks == ["t2"]
    text = printed(report)
    assert "VRS argmax vs the grader's declared best (§4.4): 2 of 3 task(s) agree (66.7%)" in text
    assert "C.6 star ratings by QC" in text and "3.50 (n=2)" in text
    assert "p (Bonferroni)" in text and "Table 15: sole-cause rejections" in text


def test_protocol_notes_name_every_score_side_aspect(report: DeliverablesReport) -> None:
    aspects = {n.aspect: n.source for n in report.protocol}
    assert aspects == {"grades counted": "deskbench", "sole-cause attribution": "paper",
                       "significance correction (Table 14)": "paper",
                       "significance correction (Table 17)": "deskbench",
                       "SME-declared best (§4.4)": "deskbench", "QC checks (Appendix C)": "deskbench"}
    back = DeliverablesReport.model_validate_json(report.model_dump_json())
    assert back.protocol == report.protocol
    assert printed(report).startswith("protocol: grades counted: deskbench (every usable grade")


def printed(report: DeliverablesReport) -> str:
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=300, color_system=None))
    return buf.getvalue()


def test_score_and_report_reviewed_only_on_a_run(tmp_path: Path) -> None:
    """`deskbench score RUN` counts every usable grade and says how many QC reviewed;
    --reviewed-only counts the reviewed ones; the protocol (score side, and the run side kept
    in the store) is in --json, the text output and the report."""
    import json

    from conftest import run_cli

    from deskbench.generate.demo import bundled_dir
    from deskbench.report.data import build_report
    from deskbench.report.render import render_html
    from deskbench.runs.protocol import deskbench as deskbench_note
    from deskbench.runs.protocol import remember_protocol
    from deskbench.runs.store import Episode, RunStore
    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.rubric import CriterionGrade, RubricGrade
    from deskbench.tracks.deliverables.scoring.rubric_qc_actions import QCAction
    from deskbench.tracks.deliverables.scoring.rubric_qc_checks import priority_findings
    from deskbench.tracks.deliverables.tasks import DeliverableSubmission, load_packages

    tasks = load_packages(bundled_dir() / "deliverables")[:2]
    run = tmp_path / "dl"
    store = RunStore(run)
    store.save_tasks(tasks)
    for task in tasks:
        store.record(Episode(task_id=task.id, system="alpha", status="ok",
                             submission=DeliverableSubmission(id=task.id, response=f"Memo for {task.id}.")))
    remember_protocol(store, "alpha", [deskbench_note("agent prompt", "trap hints (--trap-hints)")])
    stamps = {e.task_id: e.finished_at for e in store.episodes()}
    store.close()
    grades = GradeStore(run)
    for task in tasks:
        grades.save_grade(RubricGrade(
            task_id=task.id, system="alpha", grader="sme", source="human", episode_stamp=stamps[task.id],
            criteria={c: CriterionGrade(code=c, score=3, justification="Solid.") for c in RUBRIC_CODES}))
    rederived = [QCAction(task_id=tasks[0].id, system="alpha", target=f.target, action="confirm", reviewer="qc")
                 for f in priority_findings(tasks[0], None, dict.fromkeys(RUBRIC_CODES, 3))]  # C.2
    grades.add_qc([QCAction(task_id=tasks[0].id, system="alpha", target="row", action="confirm", reviewer="qc"),
                   *rederived])
    grades.close()

    every = run_cli("score", str(run), "--json")
    assert every.returncode == 0, every.stderr
    data = json.loads(every.stdout)
    assert (data["reviewed"]["count"], data["reviewed"]["n"], data["reviewed_only"]) == (1, 2, False)
    assert data["rows"][0]["n_graded"] == 2 and data["rows"][0]["reviewed"]["rate"] == 0.5
    assert data["protocol"][0]["aspect"] == "grades counted" and data["protocol"][0]["source"] == "deskbench"
    assert data["run_protocol"]["alpha"][0]["detail"] == "trap hints (--trap-hints)"

    only = run_cli("score", str(run), "--json", "--reviewed-only")
    data = json.loads(only.stdout)
    assert data["reviewed_only"] and data["rows"][0]["n_graded"] == 1 and data["rows"][0]["ungraded"] == [tasks[1].id]
    assert data["protocol"][0]["source"] == "paper"
    text = run_cli("score", str(run), "--reviewed-only").stdout
    assert "grades QC-reviewed: 50.0% (1/2) (--reviewed-only: only these count)" in text
    assert "protocol of alpha: agent prompt: deskbench (trap hints (--trap-hints))" in text

    from concurrent.futures import ThreadPoolExecutor

    # a browser test may hold this thread's event loop: build the report in a thread of its own

    with ThreadPoolExecutor(1) as pool:
        html = render_html(pool.submit(build_report, [run], reviewed_only=True).result())
    assert 'id="deliverables-protocol"' in html and "grades counted: <strong>paper</strong>" in html
    assert '<span id="deliverables-reviewed">1 of 2 (50.0%)</span>; only these count' in html
    assert "alpha, agent prompt: <strong>deskbench</strong> (trap hints (--trap-hints))" in html  # the run side too

    bad = run_cli("score", str(tmp_path / "nope.jsonl"), "--tasks", str(tmp_path / "t.jsonl"), "--reviewed-only")
    assert bad.returncode == 2
