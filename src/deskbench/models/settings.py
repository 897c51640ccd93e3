"""Sampling and budget settings: what the user asked for, checked against the model's
capabilities before anything runs, and what is then sent with every call.

Agents send nothing by default, so the provider's own defaults apply, as the official MADQA
agents do (they set neither temperature nor an output limit; its Anthropic agent sends
max_tokens 4096 because the API requires it: the capability table's default_max_tokens). Judges
prefer temperature 0, as the official MADQA judge does (eval/metrics.py, GEMINI_TEMPERATURE=0),
where the model accepts a temperature; a reasoning model grades at its default. A preference is
dropped silently where the model refuses it; a value the user gave is never dropped: it is
refused before the run with one line naming the flag.

A named decoding preset (`--decoding aida`: models/decoding.py) gives each model the row of a
paper's table that covers it. Its numbers are sent where the model takes them; one the model does
not take is left unset and recorded in `dropped`, as the paper itself did ("When a parameter is not
supported ... we keep it unspecified and use provider defaults", AIDABench Appendix E). The
preset's name and row go with the sent settings, so the run records them and `info` and the
report show them. A sampling flag given with a preset is refused: the preset would no longer be
the paper's configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from deskbench.errors import UserError
from deskbench.models.capabilities import Capabilities, capabilities

if TYPE_CHECKING:
    from deskbench.models.decoding import ResolvedPreset

Role = Literal["agent", "judge"]


def _none(value: object) -> bool:
    return value is None


class Sampling(BaseModel):
    """Per-call settings; None means "not sent" (the provider's default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None
    max_tokens: int | None = None  # sent as the model's output-limit field
    # top-k sampling; left out of a dump when None, so settings stored before it existed compare equal
    top_k: int | None = Field(default=None, exclude_if=_none)
    # asked: the preset (--decoding aida or aida:ROW); sent: the row used (aida:qwen3-max-2026-01-23).
    # Not a request field: it names where the values came from. Left out of a dump when None.
    decoding: str | None = Field(default=None, exclude_if=_none)

    def given(self) -> dict[str, float | int | str]:
        """The request fields that are set (what goes with every call)."""
        return {k: v for k in FIELDS if (v := getattr(self, k)) is not None}


AGENT_DEFAULTS = Sampling()
JUDGE_DEFAULTS = Sampling(temperature=0.0)
FIELDS = ("temperature", "top_p", "top_k", "reasoning_effort", "max_tokens")
PRESET_FIELDS = ("temperature", "top_p", "top_k")  # what a decoding preset sets (models/decoding.py)

_asked_by_user: dict[str, Sampling] = {}  # role -> what the command line gave (judge flags)


def use_sampling(role: Role, sampling: Sampling) -> None:
    """The command line's settings for every model of `role` this process opens. Judges are
    opened deep inside scoring (answer, chart, file and rubric judges), so their flags are set
    once here rather than threaded through every scorer."""
    _asked_by_user[role] = sampling


def asked_for(role: Role) -> Sampling:
    return _asked_by_user.get(role, Sampling())


# fields whose flag is not --<field>: --top-k is the grammar's "pages per search" (cli/grammar.py)
_FLAG_NAMES = {"top_k": "sampling-top-k"}


def flag(role: Role, field: str) -> str:
    """The CLI flag that sets `field` for `role` (--temperature, --judge-top-p, --sampling-top-k, ...)."""
    name = _FLAG_NAMES.get(field, field.replace("_", "-"))
    return f"--judge-{name}" if role == "judge" else f"--{name}"


def unsent_refusal(model: object, request: str) -> str | None:
    """The one-line refusal of the settings `model` (a ChatModel, or None) carries for an agent
    whose request is fixed and carries none of them (a managed service's or a paper's request), or
    None: a setting the run's configuration records must be one that was sent. `request` says what
    the agent sends, with `{flags}` standing for the flags given; the line ends with the fix."""
    settings = getattr(model, "settings", None)
    given = settings.sent.given() if settings is not None else {}
    if not given:
        return None
    flags = ", ".join(flag("agent", k) for k in given)
    return f"{request.format(flags=flags)}: drop {flags}"


class ResolvedSettings(BaseModel):
    """What a model is sent, and why: stored with the run and shown in the report."""

    model: str
    role: Role
    sent: Sampling  # exactly what goes with every call (after the capability table)
    asked: Sampling  # what the user gave
    # default preferences the model does not take (e.g. a judge's temperature 0), and a decoding
    # preset's values it does not take, with why ("temperature=0.0 (aida:claude-sonnet-4-5: ...)")
    dropped: list[str] = []
    output_limit_field: str = "max_tokens"
    reasoning: bool = False
    vision: bool = True
    capability_note: str = ""
    decoding_source: str = ""  # the preset's source (paper, table), when sent.decoding is set
    decoding_row: str = ""  # the row as the paper prints it: "temperature=0.7, top_p=0.8, top_k=20"

    def describe(self) -> str:
        """One line for the CLI and the report: every field, sent or the provider's default (top_k
        only when sent: most providers take none), and the decoding preset with what it left unsent."""
        parts = [f"decoding={self.sent.decoding} ({self.decoding_source}: {self.decoding_row})"] \
            if self.sent.decoding else []
        for name in FIELDS:
            value = getattr(self.sent, name)
            if name == "top_k" and value is None:
                continue
            label = self.output_limit_field if name == "max_tokens" else name
            parts.append(f"{label}={'default' if value is None else value}")
        unsent = [d for d in self.dropped if self.sent.decoding and f"({self.sent.decoding}: " in d]
        if unsent:
            parts.append("preset values not sent: " + "; ".join(unsent))
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
    elif field == "top_k":
        if not caps.top_k:
            return f"does not accept top_k ({caps.note or kind}: only its default)"
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return "takes top_k of 1 or more (leave it unset for the provider's default)"
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
    preset = _apply_preset(model, asked, role, caps, sent, dropped) if asked.decoding else None
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
        capability_note=caps.note, decoding_source=preset.source if preset else "",
        decoding_row=preset.row.table() if preset else "",
    )


def _apply_preset(model: str, asked: Sampling, role: Role, caps: Capabilities, sent: dict[str, object],
                  dropped: list[str]) -> ResolvedPreset:
    """The preset's row for `model` into `sent`: each number the model takes is sent, each it does
    not take is recorded in `dropped` with why (the paper's rule: unsupported -> provider default)."""
    from deskbench.models.decoding import resolve_preset

    assert asked.decoding is not None
    given = [flag(role, name) for name in PRESET_FIELDS if getattr(asked, name) is not None]
    if given:
        raise UserError(f"{given[0]} with --decoding {asked.decoding}: the preset sets {model}'s sampling "
                        f"(its row would no longer be the paper's); drop {given[0]} or drop --decoding")
    preset = resolve_preset(asked.decoding, model)
    for name, value in preset.row.values().items():
        why = _refusal(caps, name, value, temperature_set="temperature" in sent)
        if why:
            dropped.append(f"{name}={value} ({preset.label()}: {why})")
        else:
            sent[name] = value
    sent["decoding"] = preset.label()
    return preset
