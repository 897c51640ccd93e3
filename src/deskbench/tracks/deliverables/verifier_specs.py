"""Verifier specifications: what a deliverables task declares it will check, as data.

A spec says what to look at (the response text, or a named output file and a label, cell or
JSON path in it) and what must hold there. The executable side lives in
`deskbench.tracks.deliverables.scoring.verifiers`, keyed by `kind`. Specs are a discriminated union on `kind`, so a
task.yaml with an unknown kind or a missing field fails on load with the field named.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Unit = Literal["one", "thousand", "lakh", "million", "crore", "billion", "percent"]
JsonType = Literal["number", "integer", "string", "boolean", "array", "object", "null"]


class _Spec(BaseModel):
    """Fields every verifier has: a unique id, what it checks (for reports), the file it reads."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    description: str = ""
    file: str | None = None  # an output file name; None = the response text (markdown)


def _check_pattern(v: str) -> str:
    try:
        re.compile(v)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from exc
    return v


class NumericSpec(_Spec):
    """A figure located by a label (text, docx, pptx, xlsx), a cell ("Sheet!B3") or a JSON path,
    compared with `expected` within `abs_tol`/`rel_tol`, or with an inclusive `range`.

    `unit` is the unit `expected` is stated in: a figure written with a scale word ("12.5 Cr",
    "1,250 lakh") is converted to it; a bare figure is taken to be in it already.
    """

    kind: Literal["numeric"] = "numeric"
    label: str | None = None
    cell: str | None = None
    json_path: str | None = None
    occurrence: Literal["first", "last"] = "last"
    index: int = Field(default=0, ge=0)  # which figure after the label on its line
    expected: float | None = None
    abs_tol: float | None = Field(default=None, ge=0)
    rel_tol: float | None = Field(default=None, ge=0)
    range: tuple[float, float] | None = None
    unit: Unit | None = None

    @model_validator(mode="after")
    def _target(self) -> NumericSpec:
        if sum(x is not None for x in (self.label, self.cell, self.json_path)) != 1:
            raise ValueError("give exactly one of label, cell, json_path to locate the value")
        if (self.expected is None) == (self.range is None):
            raise ValueError("give exactly one of expected (with a tolerance) or range")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError("range must be [low, high] with low <= high")
        if self.cell is not None and "!" not in self.cell:
            raise ValueError("cell must be written as Sheet!A1")
        return self


class DecisionLineSpec(_Spec):
    """The response commits to a decision on a line that reads exactly `expected`
    (e.g. `DECISION: SIGN FIXED CONTRACT`); the last line starting with `prefix` counts."""

    kind: Literal["decision_line"] = "decision_line"
    expected: str = Field(min_length=1)
    prefix: str = "DECISION:"

    @model_validator(mode="after")
    def _prefix(self) -> DecisionLineSpec:
        if not self.expected.startswith(self.prefix):
            raise ValueError(f"expected must start with the prefix {self.prefix!r}")
        return self


class _RegexSpec(_Spec):
    kind: str  # narrowed by each subclass; declared here so that it is written before the pattern
    pattern: str
    ignore_case: bool = True

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        return _check_pattern(v)


class RegexPresentSpec(_RegexSpec):
    """A pattern that must occur (a required phrase, a citation of an authorized source)."""

    kind: Literal["regex_present"] = "regex_present"


class RegexAbsentSpec(_RegexSpec):
    """A pattern that must not occur: a trap value used as the answer, a forbidden source."""

    kind: Literal["regex_absent"] = "regex_absent"


class JsonStrictSpec(_Spec):
    """The JSON parses and matches `schema` exactly: same keys, same order, same types, nothing
    extra. `schema` maps each key to a type name or a nested mapping (an object)."""

    kind: Literal["json_strict"] = "json_strict"
    json_schema: dict[str, Any] = Field(alias="schema")
    allow_code_fence: bool = False  # response text only: accept one ```json fenced block
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("json_schema")
    @classmethod
    def _types(cls, v: dict[str, Any]) -> dict[str, Any]:
        allowed = set(get_args(JsonType))

        def walk(node: dict[str, Any], path: str) -> None:
            for key, sub in node.items():
                if isinstance(sub, dict):
                    walk(sub, f"{path}{key}.")
                elif sub not in allowed:
                    raise ValueError(f"{path}{key}: type must be one of {sorted(allowed)}")

        walk(v, "")
        return v


class ExactValueSpec(_Spec):
    """A cell or JSON value equal to `expected` as text (trimmed; case-sensitive unless told)."""

    kind: Literal["exact_value"] = "exact_value"
    cell: str | None = None
    json_path: str | None = None
    expected: str
    ignore_case: bool = False

    @model_validator(mode="after")
    def _target(self) -> ExactValueSpec:
        if (self.cell is None) == (self.json_path is None):
            raise ValueError("give exactly one of cell or json_path")
        if self.file is None:
            raise ValueError("exact_value reads an output file: give file")
        return self


class FileSectionsSpec(_Spec):
    """The output file exists, opens, and has the named sections: docx headings (or paragraphs),
    xlsx sheet names, pptx slide titles, JSON top-level keys, markdown headings."""

    kind: Literal["file_sections"] = "file_sections"
    file: str
    sections: list[str] = Field(default_factory=list)


class WordLimitSpec(_Spec):
    """Words in the whole text or under one heading stay within [min_words, max_words]."""

    kind: Literal["word_limit"] = "word_limit"
    section: str | None = None
    max_words: int | None = Field(default=None, ge=1)
    min_words: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bound(self) -> WordLimitSpec:
        if self.max_words is None and self.min_words is None:
            raise ValueError("give max_words or min_words")
        return self


class SectionCountSpec(_Spec):
    """The number of headings (markdown or docx) lies in [min_sections, max_sections]."""

    kind: Literal["section_count"] = "section_count"
    min_sections: int = Field(default=0, ge=0)
    max_sections: int | None = Field(default=None, ge=0)


def _domain(entry: str) -> str:
    """An allowed domain as written in task.yaml ("www.Example.com", "https://x.org/path")
    reduced to the bare lower-case host."""
    host = entry.strip().casefold()
    host = re.sub(r"^[a-z][a-z0-9+.-]*://", "", host).split("/", 1)[0].split(":", 1)[0]
    host = host.strip(".").removeprefix("www.")
    if not re.fullmatch(r"(?:[^\W_]|-)+(?:\.(?:[^\W_]|-)+)*", host):  # IDN letters too
        raise ValueError(f"{entry!r} is not a domain (write it as example.com)")
    return host


class CitationDomainsSpec(_Spec):
    """Every URL cited (http/https, or a bare www. host) points to an `allowed` domain or a
    subdomain of one ("www." ignored). `allowed: []` is a closed corpus: any external URL fails.
    With no URL at all: pass, unless `require_citation`."""

    kind: Literal["citation_domains"] = "citation_domains"
    allowed: list[str] = Field(default_factory=list)
    require_citation: bool = False

    @field_validator("allowed")
    @classmethod
    def _domains(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(_domain(d) for d in v))


class LlmCheckSpec(_Spec):
    """A criterion only a reader can decide; flagged as judged and left unobservable until an
    LLM judge is supplied."""

    kind: Literal["llm_check"] = "llm_check"
    criterion: str = Field(min_length=1)


VerifierSpec = Annotated[
    NumericSpec
    | DecisionLineSpec
    | RegexPresentSpec
    | RegexAbsentSpec
    | JsonStrictSpec
    | ExactValueSpec
    | FileSectionsSpec
    | WordLimitSpec
    | SectionCountSpec
    | CitationDomainsSpec
    | LlmCheckSpec,
    Field(discriminator="kind"),
]

VERIFIER_KINDS: frozenset[str] = frozenset(
    m.model_fields["kind"].default for m in get_args(get_args(VerifierSpec)[0])  # Annotated[Union[...], Field]
)
