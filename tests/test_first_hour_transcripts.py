"""Every model call recorded, whoever makes it (issue 31 item 3): a plugin agent that calls
`ctx.model` directly, on each track, has those calls in the run store's transcript, its
trajectory and usage, the viewer ("N model call(s)") and the Inspect export, as a built-in's
are; a plugin with its own Recorder is not recorded twice; a failed call is kept; and the viewer
says the true reason when an episode shows no model call (import, person, older deskbench,
an agent that called none, an error first).

The plugin agents below are addressed by module path (`test_first_hour_transcripts:Name`), as a
user's agent file would be: in-process for docqa, through the CLI (PYTHONPATH) for the others."""

from __future__ import annotations

import asyncio
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from deskbench.agents.base import (
    AgentContext,
    AgentResult,
    Recorder,
    parse_answer,
    stamped,
)
from deskbench.agents.code_loop import AnalystContext
from deskbench.agents.plugin_calls import agent_factory
from deskbench.cli import app
from deskbench.corpus import Corpus
from deskbench.generate.demo import bundled_dir
from deskbench.models.types import ChatRequest, ChatResponse, Message, ModelError, Usage
from deskbench.runs.store import Episode, RunStore
from deskbench.runs.track import execute_run
from deskbench.runs.transcript import ModelCallEvent, ToolEvent, TranscriptDoc
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.run import RunSpec, prepare
from deskbench.tracks.docqa.tasks import DocQATask
from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app
from deskbench.web.viewer_data import open_runs, why_no_model_calls

HERE = Path(__file__).parent
ENV = {"PYTHONPATH": str(HERE)}  # this module by module path, in a subprocess
ME = "test_first_hour_transcripts"
TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
QUERY_PROMPT = "Words to search for (quetzal-query): "
ANSWER_PROMPT = "Answer from these pages (quetzal-answer). Reply with JSON only."
QUERY_REPLY = "winter rental rates (quetzal-reply-1)"
ANSWER_REPLY = json.dumps({"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]})


# -- plugin agents, as a user writes them --------------------------------------------------------


class DocqaCaller:
    """docqa: asks the model for a query, searches, asks it for the answer; reports no usage and
    no transcript (the harness records both calls)."""

    name = "docqa-caller"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        assert ctx.model is not None and ctx.corpus is not None
        asked = await ctx.model.complete(ChatRequest(messages=[Message(role="user", content=QUERY_PROMPT + task.question)]))
        query = " OR ".join(re.findall(r"\w+", asked.message.text()))
        hits = ctx.corpus.search(query, k=3, snippets=False)
        search = stamped(ToolCallStep(name="search_documents", arguments={"query": query},
                                      result={"pages": [[h.document, h.page] for h in hits]}))
        pages = "\n".join(f"[{h.document} page {h.page}] {ctx.corpus.page_text(h.document, h.page).text}" for h in hits)
        reply = await ctx.model.complete(ChatRequest(messages=[
            Message(role="user", content=f"{ANSWER_PROMPT}\n{pages}\nQuestion: {task.question}")]))
        return AgentResult(status="ok", submission=submission_of(task, parse_answer(reply.message.text())),
                           trajectory=[search])


class SelfReporting(DocqaCaller):
    """docqa: the same calls, and it reports the usage of the last one itself (as the example
    keyword agent does): the harness's count of both calls wins, never the sum."""

    name = "self-reporting"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        result = await super().run(task, ctx)
        result.usage = Usage(calls=1, input_tokens=1, output_tokens=1)
        return result


class NoCall:
    """docqa: answers without calling the model."""

    name = "no-call"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return AgentResult(status="ok", submission=submission_of(task, parse_answer(ANSWER_REPLY)))


class FailsFirst:
    """docqa: raises before any call."""

    name = "fails-first"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        raise RuntimeError("the plugin's own bug (quetzal-bug)")


class GivesUp:
    """docqa: ends its episode as an error of its own before any call."""

    name = "gives-up"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return AgentResult(status="error", error="nothing to read (quetzal-gave-up)")


class AnalyticsCaller:
    """analytics: its own Recorder for a tool step, but the model called directly through
    ctx.model: the harness's call and the plugin's tool event end up in one transcript."""

    name = "analytics-caller"
    track = "analytics"

    async def run(self, task: AnalyticsTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        rec = Recorder(ctx.model)
        rec.add(ToolCallStep(name="read_instruction", arguments={"task": task.id}, result={"chars": len(task.instruction)}))
        reply = await ctx.model.complete(ChatRequest(messages=[Message(role="user", content=task.instruction)]))
        sub = AnalyticsSubmission(id=task.id, answer=reply.message.text(), rounds=0, stop="answer")
        return rec.result("ok", sub)


class DeliverablesOwnRecorder:
    """deliverables: one call through its own Recorder (wrapping ctx.model), so its transcript
    holds that one, then one straight to ctx.model, which it does not record: each call must be
    in the episode once."""

    name = "deliverables-own-recorder"
    track = "deliverables"

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        rec = Recorder(ctx.model)
        ask = Message(role="user", content=task.prompt)
        draft = await rec.complete(ChatRequest(messages=[ask]))
        final = await ctx.model.complete(ChatRequest(messages=[ask, draft.message,
                                                               Message(role="user", content="Final version?")]))
        return rec.result("ok", DeliverableSubmission(id=task.id, response=final.message.text(), stop="answer"))


class OwnRecorderOnly:
    """docqa: every call through its own Recorder, which it returns: stored as it is."""

    name = "own-recorder-only"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        assert ctx.model is not None
        rec = Recorder(ctx.model)
        reply = await rec.complete(ChatRequest(messages=[Message(role="user", content=ANSWER_PROMPT)]))
        rec.add(ToolCallStep(name="note", arguments={}, result={"read": True}))
        return rec.result("ok", submission_of(task, parse_answer(reply.message.text())))


# -- helpers -------------------------------------------------------------------------------------


def _script(body: dict[str, Any], n: int) -> dict[str, Any]:
    said = json.dumps(body["messages"])
    if "quetzal-query" in said:
        return {"kind": "text", "text": QUERY_REPLY}
    return {"kind": "text", "text": ANSWER_REPLY if "quetzal-answer" in said else "Memo (quetzal-memo)"}


def _docqa_run(agent: str, corpus: Corpus, out: Path, fake: FakeOpenAI) -> Episode:
    spec = RunSpec(agent=f"{ME}:{agent}", model=f"openai-compat/fake@{fake.base_url}", out=out, corpus=corpus.root,
                   concurrency=1)
    execute_run(prepare(spec, [TASK]))
    (episode,) = RunStore(out, create=False).episodes()
    return episode


def _doc(out: Path, episode: Episode) -> TranscriptDoc | None:
    return RunStore(out, create=False).transcript(episode.task_id, episode.system, episode.attempt)


def _calls(doc: TranscriptDoc | None) -> list[ModelCallEvent]:
    assert doc is not None, "no transcript stored"
    return [e for e in doc.events if isinstance(e, ModelCallEvent)]


def _page(run: Path) -> str:
    c = TestClient(create_viewer_app([run]))
    token = WebStore(run).add_user("reader")
    page = c.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    assert c.post("/login", data={"csrf": csrf.group(1), "token": token}, follow_redirects=False).status_code == 303
    link = re.search(r'href="(/episode\?[^"]+)"', c.get("/").text)
    assert link is not None
    r = c.get(html.unescape(link.group(1)))
    assert r.status_code == 200
    return r.text


def _why(run: Path, episode: Episode) -> str | None:
    (viewer_run,) = open_runs([run])
    return why_no_model_calls(viewer_run, episode, _doc(run, episode))


# -- docqa: the store, the viewer, the Inspect export -------------------------------------------------


def test_docqa_plugin_calls_are_stored_shown_and_exported(operator_corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAI(script=_script) as fake:
        episode = _docqa_run("DocqaCaller", operator_corpus, out, fake)
        sent = list(fake.requests)
    assert episode.status == "ok", episode.error
    calls = _calls(_doc(out, episode))
    assert len(calls) == 2 == len(sent)
    assert [m["content"] for c in calls for m in c.messages] == [m["content"] for b in sent for m in b["messages"]]
    assert [c.reply["message"]["content"] for c in calls if c.reply] == [QUERY_REPLY, ANSWER_REPLY]
    # the trajectory: the plugin's search between the two calls, as they happened; usage of both
    assert [s.kind for s in episode.trajectory] == ["model_call", "tool_call", "model_call"]
    assert episode.usage.calls == 2 and episode.usage.input_tokens > 0

    page = _page(out)
    assert "2 model call(s), 1 tool call(s)" in page
    text = html.unescape(page)
    assert QUERY_REPLY in text and QUERY_PROMPT + TASK.question in text and "No transcript" not in text

    inspect_log = pytest.importorskip("inspect_ai.log")
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

    result = CliRunner().invoke(app, ["export", str(out), "--format", "inspect", "-o", str(tmp_path / "logs")])
    assert result.exit_code == 0, result.output
    (path,) = sorted((tmp_path / "logs").glob("*.eval"))
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert log.samples is not None
    (sample,) = log.samples
    users = [m.text for m in sample.messages if isinstance(m, ChatMessageUser)]
    assistants = [m.text for m in sample.messages if isinstance(m, ChatMessageAssistant)]
    assert QUERY_PROMPT + TASK.question in users and any(ANSWER_PROMPT in u for u in users)
    assert assistants == [QUERY_REPLY, ANSWER_REPLY]


def test_a_plugins_own_usage_is_not_added_to_the_calls_the_harness_saw(operator_corpus: Corpus, tmp_path: Path) -> None:
    with FakeOpenAI(script=_script) as fake:
        episode = _docqa_run("SelfReporting", operator_corpus, tmp_path / "run", fake)
    assert episode.status == "ok", episode.error
    assert episode.usage.calls == 2  # both calls once: not its 1, not 1 + 2
    assert sum(isinstance(s, ModelCallStep) for s in episode.trajectory) == 2


# -- a failed call, through the same factory every track's registry calls ---------------------------


class _FailingSecond:
    """A model whose second call fails as a provider's error does (after the retries)."""

    id = "double/failing"

    def __init__(self) -> None:
        self.n = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.n += 1
        if self.n == 2:
            raise ModelError("HTTP 503: overloaded (quetzal-503)", retryable=True, status=503)
        return ChatResponse(message=Message(role="assistant", content=QUERY_REPLY), usage=Usage(calls=1, input_tokens=7))

    async def aclose(self) -> None:
        return None


def test_a_failed_call_is_recorded_and_the_episode_keeps_the_calls_before_it(operator_corpus: Corpus) -> None:
    factory = agent_factory("docqa", f"{ME}:DocqaCaller")
    assert factory is not None
    agent = factory()
    assert isinstance(agent, DocqaCaller)  # the user's own class, configure and all
    result = asyncio.run(agent.run(TASK, AgentContext(model=_FailingSecond(), corpus=operator_corpus)))
    assert result.status == "error" and result.error == "ModelError: HTTP 503: overloaded (quetzal-503)"
    assert result.transcript is not None
    first, failed = _calls(result.transcript.doc())
    assert first.error is None and first.reply is not None
    assert failed.reply is None and failed.error == "HTTP 503: overloaded (quetzal-503)"
    assert ANSWER_PROMPT in json.dumps(failed.messages)  # what was sent, though nothing came back
    assert result.usage.calls == 1 and result.usage.input_tokens == 7
    assert [s.kind for s in result.trajectory] == ["model_call"]


class Slotted:
    """docqa: a class whose instances take no new attribute (slots): it is recorded all the same."""

    __slots__ = ()
    name = "slotted"
    track = "docqa"

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        assert ctx.model is not None
        reply = await ctx.model.complete(ChatRequest(messages=[Message(role="user", content=ANSWER_PROMPT)]))
        return AgentResult(status="ok", submission=submission_of(task, parse_answer(reply.message.text())))


def test_a_slotted_plugin_is_recorded_too() -> None:
    class Answers(_FailingSecond):
        async def complete(self, request: ChatRequest) -> ChatResponse:
            return ChatResponse(message=Message(role="assistant", content=ANSWER_REPLY), usage=Usage(calls=1))

    factory = agent_factory("docqa", f"{ME}:Slotted")
    assert factory is not None
    agent = factory()
    assert agent.name == "slotted" and agent.track == "docqa"  # type: ignore[attr-defined]
    result = asyncio.run(agent.run(TASK, AgentContext(model=Answers(), corpus=None)))  # type: ignore[attr-defined]
    assert result.status == "ok" and result.transcript is not None
    (call,) = _calls(result.transcript.doc())
    assert call.reply is not None and call.reply["message"]["content"] == ANSWER_REPLY


# -- analytics and deliverables plugins --------------------------------------------------------------


def test_analytics_plugin_calls_join_its_own_tool_events(bwrap: str, tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,10\nsouth,50\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "sum-1", "category": "qa", "instruction": "Total amount in sales.csv (quetzal-a)?",
                                 "inputs": ["sales.csv"], "difficulty_steps": 1, "answer": "60", "answer_value": 60}) + "\n")
    out = tmp_path / "run"
    with FakeOpenAI(script=_script) as fake:
        proc = run_cli("run", "--tasks", str(tasks), "--agent", f"{ME}:AnalyticsCaller", "--out", str(out), "--quiet",
                       "--model", f"openai-compat/fake@{fake.base_url}", env=ENV, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (episode,) = RunStore(out, create=False).episodes()
    assert episode.status == "ok", episode.error
    doc = _doc(out, episode)
    assert doc is not None and [e.kind for e in doc.events] == ["tool", "model_call"]
    (call,) = _calls(doc)
    assert "quetzal-a" in json.dumps(call.messages) and call.reply is not None
    assert isinstance(doc.events[0], ToolEvent) and doc.events[0].name == "read_instruction"
    assert episode.usage.calls == 1 and [s.kind for s in episode.trajectory] == ["tool_call", "model_call"]
    assert "1 model call(s), 1 tool call(s)" in _page(out)


def test_deliverables_plugin_with_its_own_recorder_has_each_call_once(bwrap: str, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", tmp_path / "packages" / "dl-0003-scp")
    out = tmp_path / "run"
    with FakeOpenAI(script=_script) as fake:
        proc = run_cli("run", "--tasks", str(tmp_path / "packages"), "--agent", f"{ME}:DeliverablesOwnRecorder",
                       "--out", str(out), "--quiet", "--model", f"openai-compat/fake@{fake.base_url}", env=ENV,
                       cwd=tmp_path)
        assert len(fake.requests) == 2
    assert proc.returncode == 0, proc.stderr
    (episode,) = RunStore(out, create=False).episodes()
    assert episode.status == "ok", episode.error
    draft, final = _calls(_doc(out, episode))
    assert draft.prefix == 0 and final.prefix == 1  # the second request extends the first, as a built-in's
    assert [m["content"] for m in final.messages] == ["Memo (quetzal-memo)", "Final version?"]
    assert episode.usage.calls == 2 and [s.kind for s in episode.trajectory] == ["model_call", "model_call"]
    assert "2 model call(s)" in _page(out)


def test_a_plugin_that_records_its_own_calls_is_stored_as_it_returned_them(operator_corpus: Corpus,
                                                                          tmp_path: Path) -> None:
    with FakeOpenAI(script=_script) as fake:
        episode = _docqa_run("OwnRecorderOnly", operator_corpus, tmp_path / "run", fake)
        assert len(fake.requests) == 1
    doc = _doc(tmp_path / "run", episode)
    assert doc is not None and [e.kind for e in doc.events] == ["model_call", "tool"]  # once, not twice
    assert episode.usage.calls == 1 and [s.kind for s in episode.trajectory] == ["model_call", "tool_call"]
    assert _why(tmp_path / "run", episode) is None  # it holds calls: no explanation


# -- why an episode shows no model call ------------------------------------------------------------


def test_a_plugin_that_calls_no_model_and_one_that_fails_first_say_so(operator_corpus: Corpus, tmp_path: Path) -> None:
    with FakeOpenAI(script=_script) as fake:
        quiet = _docqa_run("NoCall", operator_corpus, tmp_path / "quiet", fake)
        broken = _docqa_run("FailsFirst", operator_corpus, tmp_path / "broken", fake)
        gave_up = _docqa_run("GivesUp", operator_corpus, tmp_path / "gave-up", fake)
        assert fake.requests == []
    assert _calls(_doc(tmp_path / "quiet", quiet)) == []  # a transcript, empty: not "an older deskbench"
    why = _why(tmp_path / "quiet", quiet)
    assert why is not None and why.startswith(f"No model calls: {ME}:NoCall made none in this episode")
    assert broken.status == "error" and broken.error == "RuntimeError: the plugin's own bug (quetzal-bug)"
    assert _why(tmp_path / "broken", broken) == ("No transcript: the episode failed (the error is above) before the "
                                                 "agent handed back a record of its calls.")
    assert _why(tmp_path / "gave-up", gave_up) == ("No model calls: the episode failed (the error is above) before "
                                                   "its first model call.")
    page = html.unescape(_page(tmp_path / "quiet"))
    assert why in page and "stored before transcripts were kept, imported, or a person's" not in page


def test_lexical_made_no_model_call(operator_corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "run"
    execute_run(prepare(RunSpec(agent="lexical", model=None, out=out, corpus=operator_corpus.root), [TASK]))
    (episode,) = RunStore(out, create=False).episodes()
    why = _why(out, episode)
    assert why is not None and why.startswith("No model calls: lexical made none in this episode")


def _store_with(tmp_path: Path, *episodes: Episode) -> Path:
    out = tmp_path / "run"
    store = RunStore(out)
    store.save_tasks([TASK])
    for ep in episodes:
        store.record(ep)  # as an older deskbench stored them: no transcript
    return out


def test_an_older_deskbenchs_episodes_and_a_persons_say_so(tmp_path: Path) -> None:
    counted = [stamped(ModelCallStep(messages_hash="ab", input_tokens=3, output_tokens=2, seconds=0.1)) for _ in range(3)]
    old = Episode(task_id="q1", system="bm25-agent:openai/gpt-4.1", status="ok", trajectory=counted)
    person = Episode(task_id="q1", system="human:alice", status="ok")
    failed = Episode(task_id="q1", system="rag:openai/gpt-4.1", status="error", error="RuntimeError: boom")
    out = _store_with(tmp_path, old, person, failed)
    assert _why(out, old) == ("No transcript: this episode was stored by an older deskbench, before transcripts were "
                              "kept; its 3 model call(s) are counted in its steps and usage, their text was not kept.")
    assert _why(out, person) == ("No model calls: a person answered this task in the deskbench web app; what they "
                                 "searched and read is in the steps, if any.")
    assert _why(out, failed) == ("No transcript: the episode failed (the error is above) before the agent handed back "
                                 "a record of its calls.")


def test_an_older_plugin_episode_says_its_calls_were_not_recorded(tmp_path: Path) -> None:
    from deskbench.runs.identity import SystemConfig, remember_config

    system = "my_agent:MyAgent:openai/gpt-4.1"
    ep = Episode(task_id="q1", system=system, status="ok", usage=Usage(calls=2))
    out = _store_with(tmp_path, ep)
    remember_config(RunStore(out, create=False), system,
                    SystemConfig(track="docqa", agent="my_agent:MyAgent", model="openai/gpt-4.1"))
    assert _why(out, ep) == ("No transcript: my_agent:MyAgent is a plugin agent, and this episode was stored by an "
                             "older deskbench, which did not record the calls a plugin makes through ctx.model; it "
                             "reported 2 model call(s) itself.")


def test_imported_predictions_say_so(tmp_path: Path) -> None:
    from deskbench.tracks.docqa.imported import import_predictions

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"id": "q1", "question": TASK.question, "answer": ["Mountain car"],
                                "citations": [{"file": "alpha.pdf", "page": 1}]}) + "\n")
    out = tmp_path / "run"
    import_predictions(pred, tasks, "their-agent", out)
    (episode,) = RunStore(out, create=False).episodes()
    assert _why(out, episode) == (f"No transcript: this system was imported from a predictions file ({pred.resolve()}) "
                                  "with deskbench import, which holds the answers, not the model calls that produced them.")
    assert "imported from a predictions file" in html.unescape(_page(out))


def test_a_call_and_a_step_ending_in_one_millisecond_keep_the_order_they_ended_in() -> None:
    """`at` is to the millisecond: the order the steps were stamped in decides a tie."""
    from deskbench.agents.plugin_calls import _merge_steps

    search, call = stamped(ToolCallStep(name="search_documents", arguments={}, result={})), stamped(ModelCallStep())
    call.at = search.at  # both ended in one millisecond, the call after the search
    assert [s.kind for s in _merge_steps([search], [call])] == ["tool_call", "model_call"]
    first, later = stamped(ModelCallStep()), stamped(ToolCallStep(name="search_documents", arguments={}, result={}))
    later.at = first.at
    assert [s.kind for s in _merge_steps([later], [first])] == ["model_call", "tool_call"]
    assert "_ended" not in search.model_dump() and "ended" not in search.model_dump_json()  # never stored
