"""Verifiers of structure: strict JSON, an exact cell or key value, an output file with its
sections, word and section limits, and the declared-but-judged `llm_check`."""

from __future__ import annotations

import json
import re
from typing import Any

from deskbench.tracks.deliverables.scoring.office import Document, json_at, xlsx_cell
from deskbench.tracks.deliverables.scoring.verifier_base import (
    JudgeError,
    VerifierContext,
    VerifierResult,
)
from deskbench.tracks.deliverables.scoring.verifier_base import result as _res
from deskbench.tracks.deliverables.scoring.verifier_base import where as _where
from deskbench.tracks.deliverables.verifier_specs import (
    ExactValueSpec,
    FileSectionsSpec,
    JsonStrictSpec,
    LlmCheckSpec,
    SectionCountSpec,
    WordLimitSpec,
)

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)
_WORD = re.compile(r"[^\s|#*_`>-][^\s|]*")


def _type_ok(value: Any, expected: str) -> bool:
    checks = {
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
        "null": lambda v: v is None,
    }
    return checks[expected](value)


def _schema_mismatch(data: Any, schema: dict[str, Any], path: str = "") -> str | None:
    """The first way `data` differs from `schema` (keys, order, types), or None."""
    if not isinstance(data, dict):
        return f"{path or 'top level'} is {type(data).__name__}, not an object"
    got, want = list(data), list(schema)
    if got != want:
        extra = [k for k in got if k not in schema]
        missing = [k for k in want if k not in data]
        if extra or missing:
            return f"{path or 'top level'}: extra keys {extra}, missing keys {missing}"
        return f"{path or 'top level'}: keys in order {got}, want {want}"
    for key, sub in schema.items():
        here = f"{path}{key}"
        if isinstance(sub, dict):
            problem = _schema_mismatch(data[key], sub, here + ".")
            if problem:
                return problem
        elif not _type_ok(data[key], sub):
            return f"{here} is {json.dumps(data[key])}, not a {sub}"
    return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate keys {dupes}")
    return dict(pairs)


def verify_json_strict(spec: JsonStrictSpec, ctx: VerifierContext) -> VerifierResult:
    if spec.file is not None:
        path = ctx.path(spec.file)
        if path is None:
            return _res("unobservable", f"output file {spec.file} not found")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return _res("fail", f"{spec.file} is not UTF-8 text")
    else:
        text = ctx.response.strip()
        m = _FENCE.match(text)
        if m and spec.allow_code_fence:
            text = m.group(1)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        return _res("fail", f"{_where(spec)} is not valid JSON: {exc.msg} at line {exc.lineno} "
                    f"column {exc.colno}: {text[max(0, exc.pos - 40) : exc.pos + 40]!r}")
    except ValueError as exc:
        return _res("fail", f"{_where(spec)}: {exc}")
    problem = _schema_mismatch(data, spec.json_schema)
    if problem:
        return _res("fail", problem)
    return _res("pass", f"{_where(spec)} parses; keys, order and types match ({len(text)} chars)")


def verify_exact_value(spec: ExactValueSpec, ctx: VerifierContext) -> VerifierResult:
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return _res("unobservable", doc)
    if spec.cell is not None:
        if doc.workbook is None:
            return _res("unobservable", f"{_where(spec)} is not a workbook")
        got = xlsx_cell(doc.workbook, spec.cell)
        if got is None:
            return _res("unobservable", f"sheet of {spec.cell} not in {_where(spec)}")
        value, at = got
    else:
        assert spec.json_path is not None
        found, value = json_at(doc.data, spec.json_path)
        if not found:
            return _res("unobservable", f"{spec.json_path} not found in {_where(spec)}")
        at = spec.json_path
    text = "" if value is None else str(value).strip()
    ok = text.casefold() == spec.expected.casefold() if spec.ignore_case else text == spec.expected
    return _res("pass" if ok else "fail", f"{at} = {text!r} (want {spec.expected!r})")


def _has_section(doc: Document, name: str) -> str | None:
    wanted = name.casefold()
    for section in doc.sections:
        if wanted in section.casefold():
            return section
    for block in doc.blocks:  # a bold or plain paragraph that opens with the section name
        if block.text.casefold().startswith(wanted):
            return block.text
    return None


def verify_file_sections(spec: FileSectionsSpec, ctx: VerifierContext) -> VerifierResult:
    if ctx.path(spec.file) is None:
        return _res("fail", f"required output file {spec.file} was not produced")
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return _res("fail", doc)
    found = {name: _has_section(doc, name) for name in spec.sections}
    missing = [name for name, hit in found.items() if hit is None]
    if missing:
        return _res("fail", f"{spec.file} opens; missing sections {missing}; has {doc.sections}")
    return _res("pass", f"{spec.file} opens; sections found: {list(found.values())}")


def verify_word_limit(spec: WordLimitSpec, ctx: VerifierContext) -> VerifierResult:
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return _res("unobservable", doc)
    text = doc.text if spec.section is None else doc.section_text(spec.section)
    if text is None:
        return _res("unobservable", f"section {spec.section!r} not found in {_where(spec)}")
    words = len(_WORD.findall(text))
    ok = (spec.max_words is None or words <= spec.max_words) and (
        spec.min_words is None or words >= spec.min_words
    )
    scope = f"section {spec.section!r}" if spec.section else _where(spec)
    return _res("pass" if ok else "fail", f"{scope}: {words} words "
                f"(limits {spec.min_words or 0}..{spec.max_words or 'any'})")


def verify_section_count(spec: SectionCountSpec, ctx: VerifierContext) -> VerifierResult:
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return _res("unobservable", doc)
    n = len(doc.headings)
    ok = n >= spec.min_sections and (spec.max_sections is None or n <= spec.max_sections)
    titles = [h.text for h in doc.headings]
    return _res("pass" if ok else "fail", f"{n} headings {titles} "
                f"(limits {spec.min_sections}..{spec.max_sections or 'any'})")


def no_judge(spec: LlmCheckSpec) -> VerifierResult:
    return _res("unobservable", f"judged check, no judge given: {spec.criterion}", judged=True)


def llm_check_text(spec: LlmCheckSpec, ctx: VerifierContext) -> str | VerifierResult:
    """The text the judge reads (the response or a markdown/JSON file as written, other files
    as their text), or the unobservable result when there is none."""
    doc = ctx.document(spec.file)
    return _res("unobservable", doc, judged=True) if isinstance(doc, str) else doc.raw or doc.text


def llm_check_verdict(outcome: tuple[bool, str] | JudgeError) -> VerifierResult:
    """A judge's (satisfied, reason) as pass/fail; a JudgeError as unobservable."""
    if isinstance(outcome, JudgeError):
        return _res("unobservable", f"judge failed: {outcome}", judged=True)
    ok, reason = outcome
    return _res("pass" if ok else "fail", reason, judged=True)


def verify_llm_check(spec: LlmCheckSpec, ctx: VerifierContext) -> VerifierResult:
    """With a sync judge in `ctx`; `verifiers.arun_verifiers` awaits an async one instead."""
    if ctx.judge is None:
        return no_judge(spec)
    text = llm_check_text(spec, ctx)
    if isinstance(text, VerifierResult):
        return text
    try:
        outcome: tuple[bool, str] | JudgeError = ctx.judge(spec.criterion, text)
    except JudgeError as exc:
        outcome = exc
    return llm_check_verdict(outcome)
