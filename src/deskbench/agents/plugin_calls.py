"""The harness records a plugin agent's model calls, so its author does nothing.

A built-in agent calls its model through a `Recorder` (agents/base.py) and hands back the
transcript, the model-call steps and the usage it gathered. A plugin agent (plugins.py) gets the
same context, but may call `ctx.model.complete` directly and return none of that. So every
plugin agent's `run` is wrapped (`record_calls`): each episode gets a copy of its context whose
`model` is a `RecordedModel` feeding a fresh Recorder, and what the plugin returns is completed
from that record:

- transcript: a plugin that returns none gets the harness's (an empty one when it made no call,
  so a plugin's episode that ended without an exception always has a transcript, and none means
  an older deskbench or an error before any call). A plugin that returns its own keeps it when it holds
  at least as many model calls as went through `ctx.model` (its own Recorder wrapped ctx.model
  and saw them all: nothing is recorded twice); otherwise the harness's calls replace the
  plugin's, and the plugin's tool events are kept between them, in time order.
- trajectory: the same rule for its model-call steps (merged in time order with the plugin's
  other steps);
- usage: the plugin's when it counts at least as many calls as the harness saw, else the
  harness's (a plugin that reported nothing, or only part: never counted twice).

A failed call is recorded as the built-ins record it (the request and the error). An exception
out of the plugin after a call ends the episode as an error that keeps the calls made so far,
worded as the runner words any episode's exception; one before any call goes to the runner
as it is (as any agent's: the runner records it, with no transcript). A provider's refusal
(ProviderRefused) still stops the run.

`agent_factory` is how a track's agent registry finds a plugin agent by name, wrapped so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from deskbench.agents.base import AgentResult, Recorder
from deskbench.errors import UserError
from deskbench.models.types import ChatModel, ChatRequest, ChatResponse, ProviderRefused
from deskbench.plugins import instance, lookup
from deskbench.runs.transcript import ModelCallEvent, Transcript
from deskbench.tasks.trajectory import ModelCallStep, TrajectoryStep

_MARK = "_deskbench_records_calls"  # set on a wrapped run, so an agent is never wrapped twice


class RecordedModel:
    """`ctx.model` as a plugin agent sees it: the run's model, each call through the episode's
    Recorder. Anything else the model offers (its settings, ...) reads through. The run owns the
    model, so `aclose` here closes nothing."""

    def __init__(self, model: ChatModel, recorder: Recorder) -> None:
        self.id = model.id
        self.inner = model
        self.recorder = recorder

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return await self.recorder.complete(request)

    async def aclose(self) -> None:
        """The run closes its model when it ends; a plugin closing it would fail the other episodes."""

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, unpickling): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)


def _model_calls(transcript: Transcript) -> int:
    return sum(isinstance(e, ModelCallEvent) for e in transcript.events)


def _merge_steps(own: Sequence[TrajectoryStep], calls: Sequence[TrajectoryStep]) -> list[TrajectoryStep]:
    """The plugin's steps with the harness's model-call steps put where they happened: by the
    order they ended in this process when both were stamped here (`stamped`), else by `at` (ISO
    times to the millisecond, each a step's end; at a tie the call goes first); a step with
    neither keeps its place."""
    out: list[TrajectoryStep] = []
    pending = list(calls)
    for step in own:
        while pending and _before(pending[0], step):
            out.append(pending.pop(0))
        out.append(step)
    return out + pending


def _before(call: TrajectoryStep, step: TrajectoryStep) -> bool:
    if call.ended is not None and step.ended is not None:
        return call.ended < step.ended
    return step.at is not None and call.at is not None and call.at <= step.at


def completed(result: AgentResult, rec: Recorder) -> AgentResult:
    """`result` with the harness's record of the calls where the plugin's own lacks them (the
    rules in the module docstring)."""
    seen = _model_calls(rec.transcript)
    own = result.transcript
    if own is None:
        result.transcript = rec.transcript
    elif _model_calls(own) < seen:
        rec.transcript.take_tools(own)
        result.transcript = rec.transcript
    steps = [s for s in result.trajectory if isinstance(s, ModelCallStep)]
    if len(steps) < len(rec.trajectory):
        others = [s for s in result.trajectory if not isinstance(s, ModelCallStep)]
        result.trajectory = _merge_steps(others, rec.trajectory)
    if result.usage.calls < rec.usage.calls:
        result.usage = rec.usage
    return result


RunFn = Callable[..., Awaitable[AgentResult]]


def _recording(run: RunFn) -> RunFn:
    async def recorded_run(task: Any, ctx: Any, *args: Any, **kwargs: Any) -> AgentResult:
        if not dataclasses.is_dataclass(ctx) or isinstance(ctx, type):  # no context the harness knows
            return await run(task, ctx, *args, **kwargs)
        model = getattr(ctx, "model", None)
        rec = Recorder(model)  # a model-less context (needs_model False) still gets a transcript
        if model is not None:
            ctx = dataclasses.replace(ctx, model=RecordedModel(model, rec))
        try:
            result = await run(task, ctx, *args, **kwargs)
        except ProviderRefused:  # the user's to fix: the runner stops the run
            raise
        except Exception as exc:
            if not rec.transcript.events:  # nothing recorded: the runner records the error, as any agent's
                raise
            result = AgentResult(status="error", error=f"{type(exc).__name__}: {exc}")  # as runner.run_one words it
        return completed(result, rec)

    setattr(recorded_run, _MARK, True)
    return recorded_run


class _RecordedAgent:
    """For an agent whose attributes cannot be set (slots): the same agent, its run recorded."""

    def __init__(self, agent: object, run: RunFn) -> None:
        self._agent = agent
        self.run = run

    def __getattr__(self, name: str) -> Any:
        if name == "_agent":
            raise AttributeError(name)
        return getattr(self._agent, name)


def record_calls(agent: object) -> object:
    """`agent` with its `run` recording every call through its context's model (once: an agent
    already wrapped, or without a `run`, is returned as it is; the track says what is missing)."""
    run = getattr(agent, "run", None)
    if not callable(run) or getattr(run, _MARK, False):
        return agent
    wrapped = _recording(run)
    try:
        object.__setattr__(agent, "run", wrapped)  # an instance attribute: type, configure, name unchanged
    except (AttributeError, TypeError):
        return _RecordedAgent(agent, wrapped)
    return agent


def agent_factory(track: str, name: str) -> Callable[[], object] | None:
    """A plugin agent of `track` by name: a factory the track's registry calls, or None. An agent
    of another track is one line naming its track."""
    plugin = lookup("agents", name)
    if plugin is None:
        return None
    its_track = getattr(plugin.value, "track", "docqa")
    if its_track != track:
        raise UserError(f"agent {name!r} ({plugin.origin}) is for the {its_track} track, not {track}; "
                        f"run it on {its_track} tasks")
    if not callable(plugin.value):
        raise UserError(f"agent plugin {name!r} ({plugin.origin}) is not a class or factory; point it at the agent class")

    def build() -> object:
        return record_calls(instance(plugin))  # the harness records its model calls

    return build
