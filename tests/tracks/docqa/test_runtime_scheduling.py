"""Where the harness's work runs while episodes are in flight (bench_runtime's concerns): episodes
start one per event-loop turn, the long-lived heap is frozen during a run, and bm25-agent
searches run on the event loop while cheap and in a worker thread otherwise."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import types
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI

from deskbench.agents.base import AgentContext, AgentResult, AgentSettings
from deskbench.corpus import Corpus
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.runs.runner import run_attempts
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent
from deskbench.tracks.docqa.agents.bm25_protocols import base as protocols_base
from deskbench.tracks.docqa.agents.bm25_protocols.base import INLINE_SEARCH_SECONDS, PageSearch
from deskbench.tracks.docqa.tasks import DocQATask

TASKS = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[[str(i)]]) for i in range(6)]


def test_episodes_start_one_per_event_loop_turn(tmp_path: Path) -> None:
    """An episode's first step runs, and the loop turns (polling sockets, running callbacks),
    before the next episode starts: a first request can go out before every episode is set up."""
    log: list[tuple[str, str]] = []

    async def episode(task: Any, attempt: int) -> AgentResult:
        log.append(("start", task.id))
        asyncio.get_running_loop().call_soon(log.append, ("next turn", task.id))
        await asyncio.sleep(0.01)
        return AgentResult(status="ok")

    counts = asyncio.run(run_attempts(TASKS, episode, RunStore(tmp_path / "run"), "s", concurrency=16))
    assert counts.done == len(TASKS) and counts.errors == 0
    for first, second in zip(TASKS, TASKS[1:], strict=False):
        assert log.index(("next turn", first.id)) < log.index(("start", second.id))
    assert [t for kind, t in log if kind == "start"] == [t.id for t in TASKS]  # in order


def test_a_run_cancelled_while_starting_cancels_the_episodes_it_started(tmp_path: Path) -> None:
    started: list[str] = []
    cancelled: list[str] = []

    async def episode(task: Any, attempt: int) -> AgentResult:
        started.append(task.id)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(task.id)
            raise
        return AgentResult(status="ok")

    async def go() -> None:
        run = asyncio.ensure_future(run_attempts(TASKS, episode, RunStore(tmp_path / "run"), "s", concurrency=16))
        for _ in range(3):
            await asyncio.sleep(0)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(go())
    assert 0 < len(started) < len(TASKS)
    assert sorted(cancelled) == sorted(started)


def test_the_long_lived_heap_is_frozen_while_runs_are_in_progress(tmp_path: Path) -> None:
    before = gc.get_freeze_count()
    seen: dict[str, int] = {}

    def episodes(delay: float) -> Any:
        async def episode(task: Any, attempt: int) -> AgentResult:
            await asyncio.sleep(delay)
            seen[f"{delay}:{task.id}"] = gc.get_freeze_count()
            return AgentResult(status="ok")
        return episode

    async def go() -> None:  # two runs at once: the first to end leaves the other's heap frozen
        store = RunStore(tmp_path / "run")
        await asyncio.gather(run_attempts(TASKS[:2], episodes(0.0), store, "quick"),
                             run_attempts(TASKS[:2], episodes(0.05), store, "slow"))

    asyncio.run(go())
    assert len(seen) == 4 and all(count > before for count in seen.values())
    assert gc.get_freeze_count() == before


def _search_threads(monkeypatch: pytest.MonkeyPatch, corpus: Corpus, view: str,
                    search_cpu: float = 0.0, searches: int = 1) -> tuple[int, list[int], Any]:
    """Run bm25-agent for `searches` searches; the thread of the event loop and of each search.
    The agent's CPU clock is a fake one on which a search costs nothing: what is tested is where
    searches go given their cost, not what a search costs on a loaded machine."""
    from deskbench.models.openai_chat import OpenAIChat
    threads: list[int] = []
    search = PageSearch._search
    clock = types.SimpleNamespace(thread_time=lambda: 0.0)

    def recording(ctx: AgentContext, query: str, load: Any) -> Any:
        threads.append(threading.get_ident())
        return search(ctx, query, load)

    monkeypatch.setattr(PageSearch, "_search", staticmethod(recording))
    monkeypatch.setattr(protocols_base, "time", clock)
    answer = {"kind": "tool", "name": "provide_answer",
              "arguments": json.dumps({"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]})}
    search_call = {"kind": "tool", "name": "search_documents", "arguments": json.dumps({"query": "mountain car"})}
    agent = Bm25Agent()
    agent.pages.search_cpu = search_cpu
    with FakeOpenAI(script=lambda b, n: search_call if n <= searches else answer) as fake:
        model = ResilientModel(OpenAIChat("fake", base_url=fake.base_url, api_key="k", id="openai-compat/fake"),
                               policy=RetryPolicy(attempts=1))
        ctx = AgentContext(model=model, corpus=corpus, settings=AgentSettings(view=view, max_steps=searches + 1))  # type: ignore[arg-type]
        task = DocQATask(id="q1", question="Which vehicle rental rates are given?", answer_variants=[["Mountain car"]])

        async def go() -> tuple[int, AgentResult]:
            return threading.get_ident(), await agent.run(task, ctx)

        loop_thread, result = asyncio.run(go())
    assert result.status == "ok" and result.submission is not None and result.submission.steps == searches
    return loop_thread, threads, result


def test_cheap_text_searches_run_on_the_event_loop(monkeypatch: pytest.MonkeyPatch, operator_corpus: Corpus) -> None:
    loop_thread, threads, _ = _search_threads(monkeypatch, operator_corpus, "text", searches=2)
    assert threads == [loop_thread, loop_thread]


def test_costly_text_searches_and_page_images_go_to_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch, operator_corpus: Corpus
) -> None:
    loop_thread, threads, _ = _search_threads(monkeypatch, operator_corpus, "image")
    assert threads and loop_thread not in threads  # a page may need rendering
    # a corpus whose searches have cost more than the threshold: in a worker until the moving
    # average of what they cost comes back under it
    loop_thread, threads, _ = _search_threads(monkeypatch, operator_corpus, "text",
                                              search_cpu=2 * INLINE_SEARCH_SECONDS, searches=6)
    assert threads[0] != loop_thread and threads[-1] == loop_thread
