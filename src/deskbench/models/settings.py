"""Sampling and budget settings: what the user asked for, checked against the model's
capabilities before anything runs, and what is then sent with every call.

Agents send nothing by default, so the provider's own defaults apply, as the official MADQA
agents do (they set neither temperature nor an output limit; its Anthropic agent sends
max_tokens 4096 because the API requires it: the capability table's default_max_tokens). Judges
prefer temperature 0, as the official MADQA judge does (eval/metrics.py, GEMINI_TEMPERATURE=0),
where the model accepts a temperature; a reasoning model grades at its default. A preference is
dropped silently where the model refuses it; a value the user gave is never dropped: it is
refused before the run with one line naming the flag.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from deskbench.errors import UserError
from deskbench.models.capabilities import Capabilities, capabilities

Role = Literal["agent", "judge"]


class Sampling(BaseModel):
    """Per-call settings; None means "not sent" (the provider's default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None
    max_tokens: int | None = None  # sent as the model's output-limit field

    def given(self) -> dict[str, float | int | str]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


AGENT_DEFAULTS = Sampling()
JUDGE_DEFAULTS = Sampling(temperature=0.0)
FIELDS = ("temperature", "top_p", "reasoning_effort", "max_tokens")

_asked_by_user: dict[str, Sampling] = {}  # role -> what the command line gave (judge flags)


def use_sampling(role: Role, sampling: Sampling) -> None:
    """The command line's settings for every model of `role` this process opens. Judges are
    opened deep inside scoring (answer, chart, file and rubric judges), so their flags are set
    once here rather than threaded through every scorer."""
    _asked_by_user[role] = sampling


def asked_for(role: Role) -> Sampling:
    return _asked_by_user.get(role, Sampling())


def flag(role: Role, field: str) -> str:
    """The CLI flag that sets `field` for `role` (--temperature, --judge-top-p, ...)."""
    name = field.replace("_", "-")
    return f"--judge-{name}" if role == "judge" else f"--{name}"


class ResolvedSettings(BaseModel):
    """What a model is sent, and why: stored with the run and shown in the report."""

    model: str
    role: Role
    sent: Sampling  # exactly what goes with every call (after the capability table)
    asked: Sampling  # what the user gave
    dropped: list[str] = []  # default preferences the model does not take (e.g. a judge's temperature 0)
    output_limit_field: str = "max_tokens"
    reasoning: bool = False
    vision: bool = True
    capability_note: str = ""

    def describe(self) -> str:
        """One line for the CLI and the report: every field, sent or the provider's default."""
        parts = []
        for name in FIELDS:
            value = getattr(self.sent, name)
            label = self.output_limit_field if name == "max_tokens" else name
            parts.append(f"{label}={'default' if value is None else value}")
        return ", ".join(parts)


def _refusal(caps: Capabilities, field: str, value: object, temperature_set: bool) -> str | None:
    """Why the model refuses `field = value`, or None when it takes it."""
    kind = "a reasoning model" if caps.reasoning else "per deskbench's capability table"
    if field == "temperature":
        if not caps.temperature:
            return f"does not accept a temperature ({kind}: only its default)"
        assert isinstance(value, float | int)
        if not 0 <= value <= caps.temperature_max:
            return f"takes a temperature from 0 to {caps.temperature_max:g}"
    elif field == "top_p":
        if not caps.top_p:
            return f"does not accept top_p ({kind}: only its default)"
        assert isinstance(value, float | int)
        if not 0 <= value <= 1:
            return "takes top_p from 0 to 1"
        if temperature_set and not caps.temperature_with_top_p:
            return "does not take temperature and top_p together; give one of them"
    elif field == "reasoning_effort":
        if not caps.reasoning_effort:
            return "does not take a reasoning effort"
        if value not in caps.reasoning_effort:
            return "takes a reasoning effort of " + " | ".join(caps.reasoning_effort)
    elif field == "max_tokens":
        assert isinstance(value, int)
        if value < 1:
            return "needs an output limit of 1 or more"
        if caps.max_output_tokens is not None and value > caps.max_output_tokens:
            return f"writes at most {caps.max_output_tokens} output tokens"
    return None


def resolve(model: str, asked: Sampling, role: Role = "agent", defaults: Sampling | None = None) -> ResolvedSettings:
    """The settings `model` will be sent; UserError (one line, the flag to change) when the user
    asked for something the model refuses."""
    caps = capabilities(model)
    defaults = defaults if defaults is not None else (JUDGE_DEFAULTS if role == "judge" else AGENT_DEFAULTS)
    sent: dict[str, object] = {}
    dropped: list[str] = []
    for name in FIELDS:
        value = getattr(asked, name)
        if value is not None:
            why = _refusal(caps, name, value, temperature_set="temperature" in sent)
            if why:
                raise UserError(
                    f"{flag(role, name)} {value}: {model} {why}; change or drop {flag(role, name)} "
                    "(or give --capabilities FILE if deskbench's table is wrong for this model)"
                )
            sent[name] = value
    for name in FIELDS:
        value = getattr(defaults, name)
        if value is None or name in sent:
            continue
        if _refusal(caps, name, value, temperature_set="temperature" in sent):
            dropped.append(f"{name}={value}")
        else:
            sent[name] = value
    if sent.get("max_tokens") is None and caps.max_tokens_required and caps.default_max_tokens:
        sent["max_tokens"] = caps.default_max_tokens
    return ResolvedSettings(
        model=model, role=role, sent=Sampling.model_validate(sent), asked=asked, dropped=dropped,
        output_limit_field=caps.output_limit, reasoning=caps.reasoning, vision=caps.vision,
        capability_note=caps.note,
    )
