"""`deskbench diagnose` per track: an answered docqa episode is ok (not no_output), an analytics
episode is ok when it produced what its category needs (the deliverables track: test_deliverables_run)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from deskbench.models.types import Usage
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.outputs import OutputFileRecord
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.analytics.generate.tasks import generate_analytics
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, read_tasks
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


def _diagnose(run: Path) -> dict:
    proc = run_cli("diagnose", str(run), "--json", "--episodes")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _categories(data: dict) -> dict[str, str]:
    return {d["task_id"]: d["category"] for d in data["episodes"]}


def test_diagnose_a_docqa_run(tmp_path: Path) -> None:
    tasks = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[["a"]]) for i in range(8)]
    store = RunStore(tmp_path / "run")
    store.save_tasks(tasks)
    system = "bm25-agent:m"

    def ep(task_id: str, status: str = "ok", answer: list[str] | None = None, error: str | None = None) -> Episode:
        sub = DocQASubmission(id=task_id, answer=answer) if answer is not None else None
        return Episode(task_id=task_id, system=system, status=status, error=error,  # type: ignore[arg-type]
                       submission=sub, usage=Usage(calls=1, input_tokens=5, output_tokens=2))

    for e in (ep("t0", answer=["a"]), ep("t1", answer=["wrong, but an answer"]), ep("t2", answer=["a"]),
              ep("t3", answer=[]), ep("t4", "limit", error="no answer after 10 iterations"),
              ep("t5", "error", error="APITimeoutError: Request timed out."),
              ep("t6", "error", error="ValueError: unparseable answer"),
              ep("t7", answer=["I'm sorry, I can't help with that."])):
        store.record(e)
    data = _diagnose(tmp_path / "run")
    assert _categories(data) == {"t0": "ok", "t1": "ok", "t2": "ok", "t3": "no_answer", "t4": "step_limit",
                                 "t5": "timeout", "t6": "model_error", "t7": "content_policy"}
    (s,) = data["systems"]
    assert s["ok"] == 3 and s["success_rate"] == 3 / 8 and "no_output" not in s["categories"]
    text = run_cli("diagnose", str(tmp_path / "run"))
    assert text.returncode == 0 and "no_output" not in text.stdout


def test_diagnose_an_analytics_run(tmp_path: Path) -> None:
    generate_analytics(tmp_path / "tasks", tasks=6, seed=0)
    tasks = read_tasks(tmp_path / "tasks" / "tasks.jsonl").items
    by_cat = {c: [t for t in tasks if t.category == c] for c in ("qa", "visualization", "file_generation")}
    assert all(len(v) >= 2 for v in by_cat.values()), {c: len(v) for c, v in by_cat.items()}
    (qa1, qa2), (viz1, viz2), (fg1, fg2) = (v[:2] for v in by_cat.values())
    assert fg1.reference_file is not None
    store = RunStore(tmp_path / "run")
    store.save_tasks(tasks)
    system = "analyst-agent:m"

    def ep(task_id: str, answer: str = "", files: tuple[str, ...] = (), status: str = "ok",
           failed_tail: str | None = None, attempt: int = 0) -> Episode:
        sub = AnalyticsSubmission(id=task_id, answer=answer, files=[OutputFileRecord(name=f, size=10, sha256="0" * 64) for f in files])
        steps = [] if failed_tail is None else [ToolCallStep(name="execute_code", arguments={"code": "..."},
                                                             result={"exit_code": 1, "error_tail": failed_tail})]
        return Episode(task_id=task_id, system=system, attempt=attempt, status=status,  # type: ignore[arg-type]
                       error="round limit" if status == "limit" else None,
                       submission=sub if status == "ok" else None, trajectory=steps)

    for e in (ep(qa1.id, answer="The total is 42."), ep(qa2.id, files=("notes.png",)),
              ep(viz1.id, files=("chart.png",)), ep(viz2.id, answer="I drew it."),
              ep(fg1.id, answer="saved", files=(fg1.reference_file.output_name,)),
              ep(fg2.id, answer="saved", failed_tail="Traceback...\nKeyError: 'Region'"),
              ep(qa1.id, status="limit", attempt=1)):
        store.record(e)
    data = _diagnose(tmp_path / "run")
    got = {(d["task_id"], d["attempt"]): d["category"] for d in data["episodes"]}
    assert got == {(qa1.id, 0): "ok", (qa2.id, 0): "no_answer", (viz1.id, 0): "ok",
                   (viz2.id, 0): "file_not_produced", (fg1.id, 0): "ok",
                   (fg2.id, 0): "file_generation_failed:wrong_column", (qa1.id, 1): "round_limit"}
    (s,) = data["systems"]
    assert s["ok"] == 3 and s["episodes"] == 7 and "no_output" not in s["categories"]
