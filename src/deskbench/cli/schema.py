"""`deskbench schema TRACK [--submission]`: the JSON Schema of a track's task (or submission)
format, from its pydantic model, so a user can check a tasks file before a run reads it.
Any registered track works, a plugin's too: the Track protocol names both models."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from pydantic.json_schema import GenerateJsonSchema


class AllAliases(GenerateJsonSchema):
    """pydantic names only the first of a field's AliasChoices; the readers take each (a citation's
    `file`, `document` or `doc`), so the schema lists each and requires one of them."""

    def _named_required_fields_schema(self, named_required_fields: Any) -> Any:
        found = super()._named_required_fields_schema(named_required_fields)
        if self.mode != "validation":
            return found
        properties, required = found["properties"], found.get("required", [])
        one_of_each: list[dict[str, Any]] = []
        for name, is_required, field in named_required_fields:
            alias = field.get("validation_alias") if isinstance(field, dict) else None
            choices = [p[0] for p in alias if len(p) == 1 and isinstance(p[0], str)] if isinstance(alias, list) else []
            shown = self._get_alias_name(field, name)
            if len(choices) < 2 or shown not in properties:
                continue
            for other in choices:
                properties.setdefault(other, properties[shown])
            if is_required and shown in required:
                required.remove(shown)
                one_of_each.append({"anyOf": [{"required": [c]} for c in choices]})
        if "required" in found and not required:
            del found["required"]
        if one_of_each:
            found["allOf"] = one_of_each
        return found


def register(app: typer.Typer) -> None:
    """Add `schema`."""
    app.command()(schema)


def track_schema(track_name: str, *, submission: bool = False) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, as pydantic writes it) of what a user writes for the track:
    validation mode, so aliases and defaults read as the loader reads them."""
    from deskbench.tracks.registry import get_track

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
