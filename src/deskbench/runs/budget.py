"""Cost and token limits that stop a run cleanly: per episode and per run (`deskbench run
--max-cost`, `--token-budget`, `--on-budget`; docs/cost.md).

Why the runner holds them: a limit counts every model call of an episode whoever makes it (the
agent, a sub-model, a tool), and only the runner knows which episode a call belongs to. Each
episode gets an `EpisodeMeter` (models/meter.py `METER`, set in the episode's task); every call
through `ResilientModel` reports its priced usage to it, and through it to the run's `RunBudget`.

- Counted: the provider's usage (input + output tokens; reasoning tokens are part of the output),
  priced by the run's price table (models/prices.py, `--prices`). A cost limit with a model that
  has no price is refused before the run starts. A cached reply costs nothing and counts nothing.
- An episode reaching its limit ends at once (the call that reached it is kept: it was paid for)
  and is stored with status "limit", which each track scores as its limit category
  (`Track.limit_category`). Usage an agent adds itself (a deep-research agent's fees) is checked
  when the episode ends; over a limit, the episode is a "limit" with its submission kept.
- The run's budget counts what the run has spent: its stored episodes (earlier tries included), the
  episodes a budget stop cancelled, and the calls of this invocation. Reached, no new episode
  starts; those in flight finish (`--on-budget finish`, the default) or are cancelled unstored
  (`cancel`: a resume runs them again). A resume under a higher limit goes on: the limits are
  recorded in the run's meta (`limits`) but are not part of any system's identity.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from deskbench.agents.base import AgentResult, Recorder
from deskbench.errors import UserError
from deskbench.models.meter import LimitReached
from deskbench.models.prices import PRICES_AS_OF, PriceTable, format_cost
from deskbench.models.types import ChatResponse, Usage
from deskbench.runs.store import RunStore, now

OnBudget = Literal["finish", "cancel"]
ON_BUDGET: tuple[OnBudget, ...] = get_args(OnBudget)
LIMITS_KEY = "limits"  # the run's meta: every invocation's limits, in order
CANCELLED_KEY = "budget_cancelled"  # the run's meta: what the episodes a budget stop cancelled spent


BUDGET_REASONS = ("episode cost limit reached: ", "episode token limit reached: ", "episode cost unknown (")
"""How the error of an episode its limit stopped begins (`diagnose` tells it from the agent's own limit)."""


def is_budget_limit(error: str | None) -> bool:
    return (error or "").startswith(BUDGET_REASONS)


_STOPPED_AT = re.compile(r"^episode (cost|token) limit reached: .* of --(?:max-cost|token-budget) episode=([\d.]+)$")


def stopped_at(error: str | None) -> tuple[Literal["cost", "token"], float] | None:
    """Which limit stopped an episode and its value, from its stored error (cost in USD, tokens):
    what an export names as Inspect's "cost" or "token" sample limit. None: another limit."""
    found = _STOPPED_AT.match(error or "")
    if found is None:
        return None
    return ("cost" if found.group(1) == "cost" else "token"), float(found.group(2))


@dataclass(frozen=True)
class Limits:
    """A run's limits, as given (None: no limit)."""

    max_cost: float | None = None  # USD, the whole run
    episode_max_cost: float | None = None  # USD, each episode
    token_budget: int | None = None  # input + output tokens, the whole run
    episode_token_budget: int | None = None  # input + output tokens, each episode
    on_budget: OnBudget = "finish"  # the episodes in flight when the run's limit is reached

    @property
    def any(self) -> bool:
        return self.run_limited or self.episode_limited

    @property
    def run_limited(self) -> bool:
        return self.max_cost is not None or self.token_budget is not None

    @property
    def episode_limited(self) -> bool:
        return self.episode_max_cost is not None or self.episode_token_budget is not None

    @property
    def costs(self) -> bool:
        return self.max_cost is not None or self.episode_max_cost is not None

    def flags(self) -> list[str]:
        """The limits as the flags that set them."""
        out = []
        if self.max_cost is not None:
            out.append(f"--max-cost {self.max_cost:g}")
        if self.episode_max_cost is not None:
            out.append(f"--max-cost episode={self.episode_max_cost:g}")
        if self.token_budget is not None:
            out.append(f"--token-budget {self.token_budget}")
        if self.episode_token_budget is not None:
            out.append(f"--token-budget episode={self.episode_token_budget}")
        if self.run_limited and self.on_budget != "finish":
            out.append(f"--on-budget {self.on_budget}")
        return out

    def settings(self) -> dict[str, object]:
        return {"max_cost": self.max_cost, "episode_max_cost": self.episode_max_cost,
                "token_budget": self.token_budget, "episode_token_budget": self.episode_token_budget,
                "on_budget": self.on_budget}


def parse_limits(max_cost: Iterable[str] = (), token_budget: Iterable[str] = (), on_budget: str = "finish") -> Limits:
    """The limits from the flags: each of `--max-cost` and `--token-budget` is a run's limit (`5`)
    or an episode's (`episode=0.10`), given at most once each. A bad value is one line naming it."""
    if on_budget not in ON_BUDGET:
        raise UserError(f"--on-budget {on_budget!r} is not known; use finish (the episodes in flight end as "
                        "they would) or cancel (they stop, unstored, and a resume runs them)")
    run_cost, episode_cost = _split("--max-cost", max_cost, _usd)
    run_tokens, episode_tokens = _split("--token-budget", token_budget, _tokens)
    if on_budget == "cancel" and run_cost is None and run_tokens is None:  # it would do nothing: said, not ignored
        raise UserError("--on-budget cancel acts at the run's limit, which this run has none of; add --max-cost USD "
                        "or --token-budget N (an episode's limit ends only its own episode), or drop --on-budget")
    return Limits(max_cost=run_cost, episode_max_cost=episode_cost, token_budget=None if run_tokens is None else
                  int(run_tokens), episode_token_budget=None if episode_tokens is None else int(episode_tokens),
                  on_budget="cancel" if on_budget == "cancel" else "finish")


def _split(flag: str, values: Iterable[str], read: Callable[[str, str], float]) -> tuple[float | None, float | None]:
    run: float | None = None
    episode: float | None = None
    for raw in values:
        key, sep, text = raw.strip().partition("=")
        if not sep:
            key, text = "run", raw.strip()
        elif key != "episode":
            raise UserError(f"{flag} {raw!r}: the only key is episode= (e.g. {flag} episode=...); "
                            f"a value alone is the run's limit")
        value = read(flag, text)
        if (run if key == "run" else episode) is not None:
            raise UserError(f"{flag} gives the {key}'s limit twice; give it once")
        if key == "run":
            run = value
        else:
            episode = value
    return run, episode


def _usd(flag: str, text: str) -> float:
    try:
        value = float(text.removeprefix("$"))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{flag} {text!r} is not an amount of USD above 0 (e.g. {flag} 5 or {flag} episode=0.25)")
    return value


def _tokens(flag: str, text: str) -> float:
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.replace("_", "").isdigit() or int(digits.replace("_", "")) <= 0:
        raise UserError(f"{flag} {text!r} is not a number of tokens above 0 (e.g. {flag} 2000000, 2m or "
                        f"episode=50k)")
    return float(int(digits.replace("_", "")) * scale)


def check_prices(limits: Limits, models: Iterable[tuple[str, PriceTable]]) -> None:
    """A cost limit needs every model's price, before the run starts: one line naming the first
    model without one and the fix."""
    if not limits.costs:
        return
    for model_id, prices in models:
        if prices.price(model_id) is None:
            raise UserError(f"--max-cost cannot be kept: {model_id} has no price in deskbench's table (as of "
                            f"{PRICES_AS_OF}); give it with --prices FILE ({{\"{model_id.rsplit('/', 1)[-1]}\": "
                            "[input, output]}, USD per million tokens) or drop --max-cost")


@dataclass
class Spend:
    """Money (None: unknown, a model without a price) and tokens spent."""

    cost: float | None = 0.0
    tokens: int = 0

    @classmethod
    def of(cls, usage: Usage) -> Spend:
        return cls(cost=usage.cost_usd, tokens=usage.input_tokens + usage.output_tokens)

    def __add__(self, other: Spend) -> Spend:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Spend(cost=cost, tokens=self.tokens + other.tokens)

    def __sub__(self, other: Spend) -> Spend:
        cost = None if self.cost is None or other.cost is None else self.cost - other.cost
        return Spend(cost=cost, tokens=self.tokens - other.tokens)

    def most(self, other: Spend) -> Spend:
        """The larger of two counts of one episode, field by field (its calls as metered, its usage
        as the agent recorded it: an agent may add usage of its own, a meter sees every call)."""
        cost = None if self.cost is None or other.cost is None else max(self.cost, other.cost)
        return Spend(cost=cost, tokens=max(self.tokens, other.tokens))

    def describe(self) -> str:
        return f"{format_cost(self.cost)} ({self.tokens:,} tokens)"


def stored_spend(store: RunStore) -> Spend:
    """What the run has spent before this invocation: every stored episode and earlier try, and
    the episodes a budget stop cancelled (kept in the meta, as they are not stored)."""
    total = Spend()
    for usage in store.usages():
        total = total + Spend.of(usage)
    cancelled = store.meta(CANCELLED_KEY)
    if isinstance(cancelled, dict):
        cost = cancelled.get("cost")
        total = total + Spend(cost=float(cost) if isinstance(cost, int | float) else None,
                              tokens=int(cancelled.get("tokens") or 0))
    return total


def recorded_limits(store: RunStore) -> list[dict[str, object]]:
    """Every invocation's limits, as `remember_limits` kept them (oldest first)."""
    kept = store.meta(LIMITS_KEY)
    return [r for r in kept if isinstance(r, dict)] if isinstance(kept, list) else []


def describe_recorded(row: dict[str, object]) -> str:
    """One recorded invocation's limits as the flags that set them."""
    def num(key: str) -> float | None:
        value = row.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    tokens, episode_tokens = num("token_budget"), num("episode_token_budget")
    limits = Limits(max_cost=num("max_cost"), episode_max_cost=num("episode_max_cost"),
                    token_budget=None if tokens is None else int(tokens),
                    episode_token_budget=None if episode_tokens is None else int(episode_tokens),
                    on_budget="cancel" if row.get("on_budget") == "cancel" else "finish")
    return " ".join(limits.flags()) or "none"


def remember_limits(store: RunStore, limits: Limits) -> None:
    """The limits of this invocation, added to the run's record (not to any system's identity: a
    resume under other limits is the way to go on after a budget stop)."""
    store.update_meta(LIMITS_KEY, lambda old: [*(old if isinstance(old, list) else []),
                                               {"at": now(), **limits.settings()}])


@dataclass
class RunBudget:
    """A run's spend against its limits, in this process: what was stored before, then every call
    of this invocation's episodes as it is made (`EpisodeMeter`), settled to what each episode
    stored when it is committed."""

    limits: Limits
    before: Spend = field(default_factory=Spend)
    spent_now: Spend = field(default_factory=Spend)
    reason: str | None = None  # why the run stopped starting episodes
    cancelling: bool = False  # the run's limit was reached under --on-budget cancel
    cancelled: int = 0  # episodes in flight cancelled unstored
    not_started: int = 0  # episodes the stop kept from starting
    finished_after: int = 0  # episodes in flight when the limit was reached that ended and were stored
    _on_reached: list[Callable[[], None]] = field(default_factory=list)
    _store: RunStore | None = None

    @classmethod
    def of_run(cls, store: RunStore, limits: Limits) -> RunBudget:
        """The budget of a run about to go on. A cost limit over stored episodes of unknown cost
        (run with a model that had no price) cannot be kept: refused in one line."""
        before = stored_spend(store)
        if limits.max_cost is not None and before.cost is None:
            raise UserError(f"--max-cost cannot be kept: {store.dir} holds episodes of unknown cost (their model had no "
                            "price when they ran); use a new --out or drop --max-cost")
        budget = cls(limits=limits, before=before, _store=store)
        budget.reason = budget._reached()
        return budget

    @property
    def spent(self) -> Spend:
        return self.before + self.spent_now

    def reached(self) -> bool:
        return self.reason is not None

    def on_reached(self, callback: Callable[[], None]) -> None:
        """Call `callback` (soon, from the event loop) when the run's limit is reached."""
        self._on_reached.append(callback)

    def meter(self) -> EpisodeMeter:
        return EpisodeMeter(self.limits, self)

    def add(self, spend: Spend) -> None:
        self.spent_now = self.spent_now + spend
        self._check()

    def settle(self, meter: EpisodeMeter | None, stored: Usage) -> None:
        """An episode is stored: its metered spend becomes the larger of it and its stored usage
        (no meter: an episode that ran elsewhere, on a Ray worker, counted as it is stored)."""
        counted = meter.spend if meter is not None else Spend()
        self.spent_now = self.spent_now - counted + counted.most(Spend.of(stored))
        self._check()
        if self.reason is not None:  # it ended with the run at its limit (it may be the one that reached it)
            self.finished_after += 1

    def cancel(self, meter: EpisodeMeter) -> None:
        """An episode cancelled by the stop: what its calls spent stays counted, in the meta (a
        resume counts it too)."""
        self.cancelled += 1
        if self._store is not None:
            spend = meter.spend

            def add(old: object | None) -> object:
                was = old if isinstance(old, dict) else {}
                cost = was.get("cost", 0.0)
                new = None if cost is None or spend.cost is None else float(cost) + spend.cost
                return {"cost": new, "tokens": int(was.get("tokens") or 0) + spend.tokens}

            self._store.update_meta(CANCELLED_KEY, add)

    def _reached(self) -> str | None:
        spent, limits = self.spent, self.limits
        if limits.max_cost is not None and spent.cost is None:  # a call of a model without a price: stop, not guess
            return "the run's cost became unknown (a model without a price was called), so --max-cost cannot be kept"
        if limits.max_cost is not None and spent.cost is not None and spent.cost >= limits.max_cost:
            return f"spent {format_cost(spent.cost)} of --max-cost ${limits.max_cost:g}"
        if limits.token_budget is not None and spent.tokens >= limits.token_budget:
            return f"spent {spent.tokens:,} tokens of --token-budget {limits.token_budget:,}"
        return None

    def _check(self) -> None:
        if self.reason is not None:
            return
        self.reason = self._reached()
        if self.reason is None:
            return
        self.cancelling = self.limits.on_budget == "cancel"
        loop = asyncio.get_running_loop()
        for callback in self._on_reached:  # not from inside the episode's step that spent it: from the loop
            loop.call_soon(callback)

    def stop_line(self, stored: int, total: int) -> str:
        """The one line a budget stop ends with: what was spent, what is done, how to resume."""
        limits = self.limits
        if self.cancelling:
            flight = f"{self.cancelled} in flight cancelled (not stored)"
        else:
            flight = f"{self.finished_after} in flight finished"
        if limits.max_cost is not None and self.spent.cost is None:
            how = "give every model a price (--prices FILE) or drop --max-cost, and run the same command to resume"
        else:
            flag = "--max-cost" if self.reason and "--max-cost" in self.reason else "--token-budget"
            how = f"run the same command with a higher {flag} to resume"
        return (f"budget reached: {self.reason} (run total {self.spent.describe()}); {stored} of {total} episodes "
                f"stored, {flight}, {self.not_started} not started; {how}")


@dataclass
class EpisodeMeter:
    """One episode's spend against its limits (models/meter.py CallMeter): every call of the
    episode reports here, and through here to the run's budget."""

    limits: Limits
    budget: RunBudget | None = None
    spend: Spend = field(default_factory=Spend)
    usage: Usage = field(default_factory=Usage)  # the same calls' usage, as the provider split it
    reason: str | None = None  # the limit the episode reached
    recorder: Recorder | None = None

    def attach(self, recorder: object) -> None:
        if self.recorder is None and isinstance(recorder, Recorder):  # the agent's: the first made
            self.recorder = recorder

    def before_call(self, model_id: str) -> None:
        if self.reason is not None:  # an agent that caught the limit and called again
            raise LimitReached(self.reason)

    def after_call(self, model_id: str, response: ChatResponse) -> None:
        spend = Spend.of(response.usage)
        self.spend = self.spend + spend
        self.usage = self.usage + response.usage
        if self.budget is not None:
            self.budget.add(spend)
        self.reason = self.over(self.spend, model_id)
        if self.reason is not None:
            raise LimitReached(self.reason, response)

    def over(self, spend: Spend, model_id: str | None = None) -> str | None:
        """Why `spend` is at one of the episode's limits, or None."""
        limits = self.limits
        if limits.episode_max_cost is not None:
            if spend.cost is None:
                who = f"{model_id} has" if model_id else "a model has"
                return f"episode cost unknown ({who} no price), so --max-cost episode= cannot be kept"
            if spend.cost >= limits.episode_max_cost:
                return (f"episode cost limit reached: {format_cost(spend.cost)} of --max-cost "
                        f"episode={limits.episode_max_cost:g}")
        if limits.episode_token_budget is not None and spend.tokens >= limits.episode_token_budget:
            return (f"episode token limit reached: {spend.tokens:,} tokens of --token-budget "
                    f"episode={limits.episode_token_budget}")
        return None

    def at_limit(self, reason: str) -> AgentResult:
        """The result of an episode its limit ended: what its Recorder kept (trajectory, usage,
        transcript), no submission."""
        rec = self.recorder
        if rec is None:  # an agent without a Recorder: the metered usage is all there is
            return AgentResult(status="limit", error=reason, usage=self.usage)
        return rec.result("limit", error=reason)

    def checked(self, result: AgentResult) -> AgentResult:
        """An ended episode, held to its limits: one that reached a limit and went on anyway (an
        agent that caught it), or whose own recorded usage is over a limit, is a "limit" (its
        submission kept: the track decides what a limit's answer is worth)."""
        if result.status == "limit" and self.reason is not None:
            return result
        reason = self.reason or self.over(self.spend.most(Spend.of(result.usage)))
        if reason is None:
            return result
        return replace(result, status="limit", error=reason)
