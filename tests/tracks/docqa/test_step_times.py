"""Every trajectory step says when it ended (`at`, as runs.store.now() writes it); steps stored
before steps were timed still load, with at None."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from pydantic import TypeAdapter
from test_agents import ANSWER, TASK, context, tool

from deskbench.agents.base import AgentContext, Recorder, stamped
from deskbench.corpus import Corpus
from deskbench.runs.store import Episode, RunStore, now
from deskbench.tasks.trajectory import (
    AnswerStep,
    CitationStep,
    ModelCallStep,
    PageViewStep,
    ToolCallStep,
    TrajectoryStep,
)
from deskbench.tracks.docqa.agents.registry import make_agent
from deskbench.tracks.docqa.episodes import run_episodes
from deskbench.tracks.docqa.tasks import DocQASubmission

STEPS = TypeAdapter(list[TrajectoryStep])


def _stored_episode(tmp_path: Path, agent: str, ctx: AgentContext) -> Episode:
    store = RunStore(tmp_path / "run")
    asyncio.run(run_episodes([TASK], make_agent(agent), ctx, store, f"{agent}:fake"))
    [episode] = store.episodes()
    return episode


def _assert_timed(episode: Episode) -> None:
    assert episode.trajectory
    times = [step.at for step in episode.trajectory]
    assert all(isinstance(t, str) for t in times), times
    parsed = [datetime.fromisoformat(t) for t in times if t is not None]
    assert all(t.utcoffset() is not None and t.utcoffset().total_seconds() == 0 for t in parsed)
    assert parsed == sorted(parsed), times
    started, finished = datetime.fromisoformat(episode.started_at), datetime.fromisoformat(episode.finished_at)
    assert started <= parsed[0] and parsed[-1] <= finished, (episode.started_at, times, episode.finished_at)
    # the same text format as the episode's own times
    assert all(len(t) == len(episode.started_at) for t in times if t is not None)


def test_bm25_agent_steps_are_timed_in_the_store(operator_corpus: Corpus, tmp_path: Path) -> None:
    script = lambda b, n: tool("search_documents", {"query": "mountain car"}) if n < 3 else ANSWER  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        episode = _stored_episode(tmp_path, "bm25-agent", context(fake, operator_corpus))
    assert episode.status == "ok"
    assert [type(s) for s in episode.trajectory] == [ModelCallStep, ToolCallStep, ModelCallStep,
                                                     ToolCallStep, ModelCallStep]
    _assert_timed(episode)


def test_rag_agent_steps_are_timed(operator_corpus: Corpus, tmp_path: Path) -> None:
    reply = {"kind": "text", "text": '{"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}'}
    with FakeOpenAI(script=lambda b, n: reply) as fake:
        episode = _stored_episode(tmp_path, "rag", context(fake, operator_corpus))
    assert [type(s) for s in episode.trajectory] == [ToolCallStep, ModelCallStep]
    _assert_timed(episode)


def test_lexical_agent_step_is_timed(operator_corpus: Corpus, tmp_path: Path) -> None:
    episode = _stored_episode(tmp_path, "lexical", AgentContext(model=None, corpus=operator_corpus))
    assert [type(s) for s in episode.trajectory] == [ToolCallStep]
    _assert_timed(episode)


def test_recorder_add_stamps_but_keeps_a_given_time() -> None:
    rec = Recorder(model=None)  # type: ignore[arg-type]  # add() never calls the model
    before = now()
    rec.add(ToolCallStep(name="search_documents"))
    rec.add(PageViewStep(document="a.pdf", page=1, at="2020-01-01T00:00:00.000+00:00"))
    assert rec.trajectory[0].at is not None and before <= rec.trajectory[0].at <= now()
    assert rec.trajectory[1].at == "2020-01-01T00:00:00.000+00:00"
    assert stamped(AnswerStep(answer=["x"])).at is not None


OLD_STEPS = [
    {"kind": "model_call", "messages_hash": "abc", "input_tokens": 3, "output_tokens": 2, "seconds": 0.1},
    {"kind": "tool_call", "name": "search_documents", "arguments": {"query": "q"}, "result": {"pages": []}},
    {"kind": "page_view", "document": "a.pdf", "page": 2},
    {"kind": "citation_added", "document": "a.pdf", "page": 2},
    {"kind": "answer", "answer": ["x"], "citations": [{"file": "a.pdf", "page": 2}]},
]


def test_old_steps_without_at_still_load_with_at_none(tmp_path: Path) -> None:
    steps = STEPS.validate_python(OLD_STEPS)
    assert [type(s) for s in steps] == [ModelCallStep, ToolCallStep, PageViewStep, CitationStep, AnswerStep]
    assert all(s.at is None for s in steps)
    sub = DocQASubmission.model_validate({"id": "q1", "answer": ["x"], "trajectory": OLD_STEPS})
    assert sub.trajectory is not None and all(s.at is None for s in sub.trajectory)
    assert sub.effort() == 1.0
    # an old run's row, as the store wrote it before steps were timed, reads back untouched
    store = RunStore(tmp_path / "run")
    store.record(Episode(task_id="q1", system="old:fake", status="ok", trajectory=steps))
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE episodes SET trajectory = ?", (json.dumps(OLD_STEPS),))
    conn.close()
    [episode] = store.episodes()
    assert len(episode.trajectory) == 5 and all(s.at is None for s in episode.trajectory)


@pytest.mark.parametrize("bad", [{"kind": "page_view", "document": "a.pdf", "page": 1, "at": 5}])
def test_at_must_be_text(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        STEPS.validate_python([bad])
