"""Provider batch APIs behind one ChatModel, for calls that can wait.

A provider's batch API takes many requests at once, answers them within a window (24 h at
OpenAI and Anthropic, 48 h at Google) and charges half the standard price. `BatchedModel`
is a ChatModel that gathers the `complete()` calls made within a short window (or up to a
size), submits them as one batch through a provider's `BatchBackend`, polls it, and hands each
caller its own reply. So a judge grading a whole run, a one-call system (guess, rag, oracle)
over every task, or agents' turns gathered across episodes (as Inspect's batch mode does) cost
half, at the price of latency.

What it keeps, and why:
* Each backend builds its request bodies with its provider client's own builder and reads the
  results with that client's own reply parser (models/openai_chat.py, anthropic_chat.py,
  gemini_native.py): one wire format per provider, batched or not.
* Resumable: every request's custom id (a hash of the model, the request body and the episode's
  attempt) is written to a journal (the run store's meta table: `BatchJournal` is the part of
  RunStore it needs) with the batch id it went into, before the caller waits. A killed `score`
  or `run` that asks the same request again polls that batch instead of submitting it twice.
* A request the batch did not answer (a per-request error, the batch expired, failed or was
  cancelled) is retried on its own, outside any batch, through the ordinary retrying model at
  the standard price; only batched replies get the discount.
* Every reply that came through a batch carries the batch id (ChatResponse.batch), which the
  transcript records; the usage cost is the provider's batch price (`BatchBackend.discount`
  times the standard price from the price table).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from deskbench.errors import UserError
from deskbench.models.cache import ATTEMPT
from deskbench.models.capabilities import Capabilities
from deskbench.models.resilient import ResilientModel
from deskbench.models.types import ChatModel, ChatRequest, ChatResponse, ModelError, Usage

BatchState = Literal["running", "ended", "failed", "expired", "cancelled"]
"""A batch's state in deskbench's terms: "running" (validating, queued, in progress, finalizing,
cancelling: poll again), "ended" (results ready), "failed" (the batch as a whole was refused:
no results), "expired" (the window passed: results for what finished), "cancelled" (results for
what finished before the cancel)."""

FINAL_WITH_RESULTS: frozenset[BatchState] = frozenset({"ended", "expired", "cancelled"})

DEFAULT_WINDOW = 2.0  # seconds a batch gathers calls after the first (DESKBENCH_BATCH_WINDOW)
DEFAULT_POLL = 30.0  # seconds between status polls (DESKBENCH_BATCH_POLL)


@dataclass(frozen=True)
class BatchItem:
    """One request of a batch: the id its result comes back under and the provider's body."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class BatchStatus:
    state: BatchState
    provider_state: str  # the provider's own word ("in_progress", "ended", "BATCH_STATE_RUNNING", ...)
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    detail: str = ""  # why a batch failed, as the provider said it

    @property
    def final(self) -> bool:
        return self.state != "running"


class BatchBackend(Protocol):
    """One provider's batch API for one model. Errors are ModelError (retryable or not, fatal
    for a refusal the user must fix), as the provider's chat client raises them."""

    provider: str  # "openai", "anthropic", "google"
    discount: float  # a batched call costs this fraction of the standard price (0.5: half)
    max_requests: int  # the most requests one batch may hold

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The provider's request body for `request`, built by its chat client's own builder
        (may raise ProviderRefused as the client would)."""
        ...

    async def submit(self, items: Sequence[BatchItem]) -> str:
        """Create a batch of `items` (uploading a file first where the API needs one); its id."""
        ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, batch_id: str) -> dict[str, ChatResponse | ModelError]:
        """Each answered request's reply (parsed by the chat client's own parser) or its error,
        by custom id; a request missing from the map was not answered."""
        ...

    async def cancel(self, batch_id: str) -> None: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class FindsBatches(Protocol):
    """A backend that can find a batch it created by the key it was given (`batch_key` of its
    items, kept in the batch's metadata): it closes the one gap in resuming, a process killed
    after the provider created the batch but before its id was written to the journal."""

    async def find(self, key: str) -> str | None: ...


class _Closes(Protocol):
    async def close(self) -> None: ...


Client = TypeVar("Client", bound=_Closes)


class SdkBackend(ABC, Generic[Client]):
    """What the backends on a provider's own SDK (OpenAI, Anthropic) share: one model, the SDK's
    async client opened at the first call (so a missing key stops nothing before it is needed),
    and every SDK failure mapped to a ModelError as that provider's chat client maps it. A
    subclass says how to open its client (`_open`) and how to map its errors (`_error`)."""

    provider: str
    discount: float
    max_requests: int

    def __init__(self, model: str, caps: Capabilities, *, model_id: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, timeout: float = 120.0) -> None:
        self.model = model
        self.id = model_id or f"{self.provider}/{model}"
        self.caps = caps
        self._settings: dict[str, Any] = {"base_url": base_url, "api_key": api_key, "timeout": timeout}
        self._client: Client | None = None

    @abstractmethod
    def _open(self) -> Client:
        """A new SDK client (`_opened` with the SDK's client class and error class)."""

    @abstractmethod
    def _error(self, exc: Exception) -> ModelError:
        """`exc` from the SDK as a ModelError; anything else raised again as it is."""

    def _opened(self, client: Callable[..., Client], sdk_error: type[Exception]) -> Client:
        """`client` made from `_settings`; an SDK error (no key in the environment) as one line."""
        try:
            return client(**self._settings, max_retries=2)
        except sdk_error as exc:
            raise UserError(f"cannot use {self.id}: {exc}") from exc

    def _sdk(self) -> Client:
        if self._client is None:
            self._client = self._open()
        return self._client

    @contextlib.contextmanager
    def _mapped(self) -> Iterator[None]:
        """Around SDK calls: their failures as `_error` maps them."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - the SDK's errors, mapped as the chat client maps them
            raise self._error(exc) from exc

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
        self._client = None


def batch_key(items: Sequence[BatchItem]) -> str:
    """The key a batch of `items` is created under (the same items: the same key)."""
    joined = "\n".join(sorted(i.custom_id for i in items))
    return hashlib.sha256(joined.encode()).hexdigest()[:40]


class BatchJournal(Protocol):
    """Where submitted batches are remembered across processes: RunStore has these two methods
    (its meta table); `MemoryJournal` keeps them for one process."""

    def meta(self, key: str) -> object | None: ...

    def set_meta(self, key: str, value: object) -> None: ...


class MemoryJournal:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    def meta(self, key: str) -> object | None:
        return self.values.get(key)

    def set_meta(self, key: str, value: object) -> None:
        self.values[key] = value


REQUEST_KEY = "batch/request/"  # + custom id -> batch id
BATCH_KEY = "batch/batch/"  # + batch id -> {"provider", "model", "requests", "submitted", "state"}


def custom_id(model_id: str, body: dict[str, Any], attempt: int = 0) -> str:
    """The request's id in a batch and in the journal: the same request of the same attempt
    always gets the same id (so a resumed run finds its batch), another attempt another one (so
    pass@k attempts are separate calls). 40 hex digits with a prefix: within every provider's
    custom-id rules (Anthropic's ^[a-zA-Z0-9_-]{1,64}$ the strictest)."""
    payload = json.dumps([model_id, body, attempt], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "db-" + hashlib.sha256(payload.encode()).hexdigest()[:40]


@dataclass
class BatchStats:
    """What went through batches, for the run's settings and summary."""

    batched: int = 0  # replies that came from a batch
    individual: int = 0  # requests a batch did not answer, sent on their own
    batches: list[str] = field(default_factory=list)  # ids, in submission (or resume) order
    resumed: list[str] = field(default_factory=list)  # batch ids picked up from the journal

    def as_dict(self) -> dict[str, object]:
        return {"batched": self.batched, "individual": self.individual, "batches": list(self.batches),
                "resumed": list(self.resumed)}


@dataclass
class _Batch:
    id: str
    submitted: float
    poller: asyncio.Task[None] | None = None
    results: dict[str, ChatResponse | ModelError] | None = None  # set when the batch is final
    status: BatchStatus | None = None


class BatchedModel(ResilientModel):
    """A ResilientModel whose calls go through a provider's batch API (see the module docstring).

    Built from `direct`, the same model as an ordinary ResilientModel: its settings go on every
    request, its cache, price table and usage ledger are shared, and everything around a call
    (settings, cache, an episode's meter) is ResilientModel's; only the call itself
    (`_call_with_retries`) goes into a batch. A request the batch did not answer is sent on its
    own by ResilientModel's own retrying call, at the standard price."""

    def __init__(self, backend: BatchBackend, direct: ResilientModel, *, journal: BatchJournal | None = None,
                 window: float = DEFAULT_WINDOW, poll: float = DEFAULT_POLL, max_size: int | None = None) -> None:
        super().__init__(direct.inner, policy=direct.policy, concurrency=direct.concurrency, cache=direct.cache,
                         prices=direct.prices, ledger=direct.ledger, settings=direct.settings)
        self.backend = backend
        self.journal: BatchJournal = journal if journal is not None else MemoryJournal()
        self.window = window
        self.poll = poll
        self.max_size = min(max_size or backend.max_requests, backend.max_requests)
        self.stats = BatchStats()
        self._batches: dict[str, _Batch] = {}
        self._member: dict[str, str] = {}  # custom id -> batch id, for ids this process has seen
        self._waiters: dict[str, list[asyncio.Future[tuple[ChatResponse | ModelError, str]]]] = {}
        self._pending: dict[str, BatchItem] = {}  # gathered, not yet submitted
        self._flush: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._recovering: dict[str, dict[str, BatchItem]] = {}  # batch key -> its requests waiting for find()
        self._recover_tasks: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the call -----------------------------------------------------------------------------
    async def _call_with_retries(self, request: ChatRequest) -> ChatResponse:
        self._loop_here()
        request = await self._fit_images(request)
        body = self.backend.body(request)
        cid = custom_id(self.id, body, ATTEMPT.get())
        started = time.monotonic()
        outcome, batch_id = await self._wait(cid, body)
        if isinstance(outcome, ModelError):
            self.stats.individual += 1
            return await super()._call_with_retries(request)  # on its own: full price, its own retries
        return self._batch_account(outcome, batch_id, time.monotonic() - started)

    async def aclose(self) -> None:
        """Stop polling (the batches go on at the provider: a later run resumes them) and close."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        for batch in self._batches.values():
            batch.poller = None
        self._pending.clear()
        await self.backend.aclose()
        await super().aclose()

    async def cancel_open(self) -> list[str]:
        """Cancel every batch of this model still running (a run stopping at its budget with
        `cancel`); the ids cancelled. Their callers then get what finished before the cancel,
        and the rest is sent on its own, or given up by the caller."""
        cancelled = []
        for batch in list(self._batches.values()):
            if batch.results is None:
                try:
                    await self.backend.cancel(batch.id)
                except ModelError:  # it ended meanwhile (a finished batch cannot be cancelled)
                    continue
                cancelled.append(batch.id)
        return cancelled

    def summary(self) -> str:
        """One line for the run's summary: what went through batches."""
        s = self.stats
        n = len(s.batches)
        line = (f"{self.id}: {s.batched} call{'s' if s.batched != 1 else ''} through {n} {self.backend.provider} "
                f"batch{'es' if n != 1 else ''} at {self.backend.discount:.0%} of the standard price")
        if s.resumed:
            line += f" ({len(s.resumed)} resumed, none submitted twice)"
        if s.individual:
            line += f"; {s.individual} not answered by a batch, sent on their own at the standard price"
        return line

    # -- gathering, submitting, polling -------------------------------------------------------
    def _loop_here(self) -> None:
        """Futures and tasks belong to one event loop; the same model may serve several
        `asyncio.run`s (a run, then its judge): a new loop starts with no tasks in flight
        (finished batches' results are kept)."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            self._flush, self._tasks, self._pending, self._waiters = None, set(), {}, {}
            self._recovering, self._recover_tasks = {}, {}
            for batch in self._batches.values():
                batch.poller = None
        self._loop = loop

    def _wait(self, cid: str, body: dict[str, Any]) -> asyncio.Future[tuple[ChatResponse | ModelError, str]]:
        """A future for `cid`'s outcome: from a batch already known (this process's, or the
        journal's from an earlier one), else from the next batch submitted."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[ChatResponse | ModelError, str]] = loop.create_future()
        batch_id = self._member.get(cid)
        known = self.journal.meta(REQUEST_KEY + cid) if batch_id is None and cid not in self._waiters else None
        if isinstance(known, str):
            batch_id = self._member[cid] = known
            self._resumed(known)
        elif isinstance(known, dict) and isinstance(key := known.get("pending"), str) \
                and isinstance(self.backend, FindsBatches):  # submitted by a process killed before it knew the id
            self._waiters.setdefault(cid, []).append(future)
            self._recovering.setdefault(key, {})[cid] = BatchItem(cid, body)
            if key not in self._recover_tasks:
                self._recover_tasks[key] = self._spawn(self._recover(key, self.backend))
            return future
        if batch_id is not None:
            batch = self._batches[batch_id]
            if batch.results is not None:
                future.set_result(self._outcome(batch, cid))
                return future
            self._waiters.setdefault(cid, []).append(future)
            self._ensure_poller(batch)
            return future
        first = cid not in self._waiters
        self._waiters.setdefault(cid, []).append(future)
        if first:  # the same request twice in one window goes once; the later callers share it
            self._gather(BatchItem(cid, body))
        return future

    def _gather(self, item: BatchItem) -> None:
        """`item` into the next batch, submitted when full or `window` seconds after its first."""
        self._pending[item.custom_id] = item
        if len(self._pending) >= self.max_size:
            self._submit_now()
        elif self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self.window, self._submit_now)

    def _resumed(self, batch_id: str) -> _Batch:
        """The batch `batch_id`, known from the journal (an earlier process submitted it)."""
        if batch_id not in self._batches:
            self._batches[batch_id] = _Batch(batch_id, time.monotonic())
            self.stats.resumed.append(batch_id)
            self.stats.batches.append(batch_id)
        return self._batches[batch_id]

    async def _recover(self, key: str, backend: FindsBatches) -> None:
        """The batch created under `key` by a process killed before it wrote the batch's id: found
        at the provider, its requests wait for it; not found (never created), they go in the next."""
        try:
            found = await backend.find(key)
        except ModelError:
            found = None
        self._recover_tasks.pop(key, None)
        items = self._recovering.pop(key, {})
        if found is None:
            for item in items.values():
                self._gather(item)
            return
        batch = self._resumed(found)
        for cid in items:
            self._member[cid] = found
            self.journal.set_meta(REQUEST_KEY + cid, found)
        if not isinstance(self.journal.meta(BATCH_KEY + found), dict):
            self.journal.set_meta(BATCH_KEY + found, {"provider": self.backend.provider, "model": self.id,
                                                      "requests": None, "state": "running"})
        if batch.results is not None:
            for cid in items:
                self._resolve(cid, self._outcome(batch, cid)[0], found)
        else:
            self._ensure_poller(batch)

    def _submit_now(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        items, self._pending = list(self._pending.values()), {}
        if items:
            self._spawn(self._submit(items))

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _submit(self, items: list[BatchItem]) -> None:
        """Submit `items` as one batch; if that fails, each caller hears how (a provider's refusal
        sends each request on its own; anything else, a journal that cannot be written, is raised
        to each caller rather than leaving it waiting)."""
        try:
            await self._create(items)
        except ModelError as exc:  # the batch was not created: each request goes on its own
            for item in items:
                self._resolve(item.custom_id, exc, "")
        except BaseException as exc:
            for item in items:
                for future in self._waiters.pop(item.custom_id, []):
                    if not future.done():
                        future.set_exception(exc)
            raise

    async def _create(self, items: list[BatchItem]) -> None:
        if isinstance(self.backend, FindsBatches):  # a kill between creation and the id's record is recoverable
            mark = {"pending": batch_key(items)}
            for item in items:
                self.journal.set_meta(REQUEST_KEY + item.custom_id, mark)
        batch_id = await self.backend.submit(items)
        self.journal.set_meta(BATCH_KEY + batch_id, {"provider": self.backend.provider, "model": self.id,
                                                     "requests": len(items), "state": "running"})
        for item in items:
            self.journal.set_meta(REQUEST_KEY + item.custom_id, batch_id)
            self._member[item.custom_id] = batch_id
        batch = self._batches[batch_id] = _Batch(batch_id, time.monotonic())
        self.stats.batches.append(batch_id)
        self._ensure_poller(batch)

    def _ensure_poller(self, batch: _Batch) -> None:
        if batch.poller is None or batch.poller.done():
            batch.poller = self._spawn(self._poll(batch))

    async def _poll(self, batch: _Batch) -> None:
        errors = 0
        while True:
            try:
                status = await self.backend.status(batch.id)
                if status.final:
                    results = await self.backend.results(batch.id) if status.state in FINAL_WITH_RESULTS else {}
                    break
            except ModelError as exc:
                errors += 1
                if not exc.retryable or errors >= 5:
                    self._finish(batch, {}, None, exc)
                    return
                await asyncio.sleep(max(self.poll, exc.retry_after or 0.0))
                continue
            errors = 0
            await asyncio.sleep(self.poll)
        self._finish(batch, results, status, None)

    def _finish(self, batch: _Batch, results: dict[str, ChatResponse | ModelError], status: BatchStatus | None,
                error: ModelError | None) -> None:
        batch.results, batch.status = results, status
        if error is not None:  # the batch could not be read: its requests go on their own
            batch.results = {cid: error for cid, b in self._member.items() if b == batch.id}
        state = status.state if status is not None else "unreadable"
        self.journal.set_meta(BATCH_KEY + batch.id, {**_as_dict(self.journal.meta(BATCH_KEY + batch.id)),
                                                     "state": state})
        for cid, b in list(self._member.items()):
            if b == batch.id and cid in self._waiters:
                outcome, _ = self._outcome(batch, cid)
                self._resolve(cid, outcome, batch.id)

    def _outcome(self, batch: _Batch, cid: str) -> tuple[ChatResponse | ModelError, str]:
        found = (batch.results or {}).get(cid)
        if found is None:
            state = batch.status.state if batch.status else "unreadable"
            found = ModelError(f"batch {batch.id} ({state}) has no result for request {cid}", retryable=True)
        return found, batch.id

    def _resolve(self, cid: str, outcome: ChatResponse | ModelError, batch_id: str) -> None:
        """Hand `cid`'s outcome to its callers: the reply (usage and all) to the first, the
        same reply as a cache hit (no usage: it was paid once) to any other."""
        for i, future in enumerate(self._waiters.pop(cid, [])):
            if future.done():  # its caller was cancelled
                continue
            if i and isinstance(outcome, ChatResponse):
                future.set_result((outcome.model_copy(update={"cached": True, "usage": Usage(calls=0)}), batch_id))
            else:
                future.set_result((outcome, batch_id))

    def _batch_account(self, response: ChatResponse, batch_id: str, seconds: float) -> ChatResponse:
        """The reply with its usage at the batch price, added to the shared ledger."""
        self.stats.batched += 1
        if response.cached:
            return response.model_copy(update={"batch": batch_id})
        usage = response.usage
        cost = self.prices.cost(self.id, usage.input_tokens, usage.output_tokens)
        usage = usage.model_copy(update={"calls": max(usage.calls, 1), "seconds": seconds,
                                         "cost_usd": None if cost is None else cost * self.backend.discount,
                                         "cost_known": cost is not None})
        self.ledger.total = self.ledger.total + usage
        return response.model_copy(update={"usage": usage, "batch": batch_id})


def _as_dict(value: object) -> dict[str, object]:
    return dict(value) if isinstance(value, dict) else {}


# -- which backend serves a model ---------------------------------------------------------------
BACKENDS: dict[str, str] = {
    "openai": "deskbench.models.batch.openai",
    "anthropic": "deskbench.models.batch.anthropic",
    "google": "deskbench.models.batch.gemini",
}
"""Provider prefix -> the module whose `for_model(inner: ChatModel) -> BatchBackend` builds the
backend from the provider's chat adapter (its model name, capabilities, key and base URL)."""


def batch_provider(model_id: str) -> str:
    """The provider whose batch API serves `model_id`, or a UserError of one line."""
    provider = model_id.partition("/")[0]
    if provider in BACKENDS:
        return provider
    hint = " (Gemini's batch mode is on its native API: use google/MODEL)" if provider == "gemini" else ""
    raise UserError(f"--batch-api: {model_id} has no batch API in deskbench{hint}; batch works with "
                    + ", ".join(f"{p}/..." for p in BACKENDS) + "; drop --batch-api for this model")


def backend_for(inner: ChatModel) -> BatchBackend:
    """The batch backend for a provider adapter (OpenAIChat, AnthropicChat, GeminiNative)."""
    module = importlib.import_module(BACKENDS[batch_provider(inner.id)])
    factory: Callable[[ChatModel], BatchBackend] = module.for_model
    return factory(inner)


def batched(model: ResilientModel, journal: BatchJournal | None, *, window: float | None = None,
            poll: float | None = None) -> BatchedModel:
    """`model` (from registry.open_model) with its calls going through its provider's batch API.
    The window and poll interval come from DESKBENCH_BATCH_WINDOW / DESKBENCH_BATCH_POLL
    (seconds) when not given: long waits are the point of a batch, but tests poll fast."""
    return BatchedModel(backend_for(model.inner), model, journal=journal,
                        window=window if window is not None else _seconds("DESKBENCH_BATCH_WINDOW", DEFAULT_WINDOW),
                        poll=poll if poll is not None else _seconds("DESKBENCH_BATCH_POLL", DEFAULT_POLL))


class DeferredJournal:
    """A journal whose store is given later: a run's models are opened before its store exists
    (a missing key stops the run before anything is created), and make no call before it does."""

    def __init__(self, target: BatchJournal | None = None) -> None:
        self.target = target

    def _store(self) -> BatchJournal:
        if self.target is None:
            raise RuntimeError("a batched call before the run store was given to the batch journal")
        return self.target

    def meta(self, key: str) -> object | None:
        return self._store().meta(key)

    def set_meta(self, key: str, value: object) -> None:
        self._store().set_meta(key, value)


@dataclass
class BatchMode:
    """`--batch-api`: which roles' models go through batches, where their batches are remembered,
    and the models opened so (for the summary line and the run's record)."""

    journal: DeferredJournal
    roles: frozenset[str]
    window: float
    poll: float
    models: list[BatchedModel] = field(default_factory=list)
    _cancelling: set[asyncio.Task[list[str]]] = field(default_factory=set)

    def summary(self) -> list[str]:
        return [m.summary() for m in self.models if m.stats.batches]

    def cancel_open(self) -> None:
        """Cancel every open batch of the models opened so (a run at its budget with `--on-budget
        cancel`: the episodes in flight stop, and so does what their batches would still cost).
        Called from the event loop; the cancellations run as tasks of it."""
        loop = asyncio.get_running_loop()
        for model in self.models:
            task = loop.create_task(model.cancel_open())
            self._cancelling.add(task)
            task.add_done_callback(self._cancelling.discard)

    def record(self) -> dict[str, object]:
        """What went through batches, per model, for the run store's meta ("batch")."""
        return {m.id: {"provider": m.backend.provider, "discount": m.backend.discount, **m.stats.as_dict()}
                for m in self.models}


_MODE: list[BatchMode] = []  # the active mode (at most one), set by the CLI for one command


@contextlib.contextmanager
def batch_mode(journal: BatchJournal | None = None, roles: Sequence[str] = ("agent", "judge"), *,
               window: float | None = None, poll: float | None = None) -> Iterator[BatchMode]:
    """Within the block, `registry.open_model` wraps every model of `roles` in a BatchedModel
    (`wrap`); `journal` may be given later (`mode.journal.target = store`)."""
    mode = BatchMode(DeferredJournal(journal), frozenset(roles),
                     window if window is not None else _seconds("DESKBENCH_BATCH_WINDOW", DEFAULT_WINDOW),
                     poll if poll is not None else _seconds("DESKBENCH_BATCH_POLL", DEFAULT_POLL))
    _MODE.append(mode)
    try:
        yield mode
    finally:
        _MODE.remove(mode)


def active_mode() -> BatchMode | None:
    return _MODE[-1] if _MODE else None


def wrap(model: ResilientModel, role: str) -> ResilientModel:
    """`model` as a BatchedModel when a batch mode is on for `role`; else `model` itself."""
    mode = active_mode()
    if mode is None or role not in mode.roles or isinstance(model, BatchedModel):
        return model
    found = BatchedModel(backend_for(model.inner), model, journal=mode.journal, window=mode.window, poll=mode.poll)
    mode.models.append(found)
    return found


def _seconds(name: str, default: float) -> float:
    import os

    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise UserError(f"{name}={raw!r} is not a number of seconds >= 0; set it to e.g. {default:g} or unset it")
    return value
