"""The analyses beside pass@k: input and output tokens apart (Appendix H), Figure 4's error
shares, Table 2's summary-ablation Δ; on hand-made scores, and through the CLI and report."""

from __future__ import annotations

import pytest

from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore
from deskbench.tracks.analytics.scoring.analytics_metrics import (
    attach_summary_ablations,
    full_setting_twin,
    pass_metrics,
    summarize_analytics,
)


def item(task: str, attempt: int, score: float, *, system: str = "s", category: str = "qa",
         error: str | None = None, inp: int = 0, outp: int = 0) -> AnalyticsItemScore:
    return AnalyticsItemScore(
        task_id=task, attempt=attempt, system=system, category=category, difficulty="easy",  # type: ignore[arg-type]
        status="scored", score=score, source="numeric",
        error_category=error if score < 1 else None,  # type: ignore[arg-type]
        tokens=inp + outp, input_tokens=inp, output_tokens=outp)


def test_input_and_output_tokens_are_reported_apart() -> None:
    m = pass_metrics([item("a", 0, 1.0, inp=9000, outp=1000), item("b", 0, 0.0, inp=3000, outp=500)], k=1)
    assert m.mean_input_tokens == 6000 and m.mean_output_tokens == 750 and m.mean_tokens == 6750


def test_error_shares_are_figure_4s_composition() -> None:
    items = [item("a", 0, 0.0, error="calculation"), item("b", 0, 0.0, error="calculation"),
             item("c", 0, 0.0, error="round_limit"), item("d", 0, 1.0),
             item("e", 0, 0.0, category="visualization", error="garbled_text"),
             item("f", 0, 1.0, category="file_generation")]
    r = summarize_analytics(items, system="s", k=1, task_ids=list("abcdef"))
    qa = r.error_shares["qa"]
    assert qa["calculation"] == pytest.approx(2 / 3) and qa["round_limit"] == pytest.approx(1 / 3)
    assert qa["semantic"] == 0.0  # the correct episode d is no bad case: not in the denominator
    assert r.error_shares["visualization"]["garbled_text"] == 1.0
    assert set(r.error_shares["file_generation"].values()) == {None}  # no bad case: no share, not 0%


def test_twin_names() -> None:
    assert full_setting_twin("analyst-agent[no-summary]:openai/m") == "analyst-agent:openai/m"
    assert full_setting_twin("analyst-agent[last-round-note,no-summary]:m (run)") == "analyst-agent[last-round-note]:m (run)"
    assert full_setting_twin("analyst-agent[last-round-note]:m") is None
    assert full_setting_twin("analyst-agent:m") is None


def test_summary_ablation_delta_is_table_2s() -> None:
    # w/ summary: qa a (1, 1, 0) b (1, 0, 0) -> avg@3 (2/3 + 1/3) / 2 = 0.5; file c (1, 1, 1) -> 1
    # w/o:        qa a (1, 0, 0) b (0, 0, 0) -> 1/6;                      file c (1, 1, 0) -> 2/3
    full, ablated = "analyst-agent:m", "analyst-agent[no-summary]:m"
    w = [item("a", i, s, system=full) for i, s in enumerate((1.0, 1.0, 0.0))]
    w += [item("b", i, s, system=full) for i, s in enumerate((1.0, 0.0, 0.0))]
    w += [item("c", i, 1.0, system=full, category="file_generation") for i in range(3)]
    wo = [item("a", i, s, system=ablated) for i, s in enumerate((1.0, 0.0, 0.0))]
    wo += [item("b", i, 0.0, system=ablated) for i in range(3)]
    wo += [item("c", i, s, system=ablated, category="file_generation") for i, s in enumerate((1.0, 1.0, 0.0))]
    reports = [summarize_analytics(w, system=full, k=3, task_ids=["a", "b", "c"]),
               summarize_analytics(wo, system=ablated, k=3, task_ids=["a", "b", "c"])]
    attach_summary_ablations(reports)
    assert reports[0].summary_ablation is None
    a = reports[1].summary_ablation
    assert a is not None and a.with_summary == full and a.k_with == a.k_without == 3
    assert a.avg_with["qa"] == pytest.approx(0.5) and a.avg_with["file_generation"] == pytest.approx(1.0)
    assert a.delta["qa"] == pytest.approx(1 / 6 - 0.5)
    assert a.delta["file_generation"] == pytest.approx(2 / 3 - 1)
    # overall weighs tasks: w/ (2/3 + 1/3 + 1) / 3, w/o (1/3 + 0 + 2/3) / 3
    assert a.delta["overall"] == pytest.approx((1 / 3 + 0 + 2 / 3) / 3 - (2 / 3 + 1 / 3 + 1) / 3)
    # a lone [no-summary] system gets no row
    alone = [summarize_analytics(wo, system=ablated, k=3, task_ids=["a", "b", "c"])]
    attach_summary_ablations(alone)
    assert alone[0].summary_ablation is None


def _two_system_run(run_dir):  # -> Path
    """One QA task x 2 attempts for a system and its [no-summary] twin, decided by the numeric
    check: w/ summary right, right (avg@2 = 1); w/o right, wrong (avg@2 = 1/2): Δ = -50 points."""
    from deskbench.models.types import Usage
    from deskbench.runs.store import Episode, RunStore
    from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask

    store = RunStore(run_dir)
    store.save_tasks([AnalyticsTask(id="a", category="qa", instruction="Total?", inputs=["x.xlsx"],
                                    difficulty_steps=3, answer="12.5", answer_value=12.5)])
    store.set_meta("tasks_file", str(run_dir / "tasks.jsonl"))
    for system, answers in (("analyst-agent:m", ("12.5", "12.5")), ("analyst-agent[no-summary]:m", ("12.5", "14"))):
        for attempt, answer in enumerate(answers):
            store.record(Episode(task_id="a", system=system, attempt=attempt, status="ok",
                                 usage=Usage(input_tokens=7000, output_tokens=1234),
                                 submission=AnalyticsSubmission(id="a", answer=f"Final answer: {answer}", rounds=2)))
    store.close()
    return run_dir


def test_delta_shares_and_tokens_reach_the_cli_json_and_the_report(tmp_path) -> None:
    import json

    from conftest import run_cli

    from deskbench.report.data import build_report
    from deskbench.report.render import render_html

    run = _two_system_run(tmp_path / "an")
    proc = run_cli("score", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    ablated = payload["analyst-agent[no-summary]:m"]
    assert ablated["summary_ablation"]["delta"]["overall"] == pytest.approx(-0.5)
    assert ablated["error_shares"]["qa"]["calculation"] == 1.0
    assert ablated["overall"]["mean_output_tokens"] == 1234 and ablated["overall"]["mean_input_tokens"] == 7000
    assert payload["analyst-agent:m"]["summary_ablation"] is None
    table = run_cli("score", str(run))
    assert "summary ablation (Table 2)" in table.stdout and "-50.00" in table.stdout
    assert "output tok" in table.stdout and "1,234" in table.stdout
    html = render_html(build_report([run]))
    assert 'id="analytics-summary-ablation"' in html and "-50.00" in html
    assert "Output tokens / episode" in html and "1,234" in html
