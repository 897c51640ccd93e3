"""Run an agent over tasks: episodes in parallel, each committed to the run store when it ends.

An episode is one (task, attempt); pass@k runs ask for k attempts of every task. Episodes
already in the store are skipped, so running the same command again resumes. An exception
inside an episode is recorded as that episode's error; it never stops the run, except a provider's
refusal that is the user's to fix (ProviderRefused: a bad key, an unknown model, a setting the
model does not take), which stops it at once with nothing recorded for the episodes in flight.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from deskbench.agents.base import AgentResult
from deskbench.models.cache import ATTEMPT
from deskbench.models.meter import METER, LimitReached
from deskbench.models.types import ProviderRefused
from deskbench.runs.outputs import (
    episode_dir as episode_dir,  # the layout's home; importers read it here too
)
from deskbench.runs.store import Episode, RunStore, now

if TYPE_CHECKING:
    from deskbench.runs.budget import EpisodeMeter, RunBudget


class HasId(Protocol):
    @property
    def id(self) -> str: ...


EpisodeFn = Callable[[HasId, int], Awaitable[AgentResult]]
"""Runs one episode: (task, attempt) -> its result."""


@dataclass
class RunCounts:
    done: int = 0
    errors: int = 0
    skipped: int = 0
    cost_usd: float | None = 0.0  # of the episodes run; None (unknown) once one's cost is unknown
    cost_unknown: int = 0  # episodes run whose cost is unknown (a model without a price)
    errors_kept: int = 0  # errored episodes skipped as stored (a resume without --retry-errors)
    unreadable_kept: int = 0  # of those, episodes whose stored row cannot be read (store.UnreadableEpisode)
    error_lines: Counter[str] = field(default_factory=Counter)  # the episodes run that failed, by last line

    def add_cost(self, cost: float | None) -> None:
        if cost is None:
            self.cost_unknown += 1
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += cost

    def add_error(self, error: str | None) -> None:
        """A failed episode's error, counted by its last line (an exception's type and message
        come last, after any traceback)."""
        lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
        last = lines[-1] if lines else "no error text"
        self.error_lines[last[:300] + ("…" if len(last) > 300 else "")] += 1

    def notes(self, *, retry_hint: bool = True) -> str:
        """What the end-of-run line adds about failures: the most common error's last line and
        its count, and the errored episodes a resume kept (the flag that runs them again)."""
        out = ""
        if self.error_lines:
            line, n = self.error_lines.most_common(1)[0]
            out += f"; most common ({n}): {line}"
        if self.errors_kept and retry_hint:
            broken = f" ({self.unreadable_kept} of them unreadable)" if self.unreadable_kept else ""
            out += (f"; {self.errors_kept} errored episode{'s' if self.errors_kept != 1 else ''}{broken} kept; "
                    "add --retry-errors to run them again")
        return out


def system_name(agent: str, model: str) -> str:
    return f"{agent}:{model}"


def pending_episodes(tasks: Sequence[HasId], store: RunStore, system: str, attempts: int, replace: bool,
                     counts: RunCounts, *, retry_errors: bool = False) -> list[tuple[HasId, int]]:
    """The (task, attempt) pairs still to run, attempt 0 of every task first (a cut-short run has
    pass@1 first); the others are counted as skipped. An episode stored with an error is done
    unless `retry_errors` (it is run again, as a new try); those kept are counted. Every executor
    resumes through this. An episode whose stored row cannot be read is an errored one here: named
    on stderr (one line), kept and counted, or run again with `retry_errors` (never done unsaid)."""
    unreadable = [] if replace else store.unreadable(system)
    errored = set() if replace else store.errored(system, unreadable)
    done = set() if replace else store.done(system) - (errored if retry_errors else set())
    wanted = [(t, a) for a in range(attempts) for t in tasks]
    pending = [(t, a) for t, a in wanted if (t.id, a) not in done]
    counts.skipped = len(wanted) - len(pending)
    counts.errors_kept = 0 if retry_errors else sum((t.id, a) in errored for t, a in wanted)
    if not retry_errors:
        for u in unreadable:
            store.note_unreadable(u)
        counts.unreadable_kept = len(unreadable)
    return pending


@dataclass
class EndedEpisode:
    """One episode as it ended, wherever it ran (this process or a Ray worker): what the store keeps."""

    result: AgentResult
    started_at: str
    finished_at: str


async def run_one(episode: EpisodeFn, task: HasId, attempt: int, meter: EpisodeMeter | None = None) -> EndedEpisode:
    """Run one episode; an exception inside it is its error (data), except ProviderRefused,
    which is raised: every episode would fail alike. With a `meter` (runs/budget.py), every model
    call of the episode is counted against its limits, and a limit reached ends it as "limit"."""
    started = now()
    ATTEMPT.set(attempt)  # this episode's task only: the cache keys its calls by attempt
    if meter is not None:
        METER.set(meter)  # this episode's task only, as ATTEMPT
    try:
        result = await episode(task, attempt)
    except ProviderRefused:
        raise
    except LimitReached as exc:  # its cost or token limit: what the episode did so far is kept
        result = meter.at_limit(exc.reason) if meter is not None else AgentResult(status="limit", error=exc.reason)
    except Exception as exc:  # an episode's failure is data, not the end of the run
        result = AgentResult(status="error", error=f"{type(exc).__name__}: {exc}")
    if meter is not None:
        result = meter.checked(result)
    return EndedEpisode(result=result, started_at=started, finished_at=now())


def commit_episode(store: RunStore, system: str, task_id: str, attempt: int, ended: EndedEpisode,
                   counts: RunCounts, *, replace: bool = False, retry: bool = False,
                   on_episode: Callable[[RunCounts], None] | None = None) -> None:
    """Store one ended episode with its transcript (one transaction) and count it: the one commit
    path of every executor, so a run's store does not depend on where its episodes ran. `retry`
    (--retry-errors): a stored errored episode becomes an earlier try of this one (store.record)."""
    result = ended.result
    if result.error:  # a URL in it (an external service's, a fetched page's) is kept without credentials
        import dataclasses

        from deskbench.redact import redact_text

        result = dataclasses.replace(result, error=redact_text(result.error))
    store.record(Episode(
        task_id=task_id, system=system, attempt=attempt, status=result.status, error=result.error,
        submission=result.submission, trajectory=result.trajectory, usage=result.usage,
        started_at=ended.started_at, finished_at=ended.finished_at,
    ), replace=replace, transcript=result.transcript, retry=retry)
    counts.done += 1
    counts.errors += result.status != "ok"
    if result.status != "ok":
        counts.add_error(result.error)
    counts.add_cost(result.usage.cost_usd)
    if on_episode:
        on_episode(counts)


async def run_attempts(
    tasks: Sequence[HasId],
    episode: EpisodeFn,
    store: RunStore,
    system: str,
    *,
    attempts: int = 1,
    concurrency: int = 16,
    on_episode: Callable[[RunCounts], None] | None = None,
    replace: bool = False,
    retry_errors: bool = False,
    budget: RunBudget | None = None,
) -> RunCounts:
    """Every (task, attempt) not yet in the store, `concurrency` at a time; attempts of a task
    are scheduled after the first attempt of every task, so a cut-short run has pass@1 first.
    `replace` runs every (task, attempt) again, each new episode replacing the stored one;
    `retry_errors` runs the errored ones again too, each a new try of its episode. With a
    `budget` (runs/budget.py), every episode is held to its limits and, once the run's is reached,
    no episode starts; those in flight finish, or are cancelled unstored (--on-budget cancel)."""
    counts = RunCounts()
    pending = pending_episodes(tasks, store, system, attempts, replace, counts, retry_errors=retry_errors)
    slots = asyncio.Semaphore(concurrency)
    refused: list[ProviderRefused] = []
    started: list[asyncio.Task[None]] = []
    in_flight: set[asyncio.Task[object]] = set()  # the tasks running an episode under a budget (to cancel)

    async def one(task: HasId, attempt: int) -> None:
        meter: EpisodeMeter | None = None
        me: asyncio.Task[object] | None = None
        try:
            async with slots:
                if refused:  # the run is stopping: an episode waiting for a slot does not start
                    return
                if budget is not None:
                    if budget.reached():  # the run's limit: no new episode
                        budget.not_started += 1
                        return
                    meter = budget.meter()
                    me = asyncio.current_task()
                    if me is not None:
                        in_flight.add(me)
                try:
                    ended = await run_one(episode, task, attempt, meter)
                except ProviderRefused as exc:  # the user's to fix: every episode would fail alike
                    refused.append(exc)
                    raise
                finally:
                    if me is not None:
                        in_flight.discard(me)
                if budget is not None and meter is not None:
                    budget.settle(meter, ended.result.usage)
                commit_episode(store, system, task.id, attempt, ended, counts, replace=replace, retry=retry_errors,
                               on_episode=on_episode)
        except asyncio.CancelledError:
            if budget is None or not budget.cancelling or meter is None:
                raise
            budget.cancel(meter)  # cancelled in flight: unstored (a resume runs it), what it spent still counted

    def cancel_in_flight() -> None:  # --on-budget cancel: the episodes running stop; those waiting never start
        for t in list(in_flight):
            t.cancel()

    if budget is not None and budget.limits.on_budget == "cancel":
        budget.on_reached(cancel_in_flight)

    with _long_lived_heap_frozen():
        # One episode starts per turn of the event loop. Started together, every episode would
        # run its start (up to its first model call) before the loop next polls a socket, so no
        # first request went on the wire until all of them had been built.
        try:
            for t, a in pending:
                started.append(asyncio.ensure_future(one(t, a)))
                await asyncio.sleep(0)
        except BaseException:  # cancelled while starting: the episodes already started go with it
            for task in started:
                task.cancel()
            await asyncio.gather(*started, return_exceptions=True)  # gone before the loop closes
            raise
        try:
            await asyncio.gather(*started)
        except BaseException:
            # A provider refused a call for a reason every episode shares (ProviderRefused), or
            # the run was cancelled: the episodes in flight stop unrecorded (a later run resumes
            # them); those already recorded stay.
            for task in started:
                task.cancel()
            await asyncio.gather(*started, return_exceptions=True)
            raise
    return counts


_runs_in_progress = 0
_runs_lock = threading.Lock()  # runs may go on in several threads, each with its own event loop


@contextmanager
def _long_lived_heap_frozen() -> Iterator[None]:
    """While runs are in progress, the objects that were alive when the first one started (the
    modules, the corpus, the model clients) stay out of the garbage collector's passes.

    A full collection walks every object in the process (~120,000 in bench_runtime, where 2 runs
    in 5 had one): it stopped the event loop, and so all 64 episodes, for 65-140 ms. Frozen, the
    heap that was there before the run is not walked again; what the run itself allocates is
    collected as usual, and the frozen objects go back to the collector when the last run ends.
    """
    global _runs_in_progress
    with _runs_lock:
        if _runs_in_progress == 0:
            gc.freeze()
        _runs_in_progress += 1
    try:
        yield
    finally:
        with _runs_lock:
            _runs_in_progress -= 1
            if _runs_in_progress == 0:
                gc.unfreeze()
