"""`deskbench import`: official (and third-party) prediction files as systems of a run, so that
score, report and analyse read them like runs (issue 18 row 15)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import run_cli

from deskbench.runs.imported import imported_systems
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep

TASKS = [
    {"id": "q1", "question": "What is the harbour fee?", "answer_variants": [["$120"]],
     "evidence": [{"document": "a.pdf", "page": 1}], "domain": "transport", "category": "report"},
    {"id": "q2", "question": "Which two years had a deficit?", "answer_variants": [["2019", "2021"]],
     "evidence": [{"document": "a.pdf", "page": 2}, {"document": "a.pdf", "page": 4}], "domain": "finance"},
    {"id": "q3", "question": "Who signed both permits?", "answer_variants": [["Jane Roe"], ["J. Roe"]],
     "evidence": [{"document": "b.pdf", "page": 1}, {"document": "c.pdf", "page": 3}], "domain": "legal"},
    {"id": "q4", "question": "Is the bakery approved?", "answer_variants": [["yes"]],
     "evidence": [{"document": "b.pdf", "page": 2}], "domain": "legal"},
    {"id": "q5", "question": "How many inspections?", "answer_variants": [["7"]],
     "evidence": [{"document": "c.pdf", "page": 1}], "domain": "health"},
    {"id": "q6", "question": "What colour is the logo?", "answer_variants": [["blue"]],
     "evidence": [{"document": "c.pdf", "page": 2}], "domain": "health"},
    {"id": "q7", "question": "Which supplier is cheapest?", "answer_variants": [["Acme"]],
     "evidence": [{"document": "d.pdf", "page": 1}, {"document": "e.pdf", "page": 1}], "domain": "finance"},
    {"id": "q8", "question": "What is the permit number?", "answer_variants": [["P-204"]],
     "evidence": [{"document": "b.pdf", "page": 5}], "domain": "legal"},
]


def _bm25_row(question: str, answer: list[str], cites: list[tuple[str, object]], queries: list[str],
              **extra: object) -> dict:
    """A row as the official BM25 MLLM agent writes it (baselines/bm25-mllm-agent/openai_agent.py)."""
    trajectory = []
    for i, q in enumerate(queries, 1):
        trajectory.append({"iteration": i, "role": "assistant", "finish_reason": "tool_calls",
                           "usage": {"prompt_tokens": 1000 * i, "completion_tokens": 50, "total_tokens": 1000 * i + 50},
                           "content": None, "tool_calls": [{"id": f"c{i}", "name": "search_documents", "arguments": {"query": q}}],
                           "tool_results": [{"tool_call_id": f"c{i}", "name": "search_documents", "query": q,
                                             "results": [{"file": "a.pdf", "page": i}]}]})
    trajectory.append({"iteration": len(queries) + 1, "role": "assistant", "finish_reason": "stop",
                       "usage": {"prompt_tokens": 3000, "completion_tokens": 80, "total_tokens": 3080}, "content": "{}",
                       "parsed_answer": {"answer": answer, "citations": [{"file": f, "page": p} for f, p in cites]}})
    return {"question": question, "answer": answer, "citations": [{"file": f, "page": p} for f, p in cites],
            "iterations": len(queries) + 1,
            "search_history": [{"iteration": i, "query": q, "num_results": 1} for i, q in enumerate(queries, 1)],
            "trajectory": trajectory, "model": "gpt-5-mini-2025-08-07",
            "ground_truth_answers": ["whatever"], "category": "report", **extra}


def _official_predictions() -> list[dict]:
    return [
        _bm25_row("What is the harbour fee?", ["$120"], [("a.pdf", 1)], ["harbour fee"], id="q1"),
        # no id: matched by the question text, as the official evaluator does
        _bm25_row("Which two years had a deficit?", ["2019"], [("a.pdf", 2), ("a.pdf", "4")],
                  ["deficit", "deficit years", "budget deficit 2021"]),
        _bm25_row("Who signed both permits?", ["J. Roe"], [("b.pdf", 1), ("c.pdf", 3)],
                  ["permit signature", "signed by"], id="q3"),
        _bm25_row("Is the bakery approved?", ["no"], [("b.pdf", 2), ("b.pdf", "p. 2")], ["bakery approval"], id="q4"),
        # the RLM baseline's row (baselines/recursive-lm/rlm_agent.py): usage dict as trajectory
        {"question": "How many inspections?", "answer": ["7"], "citations": [{"file": "c.pdf", "page": 1}],
         "model": "openai/gpt-5-mini", "raw_response": "There were 7 inspections.", "id": "q5",
         "trajectory": {"execution_time": 41.5, "llm_calls": 6, "input_tokens": 90000, "output_tokens": 1200}},
        # an error row (process_dataset.py): no answer
        {"question": "What colour is the logo?", "id": "q6", "error": "Request timed out",
         "error_traceback": "Traceback ...", "ground_truth_answers": ["blue"], "category": "report"},
        # q7 has no prediction; this one matches no task
        _bm25_row("What is the mayor's name?", ["Smith"], [("z.pdf", 1)], ["mayor"], id="zz"),
        _bm25_row("What is the permit number?", ["P-204"], [("b.pdf", 5)], ["permit number", "permit no", "P-204", "number"],
                  id="q8"),
    ]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _json(*args: str) -> dict:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _fails(*args: str) -> str:
    proc = run_cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


METRICS = ("n", "accuracy", "accuracy_ci", "mean_anls", "page_f1", "page_f1_ci", "doc_f1", "doc_f1_ci", "kuiper",
           "wasted_effort_ratio")


def _metrics(report: dict) -> dict:
    picked = {k: report.get(k) for k in METRICS}
    picked["by_hop_type"] = {h: {k: g.get(k) for k in METRICS} for h, g in report["by_hop_type"].items()}
    return picked


@pytest.fixture
def imported(tmp_path: Path) -> tuple[Path, Path, Path]:
    tasks = _write(tmp_path / "tasks.jsonl", TASKS)
    preds = _write(tmp_path / "official.jsonl", _official_predictions())
    run = tmp_path / "run"
    proc = run_cli("import", str(preds), "--tasks", str(tasks), "--system", "bm25-official", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    assert "8 predictions, 7 episodes (1 error rows), 1 matching no task, 1 tasks without a prediction" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert any("1 predictions match no task" in w and "zz" in w for w in warnings), proc.stderr
    assert any("1 citations could not be read" in w for w in warnings), proc.stderr
    return tasks, preds, run


def test_imported_run_scores_as_the_file(imported: tuple[Path, Path, Path]) -> None:
    tasks, preds, run = imported
    from_file = _json("score", str(preds), "--tasks", str(tasks), "--json")
    from_run = _json("score", str(run), "--json")["bm25-official"]
    assert _metrics(from_run) == _metrics(from_file)
    assert from_run["n"] == 8 and from_run["accuracy"] == pytest.approx(5 / 8)  # q2: one of two list items, ANLS* 0.5
    assert from_run["missing_ids"] == ["q6", "q7"] and from_run["n_errors"] == 1  # the error row: an agent error
    assert from_file["missing_ids"] == ["q7"]
    assert from_run["kuiper"] is not None
    # the official evaluator's numbers too: error rows score 0, tasks without a prediction are not counted
    off_file = _json("score", str(preds), "--tasks", str(tasks), "--official", "--json")
    off_run = _json("score", str(run), "--official", "--json")["bm25-official"]
    assert {k: off_run[k] for k in ("n", "accuracy", "mean_anls", "kuiper", "wasted_effort_ratio")} == \
        {k: off_file[k] for k in ("n", "accuracy", "mean_anls", "kuiper", "wasted_effort_ratio")}
    # Page F1 alone differs: the file's page "4" and "p. 2" count as written in --official, while the
    # import reads them as `deskbench score` does by default (a number; dropped and counted)
    diffs = _diff(off_file["official_metrics"], off_run["official_metrics"])
    assert diffs and all(path.endswith("/page_f1") for path in diffs), diffs
    # with page numbers as numbers, every official metric is the file's
    clean_rows = _official_predictions()
    clean_rows[1]["citations"][1]["page"] = 4
    clean_rows[3]["citations"] = clean_rows[3]["citations"][:1]
    clean = _write(preds.parent / "clean.jsonl", clean_rows)
    proc = run_cli("import", str(clean), "--tasks", str(tasks), "--system", "clean", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    off_clean = _json("score", str(clean), "--tasks", str(tasks), "--official", "--json")
    off_run = _json("score", str(run), "--system", "clean", "--official", "--json")
    assert set(off_run) == {"clean"}
    off_run = off_run["clean"]
    assert off_run["official_metrics"] == off_clean["official_metrics"]
    assert _metrics(_json("score", str(run), "--system", "clean", "--json")["clean"]) == \
        _metrics(_json("score", str(clean), "--tasks", str(tasks), "--json"))


def _diff(a: object, b: object, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{path}/{k}")]
    return [] if a == b else [path]


def test_episodes_carry_the_prediction_and_its_trajectory(imported: tuple[Path, Path, Path]) -> None:
    tasks, preds, run = imported
    store = RunStore(run, create=False)
    eps = {e.task_id: e for e in store.episodes("bm25-official")}
    assert sorted(eps) == ["q1", "q2", "q3", "q4", "q5", "q6", "q8"]
    q2 = eps["q2"]
    assert q2.status == "ok" and q2.submission is not None and q2.submission.id == "q2"  # matched by text
    assert q2.submission.iterations == 4 and len(q2.submission.search_history or []) == 3
    searches = [s for s in q2.trajectory if isinstance(s, ToolCallStep)]
    assert [s.arguments["query"] for s in searches] == ["deficit", "deficit years", "budget deficit 2021"]
    assert searches[0].result == {"pages": [["a.pdf", 1]]}
    calls = [s for s in q2.trajectory if isinstance(s, ModelCallStep)]
    assert len(calls) == 4 and q2.usage.input_tokens == 1000 + 2000 + 3000 + 3000 and q2.usage.calls == 4
    assert q2.usage.cost_usd is None  # no price is known for another's model: unknown, never $0
    q5 = eps["q5"]  # the RLM row: its usage, effort = LLM calls
    assert (q5.usage.input_tokens, q5.usage.output_tokens, q5.usage.seconds, q5.usage.calls) == (90000, 1200, 41.5, 6)
    assert q5.submission is not None and q5.submission.effort() == 6.0
    assert eps["q6"].status == "error" and eps["q6"].error == "Request timed out"
    record = imported_systems(store)["bm25-official"]
    assert record.sha256 and record.source == str(preds.resolve()) and record.unmatched == ["zz"]
    assert (record.rows, record.episodes, record.errors, record.missing) == (8, 7, 1, 1)
    assert store.meta("model_settings") is None  # no agent, no model


def test_report_and_analyses_read_imported_systems(imported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    tasks, preds, run = imported
    proc = run_cli("report", str(run), "--output", str(tmp_path / "report.html"))
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "report.html").read_text()
    assert "bm25-official (imported)" in html and "none (imported predictions)" in html
    record = imported_systems(RunStore(run, create=False))["bm25-official"]
    assert record.sha256[:12] in html
    items = _json_file("analyse", "items", str(run), "--output", str(tmp_path / "items.json"))
    assert len(items["items"]) == 8
    # a second imported system (a third party's file, deskbench's own format) for agreement
    other = _write(tmp_path / "other.jsonl", [
        {"id": t["id"], "answer": t["answer_variants"][0] if i % 2 else ["wrong"],
         "citations": [t["evidence"][0]], "steps": i + 1, "search_history": [f"query {i}", f"another {i}"]}
        for i, t in enumerate(TASKS)])
    proc = run_cli("import", str(other), "--tasks", str(tasks), "--system", "third-party", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    kappa = _json_file("analyse", "agreement", str(run), "--output", str(tmp_path / "kappa.json"))
    assert "bm25-official (imported)" in json.dumps(kappa) and "third-party (imported)" in json.dumps(kappa)
    drift = _json_file("analyse", "drift", str(run), "--output", str(tmp_path / "drift.json"))
    assert {s["system"] for s in drift["systems"]} >= {"bm25-official", "third-party"}
    both = _json("score", str(run), "--json")
    assert set(both) == {"bm25-official", "third-party"} and both["third-party"]["accuracy"] == pytest.approx(4 / 8)


def _json_file(*args: str) -> dict:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    out = Path(args[args.index("--output") + 1])
    return json.loads(out.read_text())


def test_reimport_is_a_no_op_another_file_is_refused(imported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    tasks, preds, run = imported
    db = run / "run.sqlite"
    count = lambda: sqlite3.connect(db).execute("SELECT COUNT(*) FROM episodes").fetchone()[0]  # noqa: E731
    assert count() == 7
    again = run_cli("import", str(preds), "--tasks", str(tasks), "--system", "bm25-official", "--out", str(run))
    assert again.returncode == 0 and "already imported" in again.stdout and "nothing to do" in again.stdout
    assert count() == 7
    # an import cut short is completed by the same command
    con = sqlite3.connect(db)
    con.execute("DELETE FROM episodes WHERE task_id IN ('q1', 'q8')")
    con.commit()
    data = _json("import", str(preds), "--tasks", str(tasks), "--system", "bm25-official", "--out", str(run), "--json")
    assert data["new_episodes"] == 2 and count() == 7
    changed = _write(tmp_path / "changed.jsonl", _official_predictions()[:3])
    line = _fails("import", str(changed), "--tasks", str(tasks), "--system", "bm25-official", "--out", str(run))
    assert "already holds system 'bm25-official', imported from" in line
    assert "give another --system name, or another --out" in line
    # a system 'deskbench run' wrote is not replaced either
    store = RunStore(run, create=False)
    store.record(Episode(task_id="q1", system="bm25-agent:openai/gpt-5-mini", status="ok"))
    line = _fails("import", str(changed), "--tasks", str(tasks), "--system", "bm25-agent:openai/gpt-5-mini",
                  "--out", str(run))
    assert "from 'deskbench run'; give another --system name" in line


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    tasks = _write(tmp_path / "tasks.jsonl", TASKS)
    run = tmp_path / "run"
    assert "no such file" in _fails("import", str(tmp_path / "nope.jsonl"), "--tasks", str(tasks), "--system", "s",
                                    "--out", str(run))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What is the harbour fee?", "answer": ["$120"]}\n{oops\n')
    assert "bad.jsonl:2: invalid JSON" in _fails("import", str(bad), "--tasks", str(tasks), "--system", "s",
                                                 "--out", str(run))
    stray = _write(tmp_path / "stray.jsonl", [{"question": "Nothing like it?", "answer": ["x"]}])
    assert "none of the 1 predictions" in _fails("import", str(stray), "--tasks", str(tasks), "--system", "s",
                                                 "--out", str(run))
    twice = _write(tmp_path / "twice.jsonl", [{"id": "q1", "answer": ["a"]}, {"id": "q1", "answer": ["b"]}])
    assert "answered by more than one prediction" in _fails("import", str(twice), "--tasks", str(tasks),
                                                            "--system", "s", "--out", str(run))
    assert not run.exists()  # nothing was created by a refused import
    ok = _write(tmp_path / "ok.jsonl", [{"id": "q1", "answer": ["$120"]}])
    other_tasks = _write(tmp_path / "other_tasks.jsonl", [dict(TASKS[0], id="new-task")])
    assert run_cli("import", str(ok), "--tasks", str(tasks), "--system", "s", "--out", str(run)).returncode == 0
    assert "already holds a run over other tasks" in _fails(
        "import", str(_write(tmp_path / "ok2.jsonl", [{"id": "new-task", "answer": ["$120"]}])),
        "--tasks", str(other_tasks), "--system", "s2", "--out", str(run))
