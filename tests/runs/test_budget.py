"""Cost and token limits (runs/budget.py): an episode at its limit ends as "limit" with what it did
kept; a run at its budget starts no new episode, finishes or cancels those in flight, says what it
spent, and goes on under a higher limit counting what it already spent; a cost limit with a model
that has no price is refused before anything runs. Every figure here is computed by hand from the
price table below ($1000 per million input tokens, $0 per output token: 100 input tokens, $0.10)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deskbench.agents.base import AgentResult, Recorder
from deskbench.errors import UserError
from deskbench.models.prices import PriceTable
from deskbench.models.resilient import ResilientModel
from deskbench.models.types import ChatRequest, ChatResponse, Message, Usage
from deskbench.runs.budget import (
    CANCELLED_KEY,
    EpisodeMeter,
    Limits,
    RunBudget,
    check_prices,
    parse_limits,
    stored_spend,
)
from deskbench.runs.runner import EpisodeFn, HasId, RunCounts, run_attempts, run_one
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

PRICES = PriceTable({"priced-model": (1000.0, 0.0)})
TASKS = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[[str(i)]]) for i in range(5)]
SYSTEM = "loop:test/priced-model"


class Priced:
    """A model whose every reply uses 100 input and 20 output tokens (with PRICES: $0.10 a call)."""

    id = "test/priced-model"

    def __init__(self, delay: float = 0) -> None:
        self.calls = 0
        self.delay = delay

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        await asyncio.sleep(self.delay)  # 0: each call yields once, so episodes in flight take turns in order
        return ChatResponse(message=Message(role="assistant", content="thinking"),
                            usage=Usage(calls=1, input_tokens=100, output_tokens=20))

    async def aclose(self) -> None:
        return None


def model(inner: Priced | None = None) -> ResilientModel:
    return ResilientModel(inner or Priced(), prices=PRICES)


def calls_then_answers(m: ResilientModel, calls: int) -> EpisodeFn:
    """An episode that makes `calls` calls through a Recorder, then answers."""
    async def episode(task: HasId, attempt: int) -> AgentResult:
        rec = Recorder(m)
        for _ in range(calls):
            await rec.complete(ChatRequest(messages=[Message(role="user", content=task.id)]))
        return rec.result("ok", DocQASubmission(id=task.id, answer=["x"]))
    return episode


def store_at(path: Path) -> RunStore:
    store = RunStore(path)
    store.save_tasks(TASKS)
    return store


# --- the flags ------------------------------------------------------------------------------------

def test_the_flags_read_a_run_and_an_episode_limit_each() -> None:
    limits = parse_limits(["5", "episode=0.25"], ["2m", "episode=50k"], "cancel")
    assert limits == Limits(max_cost=5.0, episode_max_cost=0.25, token_budget=2_000_000,
                            episode_token_budget=50_000, on_budget="cancel")
    assert limits.flags() == ["--max-cost 5", "--max-cost episode=0.25", "--token-budget 2000000",
                              "--token-budget episode=50000", "--on-budget cancel"]
    assert not parse_limits().any and parse_limits(["$1.5"]).max_cost == 1.5


@pytest.mark.parametrize(("cost", "tokens", "on", "says"), [
    (["0"], [], "finish", "--max-cost '0' is not an amount of USD above 0"),
    (["nan"], [], "finish", "--max-cost 'nan' is not an amount of USD above 0"),
    (["run=3"], [], "finish", "--max-cost 'run=3': the only key is episode="),
    (["1", "2"], [], "finish", "--max-cost gives the run's limit twice"),
    ([], ["1.5k"], "finish", "--token-budget '1.5k' is not a number of tokens above 0"),
    ([], ["episode=-3"], "finish", "--token-budget '-3' is not a number of tokens above 0"),
    ([], [], "stop", "--on-budget 'stop' is not known; use finish"),
    (["episode=1"], [], "cancel", "--on-budget cancel acts at the run's limit, which this run has none of"),
])
def test_a_bad_limit_is_one_line_naming_it(cost: list[str], tokens: list[str], on: str, says: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_limits(cost, tokens, on)
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)


def test_a_cost_limit_with_a_model_without_a_price_is_refused_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--max-cost cannot be kept: openai/unpriced-9 has no price .*"
                                        r"--prices FILE \(\{\"unpriced-9\": \[input, output\]\}"):
        check_prices(Limits(episode_max_cost=1.0), [("openai/unpriced-9", PRICES)])
    check_prices(Limits(token_budget=10), [("openai/unpriced-9", PRICES)])  # tokens need no price
    check_prices(Limits(max_cost=1.0), [("test/priced-model", PRICES)])
    # stored episodes of unknown cost cannot be counted against a run's cost limit either
    store = store_at(tmp_path / "run")
    asyncio.run(run_attempts(TASKS[:1], calls_then_answers(ResilientModel(Priced()), 1), store, SYSTEM))
    assert stored_spend(store).cost is None  # test/priced-model is not in the built-in table
    with pytest.raises(UserError, match="holds episodes of unknown cost"):
        RunBudget.of_run(store, Limits(max_cost=1.0))
    assert RunBudget.of_run(store, Limits(token_budget=1000)).before.tokens == 120


# --- an episode's limits --------------------------------------------------------------------------

def test_an_episode_stops_at_its_token_limit_as_a_recorded_limit(tmp_path: Path) -> None:
    inner = Priced()
    store = store_at(tmp_path / "run")
    budget = RunBudget.of_run(store, Limits(episode_token_budget=300))  # 120 tokens a call: the 3rd reaches it
    counts = asyncio.run(run_attempts(TASKS[:2], calls_then_answers(model(inner), 10), store, SYSTEM, budget=budget))
    assert counts.done == 2 and inner.calls == 6  # three calls each, not ten
    for ep in store.episodes():
        assert ep.status == "limit" and ep.submission is None
        assert ep.error == "episode token limit reached: 360 tokens of --token-budget episode=300"
        assert len(ep.trajectory) == 3  # the call that reached the limit is kept: it was paid for
        assert ep.usage.input_tokens == 300 and ep.usage.output_tokens == 60
        assert ep.usage.cost_usd == pytest.approx(0.30)
    doc = store.transcript("t0", SYSTEM)
    assert doc is not None and sum(e.kind == "model_call" for e in doc.events) == 3
    assert budget.spent.cost == pytest.approx(0.60) and budget.spent.tokens == 720
    assert not budget.reached()  # no run limit


def test_an_episode_stops_at_its_cost_limit_and_an_agent_cannot_call_past_it() -> None:
    m = model()

    async def stubborn(task: HasId, attempt: int) -> AgentResult:
        rec = Recorder(m)
        for _ in range(5):
            try:
                await rec.complete(ChatRequest(messages=[Message(role="user", content="go")]))
            except Exception:  # an agent that swallows every error and goes on
                continue
        return rec.result("ok", DocQASubmission(id=task.id, answer=["late"]))

    meter = EpisodeMeter(Limits(episode_max_cost=0.25))
    ended = asyncio.run(run_one(stubborn, TASKS[0], 0, meter))
    assert ended.result.status == "limit"
    assert ended.result.error == "episode cost limit reached: $0.3000 of --max-cost episode=0.25"
    assert isinstance(m.inner, Priced) and m.inner.calls == 3  # the 4th and 5th calls were refused before going out
    assert ended.result.submission is not None  # it answered anyway: kept, the track decides what it is worth


def test_usage_an_agent_adds_itself_is_held_to_the_episode_limit_when_it_ends() -> None:
    async def deep_research(task: HasId, attempt: int) -> AgentResult:
        rec = Recorder(None)  # a provider-side agent: its fees are added to its usage, not metered per call
        rec.usage = Usage(calls=1, input_tokens=10, output_tokens=10, cost_usd=2.5)
        return rec.result("ok", DocQASubmission(id=task.id, answer=["report"]))

    over = asyncio.run(run_one(deep_research, TASKS[0], 0, EpisodeMeter(Limits(episode_max_cost=1.0)))).result
    assert over.status == "limit" and over.error == "episode cost limit reached: $2.5000 of --max-cost episode=1"
    under = asyncio.run(run_one(deep_research, TASKS[0], 0, EpisodeMeter(Limits(episode_max_cost=3.0)))).result
    assert under.status == "ok" and under.error is None


# --- a run's budget -------------------------------------------------------------------------------

def test_a_run_stops_at_its_cost_limit_and_resumes_under_a_higher_one(tmp_path: Path) -> None:
    store = store_at(tmp_path / "run")
    budget = RunBudget.of_run(store, Limits(max_cost=0.25))
    counts = asyncio.run(run_attempts(TASKS, calls_then_answers(model(), 1), store, SYSTEM, concurrency=1,
                                      budget=budget))
    # $0.10 an episode: the third starts at $0.20 and reaches $0.30; the other two never start
    assert counts.done == 3 and budget.not_started == 2 and budget.finished_after == 1
    assert [e.status for e in store.episodes()] == ["ok"] * 3
    assert budget.stop_line(3, 5) == (
        "budget reached: spent $0.3000 of --max-cost $0.25 (run total $0.3000 (360 tokens)); 3 of 5 episodes "
        "stored, 1 in flight finished, 2 not started; run the same command with a higher --max-cost to resume")
    # the same limit again: the run has spent it already, nothing starts
    again = RunBudget.of_run(store, Limits(max_cost=0.25))
    assert again.reached() and again.before.cost == pytest.approx(0.30) and again.before.tokens == 360
    counts = asyncio.run(run_attempts(TASKS, calls_then_answers(model(), 1), store, SYSTEM, budget=again))
    assert counts.done == 0 and counts.skipped == 3 and again.not_started == 2
    # a higher limit: the two left run, and the run's total counts all five
    higher = RunBudget.of_run(store, Limits(max_cost=1.0))
    counts = asyncio.run(run_attempts(TASKS, calls_then_answers(model(), 1), store, SYSTEM, budget=higher))
    assert counts.done == 2 and not higher.reached()
    assert higher.spent.cost == pytest.approx(0.50) and higher.spent.tokens == 600
    assert len(store.episodes()) == 5


def test_a_token_budget_reached_cancels_the_episodes_in_flight_unstored(tmp_path: Path) -> None:
    store = store_at(tmp_path / "run")
    # two episodes at once, taking turns, ten calls each (120 tokens a call): the 5th call (A's 3rd)
    # reaches 500 at 600; B's 3rd ends before the cancel comes (720); the calls cut off count nothing
    budget = RunBudget.of_run(store, Limits(token_budget=500, on_budget="cancel"))
    counts: RunCounts = asyncio.run(run_attempts(TASKS, calls_then_answers(model(), 10), store, SYSTEM,
                                                 concurrency=2, budget=budget))
    assert budget.reached() and budget.cancelling
    assert budget.reason == "spent 600 tokens of --token-budget 500"
    assert counts.done == 0 and budget.cancelled == 2 and budget.not_started == 3
    assert store.episodes() == []  # cancelled in flight: nothing stored, a resume runs them
    assert store.meta(CANCELLED_KEY) == {"cost": pytest.approx(0.6), "tokens": 720}
    spent = stored_spend(store)
    assert spent.cost == pytest.approx(0.6) and spent.tokens == 720
    assert "2 in flight cancelled (not stored), 3 not started" in budget.stop_line(0, 5)
    # resumed with room for everything: all five run, and the cancelled spend still counts
    higher = RunBudget.of_run(store, Limits(token_budget=10_000, on_budget="cancel"))
    counts = asyncio.run(run_attempts(TASKS, calls_then_answers(model(), 3), store, SYSTEM, budget=higher))
    assert counts.done == 5 and higher.spent.tokens == 720 + 5 * 360


def test_a_call_outside_an_episode_is_not_metered() -> None:
    """A judge at score time runs outside any episode: no limit applies to it."""
    m = model()
    reply = asyncio.run(m.complete(ChatRequest(messages=[Message(role="user", content="judge this")])))
    assert reply.usage.cost_usd == pytest.approx(0.10)


def test_diagnose_tells_a_budget_limit_from_the_agents_own(tmp_path: Path) -> None:
    from deskbench.runs.diagnose import categories, diagnose_episode

    store = store_at(tmp_path / "run")
    budget = RunBudget.of_run(store, Limits(episode_max_cost=0.15))
    asyncio.run(run_attempts(TASKS[:1], calls_then_answers(model(), 5), store, SYSTEM, budget=budget))
    (stopped,) = store.episodes()
    assert stopped.status == "limit"
    assert diagnose_episode(stopped, TASKS[0], "docqa").category == "budget_limit"
    own = stopped.model_copy(update={"error": "no answer after 10 iterations"})  # the agent's own step budget
    assert diagnose_episode(own, TASKS[0], "docqa").category == "step_limit"
    assert categories("docqa")[:6] == ("ok", "timeout", "content_policy", "context_overflow", "step_limit",
                                       "budget_limit")


def test_a_run_whose_cost_becomes_unknown_stops_under_a_cost_limit(tmp_path: Path) -> None:
    """A model the price check did not see (an agent's second model) and that has no price: the run
    cannot keep --max-cost any more, so it starts nothing new rather than spend blind."""
    store = store_at(tmp_path / "run")
    budget = RunBudget.of_run(store, Limits(max_cost=5.0))
    unpriced = ResilientModel(Priced())  # the built-in table has no price for it
    counts = asyncio.run(run_attempts(TASKS, calls_then_answers(unpriced, 1), store, SYSTEM, concurrency=1,
                                      budget=budget))
    assert counts.done == 1 and budget.not_started == 4
    assert budget.reason == "the run's cost became unknown (a model without a price was called), so --max-cost " \
                            "cannot be kept"
    assert budget.stop_line(1, 5).endswith("4 not started; give every model a price (--prices FILE) or drop "
                                           "--max-cost, and run the same command to resume")


def test_the_limit_that_stopped_an_episode_is_read_back_from_its_error() -> None:
    from deskbench.runs.budget import stopped_at

    assert stopped_at("episode token limit reached: 360 tokens of --token-budget episode=300") == ("token", 300.0)
    assert stopped_at("episode cost limit reached: $0.3000 of --max-cost episode=0.25") == ("cost", 0.25)
    assert stopped_at("no answer after 10 iterations") is None and stopped_at(None) is None
