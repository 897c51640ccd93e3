"""`deskbench schema TRACK [--submission]`: the JSON Schema of a track's task (or submission)
format, from its pydantic model, so a user can check a tasks file before a run reads it.
Any registered track works, a plugin's too: the Track protocol names both models."""

from __future__ import annotations

import json
import types
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin

import typer

if TYPE_CHECKING:  # pydantic is imported when the command runs, not when the command line starts
    from pydantic import BaseModel


def register(app: typer.Typer) -> None:
    """Add `schema`."""
    app.command()(schema)


def track_schema(track_name: str, *, submission: bool = False) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, as pydantic writes it) of what a user writes for the track:
    validation mode, so aliases and defaults read as the loader reads them."""
    from deskbench.contract.registry import get_track
    from deskbench.tasks.json_schema import AllAliases

    track = get_track(track_name)  # an unknown name: one line naming the known ones
    model = track.submission_type if submission else track.task_type
    found = model.model_json_schema(mode="validation", schema_generator=AllAliases)
    found.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    return found


def schema(
    track: Annotated[str, typer.Argument(help="docqa | analytics | deliverables, or a plugin's track.")],
    submission: Annotated[bool, typer.Option("--submission", help="The submission format instead of the task format.")] = False,
) -> None:
    """Print the JSON Schema of a track's task format (one JSON Lines row; deliverables: task.yaml)
    or, with --submission, its submission format. Fields are documented in docs/formats.md."""
    typer.echo(json.dumps(track_schema(track, submission=submission), indent=2))  # plain: no markup, valid JSON


def models_of(model: type[BaseModel]) -> list[type[BaseModel]]:
    """`model` and every model its fields hold (lists, unions, discriminated unions), each once,
    in the order met: what docs/formats.md documents and its test checks."""
    from pydantic import BaseModel

    found: list[type[BaseModel]] = []

    def walk(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp not in found:
                found.append(tp)
                for info in tp.model_fields.values():
                    walk(info.annotation)
            return
        for arg in get_args(tp):
            walk(arg)

    walk(model)
    return found


def field_table(model: type[BaseModel]) -> str:
    """A markdown table of `model`'s fields: name (and the other names the reader takes), type,
    required or default, and the Field description where there is one."""
    from pydantic import AliasChoices

    rows = ["| field | type | required / default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        names = f"`{name}`"
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            others = [c for c in alias.choices if isinstance(c, str) and c != name]
            names += "".join(f" / `{c}`" for c in others)
        if model.model_config.get("populate_by_name") and isinstance(info.alias, str):
            names = f"`{info.alias}`"
        kind = _type_name(info.annotation)
        need = "required" if info.is_required() else (
            f"`{json.dumps(info.get_default(call_default_factory=True), default=str)}`")
        rows.append(f"| {names} | {kind} | {need} | {(info.description or '').replace('|', '/')} |")
    return "\n".join(rows)


def _type_name(tp: Any) -> str:
    """A short readable type: `list[Evidence]`, `"qa" \\| "visualization"`, `int \\| null`."""
    import typing

    origin, args = get_origin(tp), get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin in (list, tuple, dict):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args if a is not Ellipsis)}]"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))
