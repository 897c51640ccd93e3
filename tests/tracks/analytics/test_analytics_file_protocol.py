"""Which evaluator scores analytics files, and the protocol notes that say so (AIDABench §3.3.3,
Listing 5): with --file-judge every file goes to the File Judge (the paper's protocol), the
comparator's verdict kept beside it; --file-judge-deferred sends it only what the comparator
cannot read; without a judge the comparator decides. The File Judge here is a scripted model on
the wire (tests/fake_openai.py) that rejects every file the comparator passes, so who decided
shows in the score."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.models.resilient import ResilientModel
from deskbench.models.settings import Sampling, resolve
from deskbench.runs.protocol import all_paper, describe
from deskbench.sandbox import Sandbox
from deskbench.tracks.analytics.generate.tasks import generate_analytics
from deskbench.tracks.analytics.scoring.analytics import (
    AnalyticsItemScore,
    AnalyticsJudges,
    analytics_score_protocol,
)
from deskbench.tracks.analytics.scoring.analytics_metrics import summarize_analytics
from deskbench.tracks.analytics.scoring.file_judge import FileJudge
from deskbench.tracks.analytics.tasks import AnalyticsTask, read_tasks, write_tasks

REJECT = {"is_correct": False, "reason": "judged wrong on purpose: the File Judge decided"}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESKBENCH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("analytics")
    generate_analytics(out, tasks=11, seed=7)
    return out


def file_task(tasks_dir: Path) -> AnalyticsTask:
    return next(t for t in read_tasks(tasks_dir / "tasks.jsonl").items if t.template == "file_region_summary")


def is_judge(body: dict[str, Any]) -> bool:
    return any("File Judge" in (m.get("content") or "") for m in body["messages"] if m["role"] == "user")


def model(name: str, url: str = "http://127.0.0.1:9") -> ResilientModel:
    from deskbench.models.openai_chat import OpenAIChat
    return ResilientModel(OpenAIChat(name, base_url=url, api_key="k", id=f"openai-compat/{name}"),
                          settings=resolve(f"openai-compat/{name}", Sampling(), "judge"))


# -- the protocol notes follow the options ----------------------------------------------------


def test_protocol_notes_change_with_the_options(generated: Path) -> None:
    tasks = read_tasks(generated / "tasks.jsonl").items
    by_aspect = lambda notes: {n.aspect: n for n in notes}  # noqa: E731

    bare = by_aspect(analytics_score_protocol(AnalyticsJudges(), tasks))
    assert list(bare) == ["qa evaluator", "chart evaluator", "file evaluator", "structure strictness"]
    assert [bare[a].source for a in bare] == ["deskbench", "deskbench", "deskbench", "paper"]
    assert "deterministic check" in bare["qa evaluator"].detail and "unscored" in bare["chart evaluator"].detail
    assert "comparator, no model" in bare["file evaluator"].detail

    qa, chart, files = model("qa"), model("chart"), FileJudge(model("files"), Sandbox(unsafe_local=True))
    full = analytics_score_protocol(AnalyticsJudges(qa=qa, chart=chart, file=files), tasks)
    assert all_paper(full)
    notes = by_aspect(full)
    assert "--judge openai-compat/qa;" in notes["qa evaluator"].detail
    assert "--chart-judge openai-compat/chart" in notes["chart evaluator"].detail
    assert "File Judge on every file, --file-judge openai-compat/files" in notes["file evaluator"].detail

    deferred = by_aspect(analytics_score_protocol(AnalyticsJudges(qa=qa, chart=chart, file=files, file_all=False), tasks))
    assert deferred["file evaluator"].source == "deskbench"
    assert "--file-judge-deferred" in deferred["file evaluator"].detail
    assert deferred["structure strictness"].source == "paper" and "instruction" in deferred["structure strictness"].detail

    # a task author's strict_structure against the instruction's reading overrides it: deskbench's, named
    # (the summary's key points ask for "the five columns in order": strict when read)
    ft = file_task(generated)
    assert ft.reference_file is not None and ft.reference_file.strict_structure is None
    forced = ft.model_copy(update={"reference_file": ft.reference_file.model_copy(update={"strict_structure": False})})
    others = [t for t in tasks if t.id != ft.id]
    strict = by_aspect(analytics_score_protocol(AnalyticsJudges(), [*others, forced]))["structure strictness"]
    assert strict.source == "deskbench" and ft.id in strict.detail and "1 of 2 file tasks" in strict.detail
    # the same decision as the reading (what the AIDA importer writes) is no override
    same = ft.model_copy(update={"reference_file": ft.reference_file.model_copy(update={"strict_structure": True})})
    kept = by_aspect(analytics_score_protocol(AnalyticsJudges(), [*others, same]))["structure strictness"]
    assert kept.source == "paper"

    report = summarize_analytics([], system="s", k=1, task_ids=[], protocol=full)
    assert [n.model_dump() for n in report.model_validate_json(report.model_dump_json()).protocol] == \
        [n.model_dump() for n in full]
    assert describe(analytics_score_protocol(AnalyticsJudges(), tasks)).startswith("qa evaluator: deskbench")


# -- who decides each file, end to end through the CLI ----------------------------------------


def test_file_judge_decides_every_file_and_the_comparator_is_kept_beside(bwrap: str, generated: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    task = file_task(generated)
    assert task.reference_file is not None
    reference = (generated / task.reference_file.path).read_bytes()
    tasks_file = tmp_path / "one.jsonl"
    write_tasks(tasks_file, [task.model_copy(update={
        "inputs": [str((generated / p).resolve()) for p in task.inputs],
        "reference_file": task.reference_file.model_copy(
            update={"path": str((generated / task.reference_file.path).resolve())})})])

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if is_judge(body):
            return {"kind": "text", "text": json.dumps(REJECT)}
        if not any(m["role"] == "tool" for m in body["messages"]):  # the agent saves the reference itself
            blob = base64.b64encode(reference).decode()
            code = (f"import base64\nopen('/mnt/result/{task.reference_file.output_name}', 'wb')"  # type: ignore[union-attr]
                    f".write(base64.b64decode('{blob}'))")
            return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": code})}
        return {"kind": "text", "text": "Saved."}

    out = tmp_path / "run"
    items = tmp_path / "items.jsonl"
    with FakeOpenAI(script=script) as fake:
        judge = f"openai-compat/judge@{fake.base_url}"
        proc = run_cli("run", "--agent", "analyst-agent", "--tasks", str(tasks_file), "--out", str(out),
                       "--model", f"openai-compat/scripted@{fake.base_url}", "--file-judge", judge,
                       "--concurrency", "1", "--quiet", "--json")
        assert proc.returncode == 0, proc.stderr
        assert sum(is_judge(b) for b in fake.requests) == 1
        (paper_report,) = json.loads(proc.stdout).values()  # {system: report}

        # --file-judge alone is the paper's protocol: the judge decided, and rejected a file the comparator passes
        monkeypatch.setenv("DESKBENCH_CACHE_DIR", str(tmp_path / "cold"))
        again = run_cli("score", str(out), "--file-judge", judge, "--file-judge-all", "--json", "--items-out", str(items))
        assert again.returncode == 0, again.stderr
        assert sum(is_judge(b) for b in fake.requests) == 2
        (item,) = [AnalyticsItemScore.model_validate_json(line) for line in items.read_text().splitlines()]

        deferred = run_cli("score", str(out), "--file-judge", judge, "--file-judge-deferred", "--json")
        assert deferred.returncode == 0, deferred.stderr
        assert sum(is_judge(b) for b in fake.requests) == 2  # the comparator read the file: no judge call

    assert paper_report["sources"] == {"file_judge": 1} and paper_report["overall"]["pass1"] == 0.0
    (again_report,) = json.loads(again.stdout).values()
    assert again_report["sources"] == {"file_judge": 1}
    assert item.source == "file_judge" and item.score == 0.0 and item.reason == REJECT["reason"]
    assert item.file_judge is not None and item.file_judge.is_correct is False and item.file_judge.deferred == ""
    assert item.comparator is not None and item.comparator.passed and item.comparator.stage == "done"
    files_note = next(n for n in paper_report["protocol"] if n["aspect"] == "file evaluator")
    assert files_note["source"] == "paper" and "every file" in files_note["detail"]

    (cheap,) = json.loads(deferred.stdout).values()
    assert cheap["sources"] == {"comparator": 1} and cheap["overall"]["pass1"] == 1.0
    note = next(n for n in cheap["protocol"] if n["aspect"] == "file evaluator")
    assert note["source"] == "deskbench" and "--file-judge-deferred" in note["detail"]

    plain = run_cli("score", str(out))
    assert plain.returncode == 0, plain.stderr
    line = next(ln for ln in plain.stdout.splitlines() if ln.startswith("protocol: "))
    assert "file evaluator: deskbench (three-stage comparator, no model" in line

    bad = run_cli("score", str(out), "--file-judge-deferred")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "error: --file-judge-deferred needs a File Judge model: add --file-judge MODEL, or drop --file-judge-deferred"]
