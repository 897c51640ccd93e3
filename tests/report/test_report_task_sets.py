"""`deskbench report` over runs of different task sets: the leaderboard groups systems by the
tasks they ran, bolds the best within a group only, and says which tasks each group covers."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import TASKS, _make_run, _record, docqa

from deskbench.report.data import build_report
from deskbench.report.render import render_html
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.report_models import best_values


def test_systems_over_different_tasks_are_ranked_apart(tmp_path: Path) -> None:
    full = _make_run(tmp_path / "full")  # 6 tasks: agent 50% and rag<1> 33% accuracy
    store = RunStore(tmp_path / "small")
    store.save_tasks(TASKS[:4])
    _record(store, "small", {t.id: ("right", [], 1) for t in TASKS[:4]}, 0.001, (10, 1))  # 4 of 4 right
    store.close()
    report = build_report([full, tmp_path / "small"])
    sets = docqa(report).task_sets
    assert [(s.index, s.n_tasks, s.systems, s.subset_of) for s in sets] == [
        (0, 6, ["agent", "rag<1>"], None), (1, 4, ["small"], 0)]
    assert sets[1].task_ids == ["t0", "t1", "t2", "t3"]
    assert {s.row.label: s.row.task_set for s in docqa(report).systems} == {"agent": 0, "rag<1>": 0, "small": 1}
    small = next(s.row for s in docqa(report).systems if s.row.label == "small")
    assert small.accuracy == 1.0  # would be the "best" of a single leaderboard
    assert best_values(docqa(report), 0)["accuracy"] == pytest.approx(0.5)  # agent: best among the 6-task systems
    assert best_values(docqa(report), 1)["accuracy"] is None  # alone in its set: nothing to rank

    html = render_html(report)
    table = html.split('<table id="leaderboard">')[1].split("</table>")[0]
    assert 'data-task-set="1"' in table and 'data-task-set="2"' in table
    assert "Task set 1: 6 task(s): <small>t0, t1, t2, t3, t4, t5</small>" in table
    assert "Task set 2: 4 task(s), a subset of task set 1: <small>t0, t1, t2, t3</small>" in table
    first, second = table.split('data-task-set="2"')
    assert "agent" in first and "rag&lt;1&gt;" in first and '"small"' in second
    rows = {r.split('"')[1]: r for r in table.split("<tr data-system=")[1:]}
    assert rows["agent"].count('class="best"') == 4 and 'class="best"' not in rows["small"]
    assert "within its task set" in html


def test_one_task_set_keeps_one_plain_leaderboard(tmp_path: Path) -> None:
    report = build_report([_make_run(tmp_path / "run")])
    assert len(docqa(report).task_sets) == 1 and docqa(report).task_sets[0].systems == ["agent", "rag<1>"]
    html = render_html(report)
    assert 'class="task-set"' not in html and "within its task set" not in html
