"""Generated analytics and deliverables benchmarks: byte-identical per seed, every reference
answer recomputed here from the generated input files, and every trap caught by its verifiers."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from deliverable_responses import LDP_INDUSTRIES, recompute, respond
from docx import Document as DocxDocument
from openpyxl import load_workbook

from deskbench.tracks.analytics.generate.tasks import generate_analytics
from deskbench.tracks.analytics.tasks import AnalyticsTask, read_tasks
from deskbench.tracks.deliverables.generate.packages import SCENARIOS, generate_deliverables
from deskbench.tracks.deliverables.scoring.verifiers import run_verifiers, verifier_pass_rate
from deskbench.tracks.deliverables.tasks import DeliverableTask, load_package

N_ANALYTICS = 10  # one of each template
N_DELIVERABLES = 5  # one of each prompt class


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def analytics(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("analytics")
    generate_analytics(out, tasks=N_ANALYTICS, seed=5)
    return out


@pytest.fixture(scope="module")
def deliverables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deliverables")
    generate_deliverables(out, tasks=N_DELIVERABLES, seed=5)
    return out


def test_same_seed_byte_identical_other_seed_differs(
    tmp_path: Path, analytics: Path, deliverables: Path
) -> None:
    generate_analytics(tmp_path / "a", tasks=N_ANALYTICS, seed=5)
    generate_deliverables(tmp_path / "d", tasks=N_DELIVERABLES, seed=5)
    first_a, first_d = _hashes(analytics), _hashes(deliverables)
    assert {Path(k).suffix for k in first_a} >= {".xlsx", ".csv", ".docx", ".jsonl"}
    assert _hashes(tmp_path / "a") == first_a
    assert _hashes(tmp_path / "d") == first_d
    generate_analytics(tmp_path / "a2", tasks=N_ANALYTICS, seed=6)
    assert _hashes(tmp_path / "a2")["tasks.jsonl"] != first_a["tasks.jsonl"]


def test_office_files_carry_no_wall_clock(analytics: Path, deliverables: Path) -> None:
    """Two runs inside one second hash alike even with clock stamps; check the stamps directly."""
    office = [p for root in (analytics, deliverables) for p in root.rglob("*")
              if p.suffix in (".xlsx", ".docx", ".pptx")]
    assert office
    for path in office:
        with zipfile.ZipFile(path) as z:
            assert {i.date_time for i in z.infolist()} == {(2024, 1, 1, 0, 0, 0)}, path
            core = z.read("docProps/core.xml").decode()
            stamps = re.findall(r"<dcterms:(?:created|modified)[^>]*>([^<]*)<", core)
            assert stamps and set(stamps) == {"2024-01-01T00:00:00Z"}, (path, stamps)


# ---- analytics: recompute every reference from the files ------------------------------------


def _sales(path: Path) -> dict[str, Any]:
    """Read the merged, two-row-header Revenue sheet and the Targets sheet (INR lakh)."""
    wb = load_workbook(path, data_only=True)
    ws = wb["Revenue"]
    assert "INR thousand" in ws["A1"].value and "A1:I1" in {str(r) for r in ws.merged_cells.ranges}
    quarters = [ws.cell(2, c).value for c in range(2, 10, 2)]
    assert quarters == ["Q1", "Q2", "Q3", "Q4"]
    units, revenue = {}, {}
    for row in ws.iter_rows(min_row=4, values_only=True):
        if row[0] is None or str(row[0]).startswith("Note"):
            continue
        units[row[0]] = [row[c] for c in range(1, 9, 2)]
        revenue[row[0]] = [row[c] for c in range(2, 9, 2)]
    targets = {r[0]: r[1] for r in wb["Targets"].iter_rows(min_row=3, values_only=True)}
    return {"units": units, "revenue_k": revenue, "targets_lakh": targets}


def _orders(path: Path) -> list[dict[str, Any]]:
    """Either dialect: UTF-8 with commas, or latin-1 with semicolons and decimal commas."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    delim = ";" if ";" in text.splitlines()[0] else ","
    rows = list(csv.DictReader(io.StringIO(text), delimiter=delim))
    for r in rows:
        r["units"] = int(r["units"]) if r["units"] else None
        r["unit_price"] = float(r["unit_price"].replace(",", "."))
    return rows


def _docx_table(path: Path) -> list[list[str]]:
    return [[c.text for c in row.cells] for row in DocxDocument(str(path)).tables[0].rows]


def _check_analytics(task: AnalyticsTask, base: Path) -> None:
    files = task.input_paths(base)
    p = task.params
    if task.template == "qa_quarter_total":
        s = _sales(files[0])
        q = ["Q1", "Q2", "Q3", "Q4"].index(p["quarter"])
        assert task.answer_value == round(sum(v[q] for v in s["revenue_k"].values()) / 1e4, 2)
    elif task.template in ("qa_target_ratio", "qa_revenue_per_rep"):
        s = _sales(files[0])
        if task.template == "qa_target_ratio":
            denom = s["targets_lakh"]
            scale = 100.0
        else:
            denom = {r[0]: int(r[1]) for r in _docx_table(files[1])[1:]}
            scale = 1.0
        ratio = {r: sum(v) / 100 / denom[r] * scale for r, v in s["revenue_k"].items()}
        best = max(ratio, key=lambda r: ratio[r])
        assert p["region"] == best and task.answer_value == pytest.approx(ratio[best], abs=0.051)
        assert best in (task.answer or "")
    elif task.template == "qa_weighted_price":
        rows = [r for r in _orders(files[0]) if r["category"] == p["category"]]
        value = sum(r["units"] * r["unit_price"] for r in rows) / sum(r["units"] for r in rows)
        assert task.answer_value == pytest.approx(value, abs=0.005)
    elif task.template == "qa_monthly_files":
        assert len(files) == 14
        cancelled = {r[0] for r in _docx_table(files[-1])[1:]}
        units: dict[str, int] = {}
        for f in files[:12]:
            for r in _orders(f):
                if (int(r["order_date"][5:7]) >= 7 and r["product"] == p["product"]
                        and r["order_id"] not in cancelled):
                    units[r["region"]] = units.get(r["region"], 0) + r["units"]
        best = max(units, key=lambda r: (units[r], r))
        assert (p["region"], task.answer_value) == (best, units[best])
    elif task.template == "viz_region_bar":
        s = _sales(files[0])
        lakh = {r: sum(v) / 100 for r, v in s["revenue_k"].items()}
        series = task.chart.series[0]  # type: ignore[union-attr]
        assert series.labels == sorted(lakh, key=lambda r: -lakh[r])
        assert series.values == pytest.approx([lakh[r] for r in series.labels], abs=0.005)
    elif task.template == "viz_monthly_line":
        rows = _orders(files[0])
        for series in task.chart.series:  # type: ignore[union-attr]
            want = [sum(r["units"] for r in rows if r["category"] == series.name
                        and int(r["order_date"][5:7]) == m) for m in range(1, 13)]
            assert series.values == want
    elif task.template == "viz_category_pie":
        rows = _orders(files[0])
        rev: dict[str, float] = {}
        for r in rows:
            rev[r["category"]] = rev.get(r["category"], 0.0) + r["units"] * r["unit_price"]
        series = task.chart.series[0]  # type: ignore[union-attr]
        assert set(series.labels) == set(rev)
        assert series.values == pytest.approx(
            [rev[c] / sum(rev.values()) * 100 for c in series.labels], abs=0.051)
    elif task.template == "file_region_summary":
        s = _sales(files[0])
        ref = load_workbook(base / task.reference_file.path)["Summary"]  # type: ignore[union-attr]
        rows = list(ref.iter_rows(values_only=True))
        assert list(rows[0]) == task.reference_file.sheets[0].columns  # type: ignore[union-attr]
        for region, units, lakh, target, pct in rows[1:]:
            assert units == sum(s["units"][region])
            assert lakh == pytest.approx(sum(s["revenue_k"][region]) / 100, abs=0.005)
            assert target == s["targets_lakh"][region]
            assert pct == pytest.approx(lakh / target * 100, abs=0.05)
        assert [r[2] for r in rows[1:]] == sorted((r[2] for r in rows[1:]), reverse=True)
    elif task.template == "file_clean_orders":
        raw = _orders(files[0])
        first: dict[str, dict[str, Any]] = {}
        for r in raw:
            first.setdefault(r["order_id"], r)
        assert len(first) < len(raw)
        ref = load_workbook(base / task.reference_file.path)  # type: ignore[union-attr]
        got = list(ref["Orders"].iter_rows(min_row=2, values_only=True))
        assert [g[0] for g in got] == sorted(first)
        for g in got:
            assert g[5] == (first[g[0]]["units"] or 0) and g[6] == first[g[0]]["unit_price"]
        for cat, units, revenue in ref["Category Totals"].iter_rows(min_row=2, values_only=True):
            sel = [r for r in first.values() if r["category"] == cat]
            assert units == sum(r["units"] or 0 for r in sel)
            assert revenue == pytest.approx(sum((r["units"] or 0) * r["unit_price"] for r in sel),
                                            abs=0.005)
    else:
        pytest.fail(f"no independent check for template {task.template}")


def test_analytics_references_recomputed_from_inputs(analytics: Path) -> None:
    tasks = read_tasks(analytics / "tasks.jsonl").items
    assert len(tasks) == N_ANALYTICS
    assert {t.category for t in tasks} == {"qa", "visualization", "file_generation"}
    assert {t.difficulty for t in tasks} == {"easy", "medium", "hard"}
    assert any(len(t.inputs) > 1 for t in tasks) and max(len(t.inputs) for t in tasks) == 14
    for task in tasks:
        for f in task.input_paths(analytics):
            assert f.is_file(), f
        _check_analytics(task, analytics)


def test_analytics_inputs_are_awkward(analytics: Path) -> None:
    csvs = list(analytics.rglob("*.csv"))
    latin = [p for p in csvs if b";" in p.read_bytes().splitlines()[0]]
    assert latin and any(p.read_bytes().decode("latin-1") != p.read_bytes().decode("utf-8", "replace")
                         for p in latin)
    assert len(latin) < len(csvs)  # and some plain ones


def test_analytics_task_line_errors(tmp_path: Path) -> None:
    from deskbench.errors import UserError

    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"id": "x", "category": "qa", "instruction": "q", "inputs": ["a.csv"], '
                   '"difficulty_steps": 3}\n')
    with pytest.raises(UserError, match=r"tasks\.jsonl:1: .*reference answer"):
        read_tasks(bad)


# ---- deliverables: golden recomputed, traps caught ------------------------------------------


def _packages(root: Path) -> list[DeliverableTask]:
    return [load_package(p) for p in sorted(root.iterdir()) if (p / "task.yaml").is_file()]


def test_deliverables_cover_classes_and_traps(deliverables: Path) -> None:
    tasks = _packages(deliverables)
    assert {t.prompt_class for t in tasks} == set(SCENARIOS)
    kinds = {trap.kind for t in tasks for trap in t.traps}
    assert kinds >= {"footnote_override", "unit_mismatch", "stale_placeholder", "unweighted_average"}
    for t in tasks:
        assert t.full_prompt.startswith("CORPUS DISCIPLINE:")
        assert [c.code for c in t.rubric] == ["DI", "AR", "RF", "EP", "FD"]
        if t.corpus_discipline == "hybrid":
            assert "Authorized external sources: Mordor Intelligence" in t.full_prompt
        kinds_here = {v.kind for v in t.verifiers}
        assert {"decision_line", "file_sections"} <= kinds_here


def _check_golden(t: DeliverableTask, d: Path) -> dict[str, Any]:
    """The golden values and decision of package `t` (in `d`) recomputed from its input files;
    the recomputed figures (correct and trap-falling) for further checks."""
    v = recompute(t, d)
    gold = {g.name: g.value for g in t.golden.values}
    if t.prompt_class == "FSP":
        for key, name in (("fixed", "fixed_cost_usd"), ("fuel", "fuel_surcharge_usd"),
                          ("spot", "spot_all_in_usd"), ("teu", "annual_teu"),
                          ("base", "spot_base_usd")):
            assert gold[name] == pytest.approx(v[key], abs=0.01)
    elif t.prompt_class == "SCP":
        for name in ("unit_cost_operational", "unit_cost_reduced", "annual_cost_before",
                     "absolute_savings", "annual_cost_after", "percentage_savings"):
            assert gold[name] == pytest.approx(v["right"][name], abs=0.006)
    elif t.prompt_class == "LDP":  # the solver's optimum, found again here by enumerating every plan
        assert gold["max_contribution"] == pytest.approx(v["right"]["total"], abs=0.006)
        assert [gold[f"units_{i.lower()}"] for i in LDP_INDUSTRIES] == list(v["right"]["units"])
        assert v["right"]["near"] == 1  # no other plan within a dollar of the optimum
    elif t.prompt_class == "RCP":
        assert (gold["current_aht"], gold["true_tq_aht"]) == (v["w_aht"], v["true_tq"])
        assert gold["fcr_gap"] == pytest.approx(v["fcr_gap"], abs=0.051)
    elif t.prompt_class == "CRP":
        assert gold["blended_margin"] == pytest.approx(v["weighted"], abs=0.006)
    if "decision" in v:
        assert t.golden.decision == f"DECISION: {v['decision']}"
        # the trap recomputed from the inputs flips the decision
        assert v["lazy_decision"] != v["decision"]
    return v


def test_deliverables_golden_recomputed_from_inputs(deliverables: Path) -> None:
    for t in _packages(deliverables):
        _check_golden(t, deliverables / t.id)


def _deterministic(results: list[Any]) -> list[Any]:
    return [r for r in results if not r.judged]


def _check_correct_response(t: DeliverableTask, v: dict[str, Any], out: Path) -> None:
    text = respond(t, v, out, falls=set())
    results = run_verifiers(t.verifiers, text, out)
    failed = [(r.id, r.status, r.evidence) for r in _deterministic(results) if r.status != "pass"]
    assert not failed, (t.id, failed)
    assert verifier_pass_rate(_deterministic(results)).v == 100.0
    rate = verifier_pass_rate(results)  # llm_check without a judge: counted, not passed
    assert rate.unobservable == rate.judged
    if rate.judged:
        assert rate.v < 100.0
    judged = run_verifiers(t.verifiers, text, out, judge=lambda c, x: (True, "ok"))
    assert verifier_pass_rate(judged).v == 100.0


def _check_traps(t: DeliverableTask, v: dict[str, Any], out: Path) -> int:
    """Each trap's verifiers fail on a response that falls into it; the number of traps."""
    for trap in t.traps:
        trap_out = out / trap.id
        text = respond(t, v, trap_out, falls={trap.kind})
        results = {r.id: r for r in run_verifiers(t.verifiers, text, trap_out)}
        for vid in trap.verifiers:
            assert results[vid].status == "fail", (t.id, trap.id, vid, results[vid].evidence)
        assert verifier_pass_rate(list(results.values())).v < 80.0 or len(trap.verifiers) < 3
    return len(t.traps)


def test_correct_response_passes_every_deterministic_verifier(
    deliverables: Path, tmp_path: Path
) -> None:
    for t in _packages(deliverables):
        _check_correct_response(t, recompute(t, deliverables / t.id), tmp_path / t.id)


def test_each_trap_is_caught_by_its_verifiers(deliverables: Path, tmp_path: Path) -> None:
    caught = sum(_check_traps(t, recompute(t, deliverables / t.id), tmp_path / t.id)
                 for t in _packages(deliverables))
    assert caught >= 6


# ---- deliverables: no class has a fixed decision ---------------------------------------------

DECISION_SEEDS = (11, 12, 13, 14)
DECISION_TASKS = 50  # 10 per class per seed: 40 per class
VARIANT_SAMPLES = 3  # packages of each variant whose responses and traps are verified
# per decision: what the expert test says, and what the lazy test says when the lure gives it
EXPERT_SAYS = {"SIGN FIXED CONTRACT": "recommends to sign the fixed contract",
               "USE SPOT MARKET": "recommends to use the spot market",
               "ACCEPT": "accepts", "REJECT": "rejects",
               "INVEST": "invests", "DO NOT INVEST": "declines",
               "GO": "says Go.", "NO GO": "says No Go."}
LAZY_SAYS = {"SIGN FIXED CONTRACT": "recommends the fixed contract",
             "USE SPOT MARKET": "recommends the spot market",
             "ACCEPT": "flipping the decision to ACCEPT", "REJECT": "flipping the decision to REJECT",
             "INVEST": "invests", "DO NOT INVEST": "declines",
             "GO": "says Go.", "NO GO": "says No Go."}
# how the golden answer (after ': ') and the last solution step (after '-> ') conclude
CONCLUSION = {"SIGN FIXED CONTRACT": "sign the fixed contract", "USE SPOT MARKET": "use the spot market",
              "ACCEPT": "ACCEPT", "REJECT": "REJECT", "INVEST": "invest",
              "DO NOT INVEST": "do not invest", "GO": "Go", "NO GO": "No Go"}


@pytest.fixture(scope="module")
def many_deliverables(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[DeliverableTask, Path]]:
    root = tmp_path_factory.mktemp("many-deliverables")
    for seed in DECISION_SEEDS:
        generate_deliverables(root / str(seed), tasks=DECISION_TASKS, seed=seed)
    return [(t, t.directory) for seed in DECISION_SEEDS  # type: ignore[misc]
            for t in _packages(root / str(seed))]


def _decision(text: str) -> str:
    found = re.findall(r"DECISION: ([A-Z][A-Z ]*[A-Z])", text)
    assert len(found) == 1, text
    return found[0]


def test_every_decision_class_has_both_decisions(
    many_deliverables: list[tuple[DeliverableTask, Path]]
) -> None:
    """An agent that always gives one answer for a class cannot pass the decision verifier: over
    40 packages per class both decisions are right, and each is right at least a quarter of the
    time."""
    decisions: dict[str, list[str]] = {}
    for t, _ in many_deliverables:
        if t.golden.decision and t.golden.decision.startswith("DECISION: "):
            decisions.setdefault(t.prompt_class, []).append(_decision(t.golden.decision))
    assert set(decisions) == {"CRP", "SCP", "LDP", "FSP"}  # RCP ends in a mandated line
    for cls, got in decisions.items():
        assert len(got) == 4 * DECISION_TASKS // len(SCENARIOS)
        options = set(re.findall(r"`DECISION: ([A-Z ]+)`", _task(many_deliverables, cls).prompt))
        assert set(got) == options and len(options) == 2, (cls, set(got), options)
        assert min(got.count(o) for o in options) >= len(got) // 4, (cls, sorted(got))


def test_ldp_bar_sits_between_the_optimum_and_the_lures_of_its_side(
        many_deliverables: list[tuple[DeliverableTask, Path]]) -> None:
    """LDP (an integer program): for Go the bar sits above the draft-budget lure, for No Go
    below the lures of minutes-as-hours and of the LP relaxation; every lure is 2 USD or more off."""
    for t, d in many_deliverables:
        if t.prompt_class != "LDP":
            continue
        v = recompute(t, d)
        best, lures = v["right"]["total"], v["lures"]
        assert all(abs(lure["total"] - best) >= 2.0 for lure in lures.values())
        assert lures["stale_placeholder"]["total"] < best < min(lures["unit_mismatch"]["total"],
                                                    lures["default_assumption"]["total"])
        if v["decision"] == "GO":
            assert lures["stale_placeholder"]["total"] < v["bar"] <= best
        else:
            assert best < v["bar"] <= min(lures["unit_mismatch"]["total"], lures["default_assumption"]["total"])


def _task(pkgs: list[tuple[DeliverableTask, Path]], cls: str) -> DeliverableTask:
    return next(t for t, _ in pkgs if t.prompt_class == cls)


def test_lure_gives_the_other_decision_and_texts_agree(
    many_deliverables: list[tuple[DeliverableTask, Path]]
) -> None:
    """Per package, read back with load_package: the trap's lure leads to the decision that is
    not golden, and every text stating the decision or its reasoning says the golden one."""
    for t, _ in many_deliverables:
        if t.prompt_class == "RCP":
            assert all("DECISION:" not in trap.lure for trap in t.traps)
            continue
        golden = _decision(t.golden.decision or "")
        options = set(re.findall(r"`DECISION: ([A-Z ]+)`", t.prompt))
        [other] = options - {golden}
        for trap in t.traps:  # an LDP trap on the decision's other side leaves the decision as it is
            if t.prompt_class != "LDP" or "DECISION:" in trap.lure:
                assert _decision(trap.lure) == other, (t.id, trap.lure)
        assert any("DECISION:" in trap.lure for trap in t.traps)
        specs = {s.id: s for s in t.verifiers}
        assert specs["decision"].expected == t.golden.decision  # type: ignore[union-attr]
        if t.prompt_class == "SCP":
            assert specs["recommendation"].expected == golden  # type: ignore[union-attr]
        assert t.golden.answer.rstrip(".").endswith(f": {CONCLUSION[golden]}"), t.golden.answer
        assert t.solution_logic[-1].rstrip(".").endswith(f"-> {CONCLUSION[golden]}"), t.solution_logic
        assert EXPERT_SAYS[golden] in t.expert_test and EXPERT_SAYS[other] not in t.expert_test
        assert LAZY_SAYS[other] in t.lazy_ai_test and LAZY_SAYS[golden] not in t.lazy_ai_test
        for c in (s for s in t.verifiers if s.kind == "llm_check"):  # judged criteria: no verdict
            assert not set(CONCLUSION.values()) & set(re.findall(r"[A-Za-z ]+", c.criterion)), c  # type: ignore[union-attr]


def test_both_directions_recomputed_verified_and_trapped(
    many_deliverables: list[tuple[DeliverableTask, Path]], tmp_path: Path
) -> None:
    """The golden figures follow from the inputs in every package; the correct response passes and
    each trap is caught in packages of either direction, of every variant the generator makes.
    The responses and verifiers (each output file read in a limited worker process) run on
    VARIANT_SAMPLES packages of each variant (class, decision, traps: 9 in the 200), not on all 200: a package of a variant already verified repeats the same response
    and verifier code on other numbers, which the golden recomputation checks in all 200."""
    seen: set[tuple[str, str]] = set()
    verified: dict[tuple[object, ...], int] = {}
    for t, d in many_deliverables:
        v = _check_golden(t, d)
        seen.add((t.prompt_class, v.get("decision", "")))
        variant = (t.prompt_class, v.get("decision", ""), tuple(sorted(trap.kind for trap in t.traps)))
        if verified.get(variant, 0) >= VARIANT_SAMPLES:
            continue
        verified[variant] = verified.get(variant, 0) + 1
        out = tmp_path / d.parent.name / t.id
        _check_correct_response(t, v, out / "right")
        _check_traps(t, v, out / "traps")
    assert len(seen) == 2 * 4 + 1  # two decisions for four classes, RCP without one
    assert {("LDP", "GO"), ("LDP", "NO GO")} <= {(cls, decision) for cls, decision, _ in verified}
    assert {(cls, decision) for cls, decision, *_ in verified} == seen  # both directions of each class verified
    assert set(verified.values()) == {VARIANT_SAMPLES}


def test_missing_outputs_are_failed_or_unobservable(deliverables: Path, tmp_path: Path) -> None:
    t = next(t for t in _packages(deliverables) if t.prompt_class == "SCP")
    results = {r.id: r for r in run_verifiers(t.verifiers, "DECISION: REJECT", tmp_path)}
    assert results["file_cost_plan"].status == "fail"
    assert results["unit_cost_operational"].status == "unobservable"
    assert results["json_schema"].status == "unobservable"


def test_analytics_has_a_chart_with_chinese_labels(tmp_path: Path) -> None:
    """AIDABench's main chart failure is CJK labels drawn without glyphs: one template has them."""
    from openpyxl import load_workbook

    from deskbench.tracks.analytics.generate.tasks import generate_analytics
    from deskbench.tracks.analytics.tasks import read_tasks

    generate_analytics(tmp_path, tasks=11, seed=3)
    (task,) = [t for t in read_tasks(tmp_path / "tasks.jsonl").items if t.template == "viz_city_bar_cjk"]
    assert task.chart is not None
    labels = task.chart.series[0].labels
    assert all("\u4e00" <= ch <= "\u9fff" for label in labels for ch in label)
    ws = load_workbook(tmp_path / task.inputs[0]).active
    totals: dict[str, float] = {}
    for city, _store, sales in ws.iter_rows(min_row=2, values_only=True):
        totals[city] = totals.get(city, 0.0) + sales
    assert task.chart.series[0].values == [round(totals[c], 2) for c in labels]
    assert labels == sorted(totals, key=lambda c: (-totals[c], c))
