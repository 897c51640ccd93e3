"""The JSON Schema generator `deskbench schema` uses: pydantic's, with every name a field's reader
takes (its AliasChoices) listed."""

from __future__ import annotations

from typing import Any

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
