"""Score-time model calls (judges, graders) kept per episode: the run store's judge_transcripts.

Why context variables: a judge is built once from a command's flags and called deep inside a
track's scorer with the answer to judge, not the episode it came from; only the scorer knows the
episode. So the command opens a `recording(store)` scope, the scorer marks each episode's work
with `episode(task, system, attempt)`, and a judge's model wrapped by `recorded(model, scorer)`
adds each call (request, reply, timing, usage, error; a cache hit with `cached: true`) to that
episode's transcript under the scorer's name. An agentic judge with its own Recorder hands its
transcript (tool calls included) over with `attach`. asyncio tasks copy the context when they
are created, so episodes scored concurrently never mix. Outside a scope (a predictions file, the
report, compare) nothing is recorded and nothing changes.

An episode's transcripts are written when its `episode` block ends, so scoring cut short keeps
what it judged.

The model version each provider returned (a reply's `model`: the snapshot behind a family name) is
in every recorded call; a scope also keeps the versions each judge returned in the run's meta
(`judge_versions`), and a later scope whose judge answered as another version says so in one line
on stderr: the same judge name, another model, other verdicts possible. `returned_versions`
collects them for a caller comparing judges (scoring/judge_agreement.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from deskbench.models.types import ChatModel, ChatRequest, ChatResponse
from deskbench.runs.transcript import ModelCallEvent, Transcript

if TYPE_CHECKING:  # the scorers import this module; only a scope's opener needs the store
    from deskbench.runs.store import RunStore

# the scorers' names, as judge_transcripts keys them
DOCQA_JUDGE = "llm_judge"  # MADQA's answer judge (tracks/docqa/scoring/llm_judge.py)
QA_JUDGE = "qa_judge"  # AIDABench Listing 2
CHART_JUDGE = "chart_judge"  # AIDABench Listings 3-4 (correctness and readability calls)
FILE_JUDGE = "file_judge"  # AIDABench Listing 5, agentic: its execute_code calls included
LLM_CHECK = "llm_check"  # deliverables' llm_check verifiers
RUBRIC_GRADER = "rubric_grader"  # deliverables' LLM rubric grader (`deskbench rubric grade`)

EpisodeKey = tuple[str, str, int]  # task, system, attempt


@dataclass
class JudgeLog:
    """One scope's store and the transcripts of the episodes being scored in it."""

    store: RunStore
    system: str | None = None  # what `episode` fills in when the scorer knows only the task
    attempt: int = 0
    transcripts: dict[EpisodeKey, dict[str, Transcript]] = field(default_factory=dict)
    returned: dict[str, set[str]] = field(default_factory=dict)  # judge model id -> versions its replies named

    def transcript(self, key: EpisodeKey, scorer: str) -> Transcript:
        return self.transcripts.setdefault(key, {}).setdefault(scorer, Transcript())

    def save(self, key: EpisodeKey) -> None:
        """Write one episode's transcripts (those with events) and forget them."""
        for scorer, transcript in self.transcripts.pop(key, {}).items():
            if transcript.events:
                self.store.record_judge_transcript(*key, scorer, transcript)

    def save_all(self) -> None:
        for key in list(self.transcripts):
            self.save(key)


_log: ContextVar[JudgeLog | None] = ContextVar("deskbench_judge_log", default=None)
_episode: ContextVar[EpisodeKey | None] = ContextVar("deskbench_judge_episode", default=None)
_collector: ContextVar[dict[str, set[str]] | None] = ContextVar("deskbench_judge_versions", default=None)
VERSIONS_META = "judge_versions"  # the run's meta key: judge model id -> the versions its last scoring returned


@contextmanager
def recording(store: RunStore | None, system: str | None = None, attempt: int = 0) -> Iterator[JudgeLog | None]:
    """Keep the judge calls made inside (in `episode` blocks) in `store`; None records nothing.
    `system`/`attempt`: the episode's, for scorers that mark an episode by its task alone."""
    if store is None:
        yield None
        return
    log = JudgeLog(store, system, attempt)
    token = _log.set(log)
    try:
        yield log
    finally:
        _log.reset(token)
        log.save_all()  # episodes whose block did not end (scoring that raised)
        note_versions(store, log.returned)


@contextmanager
def returned_versions() -> Iterator[dict[str, set[str]]]:
    """Collect, inside, the versions every judge call's reply named (model id -> versions), in or
    out of a recording scope."""
    seen: dict[str, set[str]] = {}
    token = _collector.set(seen)
    try:
        yield seen
    finally:
        _collector.reset(token)


def note_versions(store: RunStore, returned: dict[str, set[str]]) -> list[str]:
    """Keep what each judge returned in the run's meta; one line on stderr (and returned) for
    each judge whose versions differ from the ones the run's previous scoring with it recorded."""
    if not returned:
        return []
    changed: list[str] = []

    def merge(before: object | None) -> object:
        known = dict(before) if isinstance(before, dict) else {}
        for model, now in returned.items():
            earlier = known.get(model)
            if isinstance(earlier, list) and earlier and set(earlier) != now:
                changed.append(f"judge {model} answered as {', '.join(sorted(now))} this time; the run's earlier "
                               f"verdicts from it came from {', '.join(sorted(earlier))}: a verdict may differ by "
                               "version alone (each call's version is in the judge transcripts)")
            known[model] = sorted(now)
        return known

    store.update_meta(VERSIONS_META, merge)
    if changed:
        from rich.markup import escape

        from deskbench.console import err

        for line in changed:
            err.print(f"[yellow]note:[/yellow] {escape(line)}")
    return changed


@contextmanager
def episode(task_id: str, system: str | None = None, attempt: int | None = None) -> Iterator[None]:
    """The judge calls made inside are this episode's; its transcripts are written at the end."""
    log = _log.get()
    name = system if system is not None else (log.system if log else None)
    if log is None or name is None:
        yield
        return
    key = (task_id, name, log.attempt if attempt is None else attempt)
    token = _episode.set(key)
    try:
        yield
    finally:
        _episode.reset(token)
        log.save(key)


def current(scorer: str) -> Transcript | None:
    """The transcript `scorer`'s calls go to now; None outside an episode of a recording scope."""
    log, key = _log.get(), _episode.get()
    return log.transcript(key, scorer) if log is not None and key is not None else None


def _note(model: str, version: str) -> None:
    """Note the version a judge's reply named, for the scope and for a collector."""
    for seen in (log.returned if (log := _log.get()) is not None else None, _collector.get()):
        if seen is not None:
            seen.setdefault(model, set()).add(version)


def attach(scorer: str, transcript: Transcript) -> None:
    """Hand over a transcript a judge collected itself (an agentic judge's Recorder)."""
    log, key = _log.get(), _episode.get()
    if log is None or key is None:
        return
    mine = log.transcript(key, scorer)
    mine.events.extend(transcript.events)
    mine.blobs.update(transcript.blobs)
    for event in transcript.events:  # the versions its replies named, as a recorded model's are
        if isinstance(event, ModelCallEvent) and event.reply and event.reply.get("model"):
            _note(event.model, str(event.reply["model"]))


class RecordingModel:
    """A judge's model whose calls go to the scored episode's transcript under `scorer`; outside
    a recording scope it only passes calls on. Anything else is the wrapped model's."""

    def __init__(self, inner: ChatModel, scorer: str) -> None:
        self.inner = inner
        self.scorer = scorer
        self.id = inner.id

    async def complete(self, request: ChatRequest) -> ChatResponse:
        transcript = current(self.scorer)
        if transcript is None:
            response = await self.inner.complete(request)
            self._returned(response)
            return response
        at, started = transcript.elapsed(), time.monotonic()
        try:
            response = await self.inner.complete(request)
        except Exception as exc:  # a failed call (ModelError after retries, anything else): recorded, raised as before
            transcript.model_call(self.id, request, None, at=at, seconds=time.monotonic() - started,
                                  error=f"{type(exc).__name__}: {exc}")
            raise
        transcript.model_call(self.id, request, response, at=at, seconds=time.monotonic() - started)
        self._returned(response)
        return response

    def _returned(self, response: ChatResponse) -> None:
        if response.model:
            _note(self.id, response.model)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@overload
def recorded(model: ChatModel, scorer: str) -> ChatModel: ...
@overload
def recorded(model: None, scorer: str) -> None: ...
def recorded(model: ChatModel | None, scorer: str) -> ChatModel | None:
    """`model` with its calls recorded under `scorer` (None stays None)."""
    if model is None or isinstance(model, RecordingModel):
        return model
    return RecordingModel(model, scorer)
