"""A track's options for `deskbench run`, `score` and `compare`: typed models the CLI builds flags from.

A track declares each command's own options as a pydantic model (`Track.run_options`,
`score_options`, `compare_options`): a field is a flag (`max_steps` -> `--max-steps`), its type
says what the flag takes (bool, int, float, str, Path, a list of str for a repeated flag), its
default is the flag's, its description the flag's help. `Flag` in the field's Annotated metadata
spells a flag otherwise (contract/flags.py). The CLI adds every registered track's flags to the
command (cli/track_flags.py); a flag the track of the run does not declare is refused in one line
(runs/track_options.py), and `prepare` gets a validated instance (runs/track.py RunRequest.options).

Imports pydantic and contract/flags.py only: the tracks and the core import it without a cycle.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticUndefined

from deskbench.contract.flags import Flag, FlagSpec, Kind


class TrackOptions(BaseModel):
    """The base of a track's option model: an unknown field is an error, an instance is a value."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ExternalAgentOptions(TrackOptions):
    """The flags of `--agent external` (mcp/external.py), which a track with an external agent
    takes: mix it into its run options."""

    command: Annotated[str | None, Field(description=(
        "--agent external (every track): your agent's command, run once per task ({question} is replaced; the "
        "MCP server's URL is in $DESKBENCH_MCP_URL)."))] = None
    url: Annotated[str | None, Field(description=(
        "--agent external (every track): your agent as a service, POSTed {task_id, question, mcp_url} once per "
        "task; it answers over MCP (instead of --command)."))] = None
    timeout: Annotated[float | None, Field(description=(
        "--agent external (every track): an episode's wall-time limit in seconds (default 600); part of the "
        "run's configuration."))] = None

    def external_given(self) -> dict[str, object]:
        """--command, --url, --timeout as given (the external agent's `agent_options` are built from these)."""
        return {k: v for k, v in (("command", self.command), ("url", self.url), ("timeout", self.timeout))
                if v is not None}


_SCALARS: dict[type, Kind] = {bool: "switch", int: "int", float: "float", str: "str", Path: "path"}


def _kind(annotation: Any, flag: Flag, where: str) -> Kind:
    """What a field's flag takes, from its type (None allowed: not given)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            annotation = args[0]
    origin = get_origin(annotation)
    if origin is Literal and all(isinstance(a, str) for a in get_args(annotation)):
        return "str"
    if origin in (list, tuple, Sequence) and [a for a in get_args(annotation) if a is not Ellipsis] == [str]:
        return "strs"
    kind = _SCALARS.get(annotation) if isinstance(annotation, type) else None
    if kind is None:
        raise TypeError(f"{where}: a flag takes bool, int, float, str, Path or a list of str, not {annotation!r}")
    return "pair" if kind == "switch" and flag.negative else kind


def flag_specs(model: type[BaseModel], where: str) -> tuple[FlagSpec, ...]:
    """Every flag of an option model, in its fields' order (`where`, e.g. "docqa run options",
    names the model in a developer's error: a field no flag can take, one without a default)."""
    specs = []
    for name, field in model.model_fields.items():
        flag = next((m for m in field.metadata if isinstance(m, Flag)), Flag())
        at = f"{where} {name}"
        if field.default is PydanticUndefined:
            raise TypeError(f"{at}: an option needs a default (a flag may be left out)")
        kind = _kind(field.annotation, flag, at)
        default = None if kind == "strs" else field.default
        if kind != "strs" and not (default is None or isinstance(default, (str, int, float, bool))):
            raise TypeError(f"{at}: the default {default!r} is not a flag's value")
        specs.append(FlagSpec(param=name, flag=flag.name or "--" + name.replace("_", "-"), kind=kind,
                              default=default, help=field.description or "", short=flag.short,
                              negative=flag.negative, preflight=flag.preflight))
    return tuple(specs)
