"""Appendix H (tokens and rounds per task type, Figs. 6-7) on a constructed run whose numbers are
worked out by hand here: avg@k per task then over tasks, error episodes left out, systems ordered
by overall consumption; in the report section's data, table and figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbench.models.types import Usage
from deskbench.runs.store import Episode, EpisodeStatus, RunStore
from deskbench.tracks.analytics.stats import by_consumption, effort_png, system_effort
from deskbench.tracks.analytics.tasks import (
    AnalyticsSubmission,
    AnalyticsTask,
    ChartSpec,
    ReferenceFile,
    SheetSpec,
)

BIG, SMALL = "analyst-agent:big", "analyst-agent:small"
# task -> [(status, output tokens, rounds) per attempt] for BIG; input tokens are 10x the output
BIG_EPISODES: dict[str, list[tuple[EpisodeStatus, int, int]]] = {
    "q1": [("ok", 1000, 2), ("ok", 3000, 4)],  # 2000 tokens, 3 rounds
    "q2": [("ok", 500, 1), ("error", 0, 0)],  # the error is left out: 500, 1
    "v1": [("ok", 4000, 6), ("limit", 2000, 2)],  # a round-limit episode counts: 3000, 4
    "f1": [("ok", 9000, 10), ("ok", 7000, 12)],  # 8000, 11
}


def _tasks() -> list[AnalyticsTask]:
    chart = ChartSpec(chart_type="bar", series=[{"name": "s", "labels": ["a"], "values": [1.0]}])
    return [
        AnalyticsTask(id="q1", category="qa", instruction="Total?", inputs=["x.csv"], difficulty_steps=3, answer="1"),
        AnalyticsTask(id="q2", category="qa", instruction="Mean?", inputs=["x.csv"], difficulty_steps=8, answer="2"),
        AnalyticsTask(id="v1", category="visualization", instruction="Plot it.", inputs=["x.csv"], difficulty_steps=5,
                      key_points=["a bar"], chart=chart),
        AnalyticsTask(id="f1", category="file_generation", instruction="Totals into o.csv.", inputs=["x.csv"],
                      difficulty_steps=14, reference_file=ReferenceFile(
                          path="ref.csv", output_name="o.csv", sheets=[SheetSpec(name="o", columns=["a"], rows=1)])),
    ]


def make_run(run_dir: Path) -> Path:
    store = RunStore(run_dir)
    store.save_tasks(_tasks())
    store.set_meta("tasks_file", str(run_dir / "tasks.jsonl"))
    (run_dir / "x.csv").write_text("a\n1\n")
    (run_dir / "ref.csv").write_text("a\n1\n")
    for task_id, attempts in BIG_EPISODES.items():
        for attempt, (status, out, rounds) in enumerate(attempts):
            store.record(Episode(task_id=task_id, system=BIG, attempt=attempt, status=status,
                                 error="provider failed" if status == "error" else None,
                                 usage=Usage(input_tokens=10 * out, output_tokens=out),
                                 submission=AnalyticsSubmission(id=task_id, answer="Final answer: 1", rounds=rounds)))
            store.record(Episode(task_id=task_id, system=SMALL, attempt=attempt, status="ok",
                                 usage=Usage(input_tokens=1000, output_tokens=100),
                                 submission=AnalyticsSubmission(id=task_id, answer="Final answer: 1", rounds=1)))
    store.close()
    return run_dir


def test_appendix_h_by_hand_in_the_report(tmp_path: Path) -> None:
    from deskbench.report.data import build_report
    from deskbench.report.render import render_html

    run = make_run(tmp_path / "an")
    report = build_report([run])
    section = report.section("analytics").data
    big, small = (next(e for e in section.effort if e.system.startswith(s)) for s in (BIG, SMALL))
    assert big.k == 2 and big.errors_left_out == 1 and big.overall.episodes == 7 and big.overall.tasks == 4
    assert {c: (e.output_tokens, e.rounds) for c, e in big.by_category.items()} == {
        "qa": (1250, 2), "visualization": (3000, 4), "file_generation": (8000, 11)}
    # avg@k: (2000 + 500 + 3000 + 8000) / 4, not the episodes' mean 26500 / 7
    assert big.overall.output_tokens == 3375 and big.overall.rounds == pytest.approx(4.75)
    assert big.overall.input_tokens == 33750
    assert (small.overall.output_tokens, small.overall.rounds, small.errors_left_out) == (100, 1, 0)
    assert [e.system for e in by_consumption(section.effort, "output_tokens")] == [big.system, small.system]
    figures = section.figures()
    assert figures["analytics_tokens"].startswith(b"\x89PNG") and figures["analytics_rounds"].startswith(b"\x89PNG")
    html = render_html(report)
    assert 'id="analytics-effort"' in html and "AIDABench Appendix H" in html
    table = html.split('id="analytics-effort"', 1)[1].split("</table>", 1)[0]
    row = table.split(f'<tr data-system="{big.system}">', 1)[1].split("</tr>", 1)[0]
    assert [c.split("</td>")[0] for c in row.split("<td>")[2:]] == [
        "2", "3,375", "1,250", "3,000", "8,000", "4.8", "2.0", "4.0", "11.0", "33,750", "1"]
    assert table.index(f'<tr data-system="{big.system}">') < table.index(f'<tr data-system="{small.system}">')


def test_no_episode_leaves_no_average_and_the_figure_still_draws() -> None:
    empty = system_effort([], system="s", k=1)
    assert empty.overall.output_tokens is None and empty.by_category == {}
    assert effort_png([empty], "rounds").startswith(b"\x89PNG")
