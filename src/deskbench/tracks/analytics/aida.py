"""AIDABench's released tasks (HF dataset MichaelYang-lyx/AIDA, GitHub MichaelYang-lyx/AIDABench)
as deskbench analytics tasks: `deskbench import-tasks aida MANIFEST --out TASKS.jsonl`.

Where the field names come from: the dataset card could not be read here (no network). The names
below are those that third-party code running the official release reads (a runner and the
official evaluator's input builder for the `QA_en`, `file_generation_en` splits) and a public
audit of the release (603 Chinese rows, 603 English rows with the same ids): one JSON object a
line with

    id              "QA_12" | "DV_84" | "FG_82": the prefix is the category
    question        the instruction
    input_file      input file names, several separated by newlines (or ";", "\\r"); DV_84 has none
    reference       QA: the reference answer (null in five rows)
    rubrics         QA / DV: key points (list, or one string)
    output_file     FG / DV: the file(s) the answer must write, packed like input_file
    reference_file  FG: the reference file(s) under reference/<id>/, packed like input_file
    eval_area       FG: cell ranges the official runner does not read (kept in params)

and files at `<split folder>/input/<id>/<name>`, `<split folder>/reference/<id>/<name>`, the
split folder being the manifest's. The release has no per-task step count (the paper's
difficulty): a row's `difficulty_steps` is used when present, else --difficulty-steps.

Every category is imported:

- QA rows: the reference answer and key points (the Listing 2 judge's inputs); a reference that
  is only a number also as `answer_value` (and "%" as its unit), for the check without a judge;
- visualization rows: the question, the key points (`rubrics`) and the image file asked for
  (`output_file`): what the paper's chart judges read (Listings 3-4). The release has no plotted
  values, so these tasks have no deskbench chart spec; it is optional and only adds checks;
- file rows with one or several output files, each paired with its reference (by name: the
  reference's stem is the output's, possibly followed by _res/_ref/_reference/_answer/_gold;
  failing that, by position when the counts agree). Each file is scored; the task passes when
  all do (scoring/analytics.py).

Stage 1's strictness is decided per file task here, from the instruction and key points
(sheets_structure.read_structure: strict only for a column order, an exact header or a layout;
naming the columns wanted stays relaxed), and written into the task with why, so the tasks file
shows it and an author can change it.

What still cannot be imported is skipped with its reason, never guessed: QA rows without a
reference (the paper's QA judge compares against one), rows without an input file, chart rows
without rubrics, file rows whose references are missing, not .xlsx/.csv, or cannot be paired
with the outputs.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from deskbench.errors import UserError, read_user_file
from deskbench.tasks.jsonl import _describe
from deskbench.tracks.analytics.scoring.sheets_structure import read_structure
from deskbench.tracks.analytics.tasks import (
    AnalyticsTask,
    Category,
    ReferenceFile,
    SheetSpec,
    write_tasks,
)

CATEGORY_OF_PREFIX: dict[str, Category] = {"QA": "qa", "DV": "visualization", "FG": "file_generation"}
_SEPARATORS = re.compile(r"[\n\r;]+")
_REFERENCE_SUFFIX = re.compile(r"[_\- ]?(?:res|result|ref|reference|answer|gold|expected|标准答案|答案)$", re.I)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class AidaRow(BaseModel):
    """One manifest line; other fields are kept out of the way (extra="ignore")."""

    model_config = ConfigDict(extra="ignore")
    id: str
    question: str
    input_file: str | list[str] | None = None
    output_file: str | list[str] | None = None
    reference_file: str | list[str] | None = None
    reference: Any = None
    rubrics: str | list[str] | None = None
    eval_area: str | None = None
    difficulty_steps: int | None = None


def split_names(raw: str | list[str] | None) -> list[str]:
    """A packed file-name field (several names on separate lines) as a list."""
    if raw is None:
        return []
    parts = raw if isinstance(raw, list) else _SEPARATORS.split(raw)
    return [p.strip() for p in parts if p and p.strip()]


@dataclass
class AidaImport:
    tasks: list[AnalyticsTask] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> task ids

    def skip(self, task_id: str, reason: str) -> None:
        self.skipped.setdefault(reason, []).append(task_id)


def _sheets(path: Path) -> list[SheetSpec] | None:
    """The reference file's sheets as deskbench describes them (header row, data rows), read in a
    worker under the untrusted-file limits (over one: the import stops with the verdict)."""
    from deskbench.untrusted import call_limited

    return call_limited(_read_sheets, path, subject=str(path))


def _read_sheets(path: Path) -> list[SheetSpec] | None:
    from deskbench.untrusted.checks import check_office

    check_office(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open(encoding="utf-8-sig", newline="") as fh:
            rows = [r for r in csv.reader(fh) if any(c.strip() for c in r)]
        if not rows:
            return None
        return [SheetSpec(name=path.stem, columns=[c.strip() for c in rows[0]], rows=len(rows) - 1)]
    if suffix in (".xlsx", ".xlsm"):
        import openpyxl

        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
        try:
            specs = []
            for ws in wb.worksheets:
                rows = [r for r in ws.iter_rows(values_only=True) if any(v is not None for v in r)]
                header = [str(v).strip() for v in rows[0] if v is not None] if rows else []
                if header:
                    specs.append(SheetSpec(name=ws.title, columns=header, rows=len(rows) - 1))
            return specs or None
        finally:
            wb.close()
    return None


_PLAIN_NUMBER = re.compile(r"^\s*(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*(?P<pct>%?)\s*$")


def plain_number(reference: str) -> tuple[float, str | None] | None:
    """A reference that is only a number ("150", "1,234.5", "12.5%") as (value, unit): what the
    deterministic QA check (no --judge) compares by rounding instead of by text. Anything with
    words or several figures stays text: the judge or the text check reads it."""
    m = _PLAIN_NUMBER.match(reference)
    if m is None:
        return None
    return float(m.group("num").replace(",", "")), ("%" if m.group("pct") else None)


def _key_points(raw: str | list[str] | None) -> list[str]:
    if raw is None:
        return []
    return [p.strip() for p in (raw if isinstance(raw, list) else raw.splitlines()) if p.strip()]


def pair_references(outputs: list[str], refs: list[str]) -> list[tuple[str, str]] | None:
    """Each output file name with its reference file name: by stem (the reference's stem is the
    output's, maybe with a _res/_ref/... suffix, any extension), else by position when the counts
    agree; None when they cannot be paired."""
    def stem(name: str, strip: bool) -> str:
        s = Path(name).stem.casefold()
        return _REFERENCE_SUFFIX.sub("", s) if strip else s

    by_stem: dict[str, str] = {}
    for r in refs:
        by_stem.setdefault(stem(r, True), r)
    paired = [(o, by_stem.get(stem(o, False))) for o in outputs]
    if all(r is not None for _, r in paired) and len({r for _, r in paired}) == len(outputs):
        return [(o, r) for o, r in paired if r is not None]
    if len(outputs) == len(refs) and outputs:
        return list(zip(outputs, refs, strict=True))
    return None


def _strictness(row: AidaRow) -> dict[str, Any]:
    """Stage 1's reading of this row, decided at import (read_structure) and kept with why."""
    rule = read_structure([row.question, *_key_points(row.rubrics)])
    return {"strict_structure": rule.strict,
            "structure_reason": f"{'strict' if rule.strict else 'relaxed'}, decided at import: {rule.why}"}


def _file_task(row: AidaRow, base: dict[str, Any], split_dir: Path, rel: Callable[[Path], str],
               result: AidaImport) -> AnalyticsTask | None:
    outputs, refs = split_names(row.output_file), split_names(row.reference_file)
    if not outputs or not refs:
        result.skip(row.id, "file_generation: no output file or no reference file")
        return None
    pairs = pair_references(outputs, refs)
    if pairs is None:
        result.skip(row.id, "file_generation: cannot tell which reference file goes with which output file")
        return None
    files: list[ReferenceFile] = []
    for output, ref_name in pairs:
        reference = split_dir / "reference" / row.id / ref_name
        sheets = _sheets(reference) if reference.is_file() else None
        if sheets is None:
            result.skip(row.id, "file_generation: reference file missing, empty or not .xlsx/.csv")
            return None
        files.append(ReferenceFile(path=rel(reference), output_name=output, sheets=sheets, **_strictness(row)))
    return AnalyticsTask(**base, reference_file=files[0], extra_outputs=files[1:])


def _chart_task(row: AidaRow, base: dict[str, Any], result: AidaImport) -> AnalyticsTask | None:
    if not base["key_points"]:
        result.skip(row.id, "visualization: no rubrics (the chart judge's checklist, Listing 3)")
        return None
    images = [n for n in split_names(row.output_file) if Path(n).suffix.lower() in IMAGE_SUFFIXES]
    return AnalyticsTask(**base, chart_file=images[0] if images else None)


def convert(rows: list[tuple[int, AidaRow]], split_dir: Path, out_dir: Path, *, manifest: Path,
            difficulty_steps: int | None) -> AidaImport:
    """Each row as an AnalyticsTask whose paths are relative to `out_dir` (the tasks file's folder)."""
    result = AidaImport()

    def rel(p: Path) -> str:
        return Path(os.path.relpath(p, out_dir)).as_posix()

    for number, row in rows:
        category = CATEGORY_OF_PREFIX.get(row.id.split("_", 1)[0].upper())
        if category is None:
            raise UserError(f"{manifest}:{number}: field 'id': {row.id!r} has no QA_/DV_/FG_ prefix; "
                            "give an AIDA split manifest (QA_en.jsonl, file_generation_en.jsonl, ...)")
        steps = row.difficulty_steps or difficulty_steps
        if steps is None:
            raise UserError(f"{manifest}:{number}: no difficulty_steps (the AIDA release has no step counts); "
                            "pass --difficulty-steps N to give every task N (the by-difficulty table then means nothing)")
        inputs = [split_dir / "input" / row.id / name for name in split_names(row.input_file)]
        missing = [p for p in inputs if not p.is_file()]
        if not inputs or missing:
            result.skip(row.id, "input file missing" if inputs else "no input file")
            continue
        base: dict[str, Any] = {"id": row.id, "category": category, "instruction": row.question,
                                "inputs": [rel(p) for p in inputs], "difficulty_steps": steps,
                                "template": "aida", "key_points": _key_points(row.rubrics)}
        if row.eval_area:
            base["params"] = {"eval_area": row.eval_area}
        try:
            task: AnalyticsTask | None
            if category == "qa":
                if row.reference is None or str(row.reference).strip() == "":
                    result.skip(row.id, "qa: no reference answer")
                    continue
                answer = row.reference if isinstance(row.reference, str) else json.dumps(row.reference, ensure_ascii=False)
                numeric = plain_number(answer)
                task = AnalyticsTask(**base, answer=answer, answer_value=numeric[0] if numeric else None,
                                     answer_unit=numeric[1] if numeric else None)
            elif category == "visualization":
                task = _chart_task(row, base, result)
            else:
                task = _file_task(row, base, split_dir, rel, result)
        except ValidationError as exc:
            raise UserError(f"{manifest}:{number}: {_describe(exc)}; fix the row or leave it out") from None
        if task is not None:
            result.tasks.append(task)
    return result


def import_release(manifest: Path, out: Path, *, difficulty_steps: int | None = None) -> AidaImport:
    """Read an AIDA split manifest (files beside it) and write its tasks to `out` (JSONL): the
    public entry of `import-tasks aida` and `fetch aida`."""
    if difficulty_steps is not None and difficulty_steps < 1:
        raise UserError(f"--difficulty-steps {difficulty_steps} is not valid; use 1 or more")
    data = read_user_file(manifest, "the AIDA manifest")
    rows: list[tuple[int, AidaRow]] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((number, AidaRow.model_validate_json(line)))
        except ValidationError as exc:
            raise UserError(f"{manifest}:{number}: {_describe(exc)}; give an AIDA split manifest "
                            "(one JSON object a line with id, question, input_file, ...)") from None
    result = convert(rows, manifest.resolve().parent, out.resolve().parent, manifest=manifest,
                     difficulty_steps=difficulty_steps)
    write_tasks(out, result.tasks)
    return result


# `deskbench import-tasks FORMAT MANIFEST --out TASKS.jsonl`: one importer per released benchmark
import_aida = import_release  # the name `fetch aida` (tracks/analytics/fetch.py) calls
TASK_IMPORTERS: dict[str, Callable[..., AidaImport]] = {"aida": import_release}
