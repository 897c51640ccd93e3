"""The meter an episode's model calls report to, so a cost or token limit can stop the episode.

The models layer knows no run: the runner (runs/budget.py) sets `METER` in each episode's task to
an object with these two methods, and `ResilientModel.complete`, which every call of an episode
goes through whoever makes it (the agent, a sub-model, a tool), asks it before each call and tells
it each reply's priced usage. A limit reached raises `LimitReached`; the reply that crossed it
travels with the exception, so the Recorder still keeps that call (it was paid for).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

from deskbench.models.types import ChatResponse


class CallMeter(Protocol):
    def attach(self, recorder: object) -> None:
        """An episode's Recorder (agents/base.py), whose trajectory a limit-ended episode keeps."""

    def before_call(self, model_id: str) -> None:
        """Raise LimitReached when the episode may make no more calls."""

    def after_call(self, model_id: str, response: ChatResponse) -> None:
        """Count a reply's usage (priced); raise LimitReached, with `response`, at a limit."""


METER: ContextVar[CallMeter | None] = ContextVar("deskbench_meter", default=None)
"""The meter of the episode making a call (set by the runner in each episode's task), or None:
a call outside an episode (a judge at score time) is not metered."""


class LimitReached(Exception):
    """An episode reached its cost or token limit (not a ModelError: an agent that catches
    model errors to carry on must not carry on past its limit)."""

    def __init__(self, reason: str, response: ChatResponse | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.response = response  # the reply that crossed the limit, when a reply did
