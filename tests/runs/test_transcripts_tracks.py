"""Every track's transcripts in the run store, against a scripted model server: the exact prompt
the server was sent and the exact text it returned (analytics: the execute_code program and its
stdout and stderr too), and the judges' calls made when the run is scored (`judge_transcripts`),
with their reasoning exactly as the server returned it.

The run-making parts are plain functions (`analytics_run`, `deliverables_run`, `docqa_judged_run`)
returning a `ScriptedRun`, so other tests (the viewer's) can make the same runs and look for the
same texts."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.corpus import Corpus
from deskbench.models.types import ChatRequest, ChatResponse, ImagePart, Message
from deskbench.runs.store import RunStore
from deskbench.runs.transcript import ModelCallEvent, ToolEvent, Transcript, TranscriptDoc, expand
from deskbench.scoring.judge_log import DOCQA_JUDGE, FILE_JUDGE, LLM_CHECK, QA_JUDGE, RUBRIC_GRADER
from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore
from deskbench.tracks.analytics.tasks import AnalyticsTask, read_tasks
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES, load_packages
from deskbench.tracks.docqa.tasks import DocQATask

Script = Callable[[dict[str, Any], int], dict[str, Any]]
AGENT, JUDGE = "agent", "judge"  # the scripted server answers by the request's model name

# what the scripted models say: marked, with characters a careless encoder would change
STDOUT = "stdout-marker: 42 rows ✓"
STDERR = "stderr-marker: naïve warning"
ANALYTICS_CODE = f"import sys\nprint({STDOUT!r})\nprint({STDERR!r}, file=sys.stderr)\n"
FILE_JUDGE_CODE = "import os\nprint('file-judge-marker', sorted(os.listdir('/mnt/data')))\n"
FILE_REASON = "Both workbooks hold the same regions and totals — «checked»."
ANALYTICS_REASON = "The conclusion states the reference total; ünïcode kept \"quoted\"."
DELIVERABLE_TEXT = "Cost per Call fell 12% and NPS rose 5 points — both are outcomes (memo ✓)."
GRADER_WHY = "the memo cites the v2 policy — «graded» ✓"
CHECK_REASON = "It names Cost per Call and NPS as outcomes: «verbatim» reason."
DOCQA_QUESTION = "Which vehicle rental rates are given for the winter season (quetzal-9)?"
DOCQA_EXPLANATION = "Hire and rental mean the same here; \"Mountain car\" matches — correct ✓."


@dataclass
class ScriptedRun:
    """A run made against the scripted server, and what the server saw and said."""

    out: Path  # the run directory
    system: str
    task_id: str
    prompt: str  # a text the agent's first request carried, as the server received it (the task's question)
    reply: str  # the exact text the server returned as the agent's final answer
    judge_scorer: str  # the judge_transcripts key of the judge called at score time
    judge_reply: str  # the judge's reply (text, or tool-call arguments) exactly as the server returned it
    requests: list[dict[str, Any]] = field(default_factory=list)  # every request body the server got

    def store(self) -> RunStore:
        return RunStore(self.out, create=False)


def _text(value: str) -> dict[str, Any]:
    return {"kind": "text", "text": value}


def _tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}


def _called(body: dict[str, Any]) -> bool:
    return any(m["role"] == "tool" for m in body["messages"])


def _cli(*args: str, cache: Path, quiet: bool = True) -> Any:
    """A deskbench command in a subprocess, with its own response cache (judges always cache)."""
    proc = run_cli(*args, *(["--quiet"] if quiet else []), "--json", env={"DESKBENCH_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def analytics_qa_task(tasks_dir: Path) -> AnalyticsTask:
    """A QA task of a generated analytics task set (generate_analytics(tasks_dir, tasks=11, seed=5))."""
    return next(t for t in read_tasks(tasks_dir / "tasks.jsonl").items if t.category == "qa")


def analytics_run(tasks_dir: Path, work: Path) -> ScriptedRun:
    """analyst-agent on one QA task (execute_code in the real bubblewrap sandbox: a program that
    writes to stdout and stderr, then the final answer), run with --judge: the Listing 2 judge
    scores it when the run ends."""
    task = analytics_qa_task(tasks_dir)
    tasks_file = tasks_dir / f"qa-{work.name}.jsonl"  # beside the inputs: their paths are relative to it
    tasks_file.write_text(task.model_dump_json() + "\n", encoding="utf-8")
    answer = f"Final answer: {task.answer} (checked ✓)"
    judge_reply = json.dumps({"score": 1, "reason": ANALYTICS_REASON}, ensure_ascii=False)
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if body["model"] == JUDGE:
            return _text(judge_reply)
        return _text(answer) if _called(body) else _tool("execute_code", {"code": ANALYTICS_CODE})

    out = work / "run"
    with FakeOpenAI(script=script) as fake:
        _cli("run", "--agent", "analyst-agent", "--tasks", str(tasks_file), "--out", str(out),
             "--model", f"openai-compat/{AGENT}@{fake.base_url}", "--judge", f"openai-compat/{JUDGE}@{fake.base_url}",
             "--concurrency", "1", cache=work / "cache")
        requests = list(fake.requests)
    return ScriptedRun(out=out, system=f"analyst-agent:openai-compat/{AGENT}", task_id=task.id,
                       prompt=task.instruction, reply=answer, judge_scorer=QA_JUDGE, judge_reply=judge_reply,
                       requests=requests)


def analytics_file_judged_run(tasks_dir: Path, work: Path) -> ScriptedRun:
    """analyst-agent writing the reference workbook of a file task, run with --file-judge: the
    agentic File Judge runs a program in the sandbox (its stdout marked), then gives its verdict."""
    import base64

    task = next(t for t in read_tasks(tasks_dir / "tasks.jsonl").items if t.template == "file_region_summary")
    assert task.reference_file is not None
    blob = base64.b64encode((tasks_dir / task.reference_file.path).read_bytes()).decode()
    write = (f"import base64\nopen('/mnt/result/{task.reference_file.output_name}', 'wb')"
             f".write(base64.b64decode('{blob}'))\nprint('saved')")
    verdict = json.dumps({"is_correct": True, "reason": FILE_REASON}, ensure_ascii=False)
    tasks_file = tasks_dir / f"file-{work.name}.jsonl"
    tasks_file.write_text(task.model_dump_json() + "\n", encoding="utf-8")

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if body["model"] == JUDGE:
            return _text(verdict) if _called(body) else _tool("execute_code", {"code": FILE_JUDGE_CODE})
        return _text("Saved the workbook.") if _called(body) else _tool("execute_code", {"code": write})

    out = work / "run"
    with FakeOpenAI(script=script) as fake:
        _cli("run", "--agent", "analyst-agent", "--tasks", str(tasks_file), "--out", str(out),
             "--model", f"openai-compat/{AGENT}@{fake.base_url}", "--file-judge", f"openai-compat/{JUDGE}@{fake.base_url}",
             "--concurrency", "1", cache=work / "cache")
        requests = list(fake.requests)
    return ScriptedRun(out=out, system=f"analyst-agent:openai-compat/{AGENT}", task_id=task.id,
                       prompt=task.instruction, reply="Saved the workbook.", judge_scorer=FILE_JUDGE,
                       judge_reply=verdict, requests=requests)


def deliverables_run(work: Path, package: str = "dl-0002-rcp") -> ScriptedRun:
    """deliverable-agent on one bundled package (it has an llm_check verifier), answering in text
    at once; run with --judge, so the llm_check judge is asked when the run is scored."""
    from deskbench.generate.demo import bundled_dir

    packages = work / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / package, packages / package)
    (task,) = load_packages(packages)
    judge_reply = json.dumps({"satisfied": True, "reason": CHECK_REASON}, ensure_ascii=False)

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        return _text(judge_reply if body["model"] == JUDGE else DELIVERABLE_TEXT)

    out = work / "run"
    with FakeOpenAI(script=script) as fake:
        _cli("run", "--agent", "deliverable-agent", "--tasks", str(packages), "--out", str(out),
             "--model", f"openai-compat/{AGENT}@{fake.base_url}", "--judge", f"openai-compat/{JUDGE}@{fake.base_url}",
             "--concurrency", "1", cache=work / "cache")
        requests = list(fake.requests)
    return ScriptedRun(out=out, system=f"deliverable-agent:openai-compat/{AGENT}", task_id=task.id,
                       prompt=task.prompt, reply=DELIVERABLE_TEXT, judge_scorer=LLM_CHECK, judge_reply=judge_reply,
                       requests=requests)


def docqa_judged_run(corpus: Corpus, work: Path) -> ScriptedRun:
    """bm25-agent (text view) answering "Mountain car hire" to a question whose gold is
    "Mountain car" (ANLS* < 1, so MADQA's judge is asked), run with --judge."""
    task = DocQATask(id="q1", question=DOCQA_QUESTION, answer_variants=[["Mountain car"]],
                     evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
    tasks_file = work / "tasks.jsonl"
    tasks_file.parent.mkdir(parents=True, exist_ok=True)
    tasks_file.write_text(task.model_dump_json() + "\n", encoding="utf-8")
    answer = json.dumps({"answer": ["Mountain car hire"], "citations": [{"file": "alpha.pdf", "page": 1}]})
    verdict = json.dumps({"judgment": "correct", "main_issue": "none", "explanation": DOCQA_EXPLANATION},
                         ensure_ascii=False)

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if body["model"] == JUDGE:
            return {"kind": "tool", "name": "submit_judgment", "arguments": verdict}
        return {"kind": "tool", "name": "provide_answer", "arguments": answer}

    out = work / "run"
    with FakeOpenAI(script=script) as fake:
        _cli("run", "--agent", "bm25-agent", "--tasks", str(tasks_file), "--corpus", str(corpus.root),
             "--view", "text", "--out", str(out), "--model", f"openai-compat/{AGENT}@{fake.base_url}",
             "--judge", f"openai-compat/{JUDGE}@{fake.base_url}", "--concurrency", "1", cache=work / "cache")
        requests = list(fake.requests)
    return ScriptedRun(out=out, system=f"bm25-agent:openai-compat/{AGENT}", task_id="q1", prompt=DOCQA_QUESTION,
                       reply=answer, judge_scorer=DOCQA_JUDGE, judge_reply=verdict, requests=requests)


# -- what the tests compare ---------------------------------------------------------------------


def wire_text(message: dict[str, Any]) -> str:
    """A message's text as the server received it (string content, or its text parts)."""
    content = message.get("content") or ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def doc_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def calls(doc: TranscriptDoc) -> list[ModelCallEvent]:
    return [e for e in doc.events if isinstance(e, ModelCallEvent)]


def reply_text(event: ModelCallEvent) -> str:
    """What the server returned: the message text, or its tool calls' arguments."""
    assert event.reply is not None
    message = event.reply["message"]
    return doc_text(message) or "".join(c["arguments"] for c in message.get("tool_calls", []))


def assert_requests_match(doc: TranscriptDoc, sent: list[dict[str, Any]]) -> None:
    """Each model call's request, rebuilt from the stored deltas, is the one on the wire: the
    same roles and the same texts, message for message."""
    assert len(calls(doc)) == len(sent)
    for i, body in enumerate(sent):
        rebuilt = doc.conversation(i)
        assert [m["role"] for m in rebuilt] == [m["role"] for m in body["messages"]]
        assert [doc_text(m) for m in rebuilt] == [wire_text(m) for m in body["messages"]]


def agent_requests(run: ScriptedRun) -> list[dict[str, Any]]:
    return [b for b in run.requests if b["model"] == AGENT]


def judge_requests(run: ScriptedRun) -> list[dict[str, Any]]:
    return [b for b in run.requests if b["model"] == JUDGE]


# -- the tests ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def analytics_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from deskbench.tracks.analytics.generate.tasks import generate_analytics

    out = tmp_path_factory.mktemp("analytics")
    generate_analytics(out, tasks=11, seed=5)
    return out


def test_analytics_transcript_and_its_judge(bwrap: str, analytics_tasks: Path, tmp_path: Path) -> None:
    run = analytics_run(analytics_tasks, tmp_path)
    store = run.store()
    doc = store.transcript(run.task_id, run.system)
    assert doc is not None
    doc = expand(doc, None)
    sent = agent_requests(run)
    assert len(sent) == 2
    assert any(run.prompt in wire_text(m) for m in sent[0]["messages"])  # the question on the wire ...
    assert any(run.prompt in doc_text(m) for m in doc.conversation(0))  # ... and in the store
    assert_requests_match(doc, sent)
    first, last = calls(doc)
    assert reply_text(last) == run.reply
    assert json.loads(reply_text(first)) == {"code": ANALYTICS_CODE}
    (program,) = [e for e in doc.events if isinstance(e, ToolEvent)]
    assert program.name == "execute_code" and program.arguments["code"] == ANALYTICS_CODE
    assert program.result["stdout"] == STDOUT + "\n" and program.result["stderr"] == STDERR + "\n"
    # what the model read back is what the store says the program printed
    tool_message = next(m for m in sent[1]["messages"] if m["role"] == "tool")
    assert STDOUT in wire_text(tool_message) and STDERR in wire_text(tool_message)

    # the Listing 2 judge, called when the run was scored: its request and its reasoning verbatim
    judges = store.judge_transcripts(run.task_id, run.system)
    assert set(judges) == {QA_JUDGE}
    (call,) = calls(judges[QA_JUDGE])
    assert reply_text(call) == run.judge_reply and json.loads(reply_text(call))["reason"] == ANALYTICS_REASON
    assert call.reply is not None and call.reply["cached"] is False and call.reply["usage"]["input_tokens"] == 100
    (wire,) = judge_requests(run)
    assert_requests_match(judges[QA_JUDGE], [wire])
    assert any(run.reply in doc_text(m) for m in judges[QA_JUDGE].conversation(0))  # it judged this answer
    store.close()

    # --items-out: the question, gold, prediction, metrics and the judge's reasoning in one row
    items = tmp_path / "items.jsonl"
    _cli("score", str(run.out), "--judge", f"openai-compat/{JUDGE}@http://127.0.0.1:9/v1", "--items-out", str(items),
         cache=tmp_path / "cache", quiet=False)  # the judge's reply comes from the cache: nothing listens on :9
    (row,) = [json.loads(line) for line in items.read_text(encoding="utf-8").splitlines()]
    task = analytics_qa_task(analytics_tasks)
    assert row["system"] == run.system and row["task_id"] == task.id and row["attempt"] == 0
    assert row["question"] == task.instruction and row["gold"]["answer"] == task.answer
    assert row["prediction"]["answer"] == run.reply and row["prediction"]["files"] == []
    assert row["score"] == 1.0 and row["status"] == "scored" and row["source"] == "judge"
    assert row["judge"] == {QA_JUDGE: {"verdict": 1.0, "reasoning": ANALYTICS_REASON, "error": None}}
    assert AnalyticsItemScore.model_validate(row).judge_reasons == {"qa": ANALYTICS_REASON}  # still reads as an item


def test_the_file_judges_programs_are_kept_with_its_calls(bwrap: str, analytics_tasks: Path, tmp_path: Path) -> None:
    run = analytics_file_judged_run(analytics_tasks, tmp_path)
    judges = run.store().judge_transcripts(run.task_id, run.system)
    assert set(judges) == {FILE_JUDGE}
    doc = judges[FILE_JUDGE]
    assert_requests_match(doc, judge_requests(run))
    first, last = calls(doc)
    assert json.loads(reply_text(first)) == {"code": FILE_JUDGE_CODE} and reply_text(last) == run.judge_reply
    (program,) = [e for e in doc.events if isinstance(e, ToolEvent)]
    assert program.arguments["code"] == FILE_JUDGE_CODE
    assert program.result["stdout"].startswith("file-judge-marker ['prediction.xlsx', 'reference.xlsx']")
    assert doc.events.index(program) == doc.events.index(first) + 1  # in the order it happened
    items = tmp_path / "items.jsonl"
    _cli("score", str(run.out), "--file-judge", f"openai-compat/{JUDGE}@http://127.0.0.1:9/v1",
         "--items-out", str(items), cache=tmp_path / "cache", quiet=False)  # replayed from the judge cache
    (row,) = [json.loads(line) for line in items.read_text(encoding="utf-8").splitlines()]
    assert row["judge"][FILE_JUDGE]["verdict"] is True and row["judge"][FILE_JUDGE]["reasoning"] == FILE_REASON
    assert row["gold"]["reference_file"]["output_name"] == row["prediction"]["files"][0]["name"]
    again = RunStore(run.out, create=False).judge_transcripts(run.task_id, run.system)[FILE_JUDGE]
    assert [c.reply["cached"] for c in calls(again) if c.reply] == [True, True]
    (replayed,) = [e for e in again.events if isinstance(e, ToolEvent)]  # the program really ran again
    assert replayed.result["stdout"] == program.result["stdout"]


def test_deliverables_transcript_and_its_llm_check(bwrap: str, tmp_path: Path) -> None:
    run = deliverables_run(tmp_path)
    store = run.store()
    doc = store.transcript(run.task_id, run.system)
    assert doc is not None
    doc = expand(doc, None)
    sent = agent_requests(run)
    assert any(run.prompt.split(".")[0] in wire_text(m) for m in sent[0]["messages"])
    assert_requests_match(doc, sent)
    assert reply_text(calls(doc)[-1]) == DELIVERABLE_TEXT
    (item,) = [e for e in store.episodes() if e.task_id == run.task_id]
    assert getattr(item.submission, "response", "").strip() == DELIVERABLE_TEXT

    judges = store.judge_transcripts(run.task_id, run.system)
    assert set(judges) == {LLM_CHECK}
    checks = calls(judges[LLM_CHECK])
    assert len(checks) == len(judge_requests(run)) >= 1
    assert {reply_text(c) for c in checks} == {run.judge_reply}
    assert_requests_match(judges[LLM_CHECK], judge_requests(run))
    assert all(DELIVERABLE_TEXT in doc_text(judges[LLM_CHECK].conversation(i)[-1]) for i in range(len(checks)))
    store.close()

    # the LLM rubric grader (`rubric grade`): its call kept beside the llm_check judge's
    grade = json.dumps({"criteria": {c: {"justification": f"{c}: {GRADER_WHY}", "score": 2} for c in RUBRIC_CODES},
                        "comment": ""}, ensure_ascii=False)
    with FakeOpenAI(script=lambda body, n: _text(grade)) as fake:
        graded = _cli("rubric", "grade", str(run.out), "--model", f"openai-compat/grader@{fake.base_url}",
                      cache=tmp_path / "cache")
        sent_to_grader = list(fake.requests)
    assert graded["graded"] == 1
    judges = RunStore(run.out, create=False).judge_transcripts(run.task_id, run.system)
    assert set(judges) == {LLM_CHECK, RUBRIC_GRADER}
    (graded_call,) = calls(judges[RUBRIC_GRADER])
    assert reply_text(graded_call) == grade
    assert_requests_match(judges[RUBRIC_GRADER], sent_to_grader)
    assert any(DELIVERABLE_TEXT in doc_text(m) for m in judges[RUBRIC_GRADER].conversation(0))

    # --items-out: the prompt, the gold and rubric, the response, the llm_check reasons and the grade's justifications
    items = tmp_path / "items.jsonl"
    _cli("score", str(run.out), "--judge", f"openai-compat/{JUDGE}@http://127.0.0.1:9/v1", "--items-out", str(items),
         cache=tmp_path / "cache", quiet=False)  # the llm_check replies come from the cache
    (row,) = [json.loads(line) for line in items.read_text(encoding="utf-8").splitlines()]
    task = load_packages(tmp_path / "packages")[0]
    assert row["system"] == run.system and row["task_id"] == task.id
    assert row["question"] == task.prompt and row["gold"]["golden"]["answer"] == task.golden.answer
    assert [c["code"] for c in row["gold"]["rubric"]] == list(RUBRIC_CODES)
    assert row["prediction"]["response"].strip() == DELIVERABLE_TEXT
    checks = row["judge"][LLM_CHECK]["checks"]
    assert checks and all(c == {"verdict": "pass", "reasoning": CHECK_REASON} for c in checks.values())
    grade_row = row["judge"][RUBRIC_GRADER]
    assert grade_row["verdict"] == dict.fromkeys(RUBRIC_CODES, 2) and row["scores"] == grade_row["verdict"]
    assert grade_row["reasoning"] == {c: f"{c}: {GRADER_WHY}" for c in RUBRIC_CODES}
    assert row["v"] >= 0 and "vrs_strict" in row


def test_docqa_judge_reasoning_is_kept_and_a_rescore_reads_the_cache(operator_corpus: Corpus, tmp_path: Path) -> None:
    run = docqa_judged_run(operator_corpus, tmp_path)
    store = run.store()
    judges = store.judge_transcripts(run.task_id, run.system)
    assert set(judges) == {DOCQA_JUDGE}
    (call,) = calls(judges[DOCQA_JUDGE])
    assert call.reply is not None
    (submitted,) = call.reply["message"]["tool_calls"]
    assert submitted["name"] == "submit_judgment" and submitted["arguments"] == run.judge_reply
    assert call.reply["cached"] is False
    (wire,) = judge_requests(run)
    assert_requests_match(judges[DOCQA_JUDGE], [wire])
    assert DOCQA_QUESTION in doc_text(call.messages[0]) and "Mountain car hire" in doc_text(call.messages[0])
    store.close()

    # `score` again with the same judge: answered from the judge cache, and still traceable
    with FakeOpenAI(script=lambda b, n: _text("the cache should have answered")) as fake:
        items = tmp_path / "items.jsonl"
        proc = run_cli("score", str(run.out), "--judge", f"openai-compat/{JUDGE}@{fake.base_url}",
                       "--items-out", str(items), "--json", env={"DESKBENCH_CACHE_DIR": str(tmp_path / "cache")})
        assert proc.returncode == 0, proc.stderr
        assert fake.requests == []
    rescored = RunStore(run.out, create=False).judge_transcripts(run.task_id, run.system)
    (again,) = calls(rescored[DOCQA_JUDGE])
    assert again.reply is not None and again.reply["cached"] is True
    assert again.reply["message"]["tool_calls"][0]["arguments"] == run.judge_reply
    (row,) = [json.loads(line) for line in items.read_text().splitlines()]
    assert row["judge_reasoning"] == DOCQA_EXPLANATION and row["judge_verdict"] == "correct"


# -- the store's half, alone --------------------------------------------------------------------


def _judged(text: str) -> Transcript:
    t = Transcript()
    request = ChatRequest(messages=[Message(role="user", content=[ImagePart.of(b"\x89PNG chart")])])
    t.model_call("m", request, ChatResponse(message=Message(role="assistant", content=text)), at=0.0, seconds=0.1)
    return t


def test_judge_transcripts_latest_per_scorer_and_old_run_files(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / RunStore.FILENAME)  # a run file from before the table
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.commit()
    con.close()
    store = RunStore(tmp_path, create=False)
    assert store.judge_transcripts("q1", "s") == {}
    store.record_judge_transcript("q1", "s", 0, "chart_judge", _judged("first"))
    store.record_judge_transcript("q1", "s", 0, "qa_judge", _judged("qa"))
    store.record_judge_transcript("q1", "s", 0, "chart_judge", _judged("second"))
    store.record_judge_transcript("q1", "s", 1, "chart_judge", _judged("attempt 1"))
    got = store.judge_transcripts("q1", "s")
    assert {k: reply_text(calls(v)[0]) for k, v in got.items()} == {"chart_judge": "second", "qa_judge": "qa"}
    assert reply_text(calls(store.judge_transcripts("q1", "s", 1)["chart_judge"])[0]) == "attempt 1"
    assert store.judge_transcripts("q1", "other") == {}
    ref = calls(got["chart_judge"])[0].messages[0]["content"][0]["ref"]
    blob = store.blob(ref.removeprefix("blob:"))
    assert blob is not None and blob.data == b"\x89PNG chart"


def test_scoring_a_predictions_file_with_a_judge_records_nothing(tmp_path: Path) -> None:
    """No run store: the judge is asked as always, nothing is written anywhere, nothing fails."""
    task = DocQATask(id="q1", question=DOCQA_QUESTION, answer_variants=[["Mountain car"]],
                     evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
    (tmp_path / "tasks.jsonl").write_text(task.model_dump_json() + "\n", encoding="utf-8")
    (tmp_path / "preds.jsonl").write_text(json.dumps({"id": "q1", "question": DOCQA_QUESTION,
                                                      "answer": ["Mountain car hire"], "citations": []}) + "\n")
    verdict = json.dumps({"judgment": "correct", "main_issue": "none", "explanation": DOCQA_EXPLANATION})
    with FakeOpenAI(script=lambda b, n: {"kind": "tool", "name": "submit_judgment", "arguments": verdict}) as fake:
        report = _cli("score", str(tmp_path / "preds.jsonl"), "--tasks", str(tmp_path / "tasks.jsonl"),
                      "--judge", f"openai-compat/{JUDGE}@{fake.base_url}", cache=tmp_path / "cache", quiet=False)
        assert len(fake.requests) == 1
    assert report["accuracy"] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "preds.jsonl", "tasks.jsonl"]
