"""Spreadsheet File Evaluator (AIDABench §3.3.3, Appendix D), deterministic.

The paper's evaluator is an LLM agent with a tool budget; its three stages are mechanical, so
they are implemented here without a model and stop at the first critical failure:

1. structure (sheets_structure): an index of both files (sheets, shapes, headers, kinds); strict
   or tolerant sheet pairing and column alignment; sample row positions chosen once.
2. content: normalised cells (see sheets_values) compared in full for sheets under 200 rows, else
   on 30 rows each from the head, middle, tail and a seeded random draw. Rows are compared by
   position only when the instruction asks for an order (a sort on one of the sheet's columns,
   or order words no sort constraint accounts for: "top 5", "A-Z", 降序, 从高到低), else as a
   multiset of row hashes, in strict mode too: a strict structure prescribes sheets, columns and
   row count, not the order of rows nobody asked to sort (Listing 5 allows row reordering).
3. constraints: dedup, sort, filters and top-K read from the instruction (sheets_constraints),
   checked on the prediction; then the row count, a key statistic sampling cannot see.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from deskbench.tracks.analytics.scoring.sheets_constraints import (
    Constraint,
    check,
    extract_constraints,
    order_phrase,
    resolve_column,
)
from deskbench.tracks.analytics.scoring.sheets_load import (
    READABLE_SUFFIXES,
    UnreadableSheet,
    load_tables,
)
from deskbench.tracks.analytics.scoring.sheets_structure import (
    Pair,
    index_line,
    read_structure,
    structure,
)
from deskbench.tracks.analytics.scoring.sheets_values import (
    Norm,
    cells_equal,
    column_kind,
    key,
    normalise_column,
    show,
)
from deskbench.tracks.analytics.tasks import AnalyticsTask, ReferenceFile

Stage = Literal["open", "structure", "content", "constraints", "done"]


class SheetComparison(BaseModel):
    """The verdict. JSON uses `pass` for `passed` (dump with by_alias=True)."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)
    passed: bool = Field(validation_alias="pass", serialization_alias="pass")
    stage: Stage  # where it failed; "done" when it passed
    reason: str
    mode: Literal["strict", "tolerant"]
    checked: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)  # the constraints recognised in the instruction


def _rows(pair: Pair) -> tuple[list[tuple[Norm, ...]], list[tuple[Norm, ...]]]:
    ref_cols, pred_cols = [], []
    for rc, pc in pair.columns:
        kind = column_kind(pair.ref.values(rc))
        ref = normalise_column(pair.ref.values(rc), kind)
        ref_cols.append(ref)
        pred_cols.append(normalise_column(pair.pred.values(pc), kind, reference=set(ref)))
    return list(zip(*ref_cols, strict=True)), list(zip(*pred_cols, strict=True))


def _describe(pair: Pair, row: tuple[Norm, ...]) -> str:
    return ", ".join(f"{rc}={show(v)}" for (rc, _), v in list(zip(pair.columns, row, strict=True))[:3])


def _first_diff(pair: Pair, a: tuple[Norm, ...], b: tuple[Norm, ...]) -> str:
    i = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not cells_equal(x, y))
    return f"column '{pair.columns[i][0]}': expected {show(a[i])}, got {show(b[i])}"


def _content(pair: Pair, ordered: str | None) -> str | None:
    """The first reference row not found in the prediction (naming sheet, row, column, expected
    and got), or None. Surplus prediction rows are left to the row-count check after the
    constraints, so that duplicates left in or a top-6 for a top-5 fail with that reason."""
    ref_rows, pred_rows = _rows(pair)
    index: dict[tuple[object, ...], deque[int]] = {}
    for j, row in enumerate(pred_rows):
        index.setdefault(tuple(map(key, row)), deque()).append(j)
    s, n, m = pair.name, len(ref_rows), len(pred_rows)
    if ordered:
        for p in pair.positions:
            if p >= m:
                return f"sheet '{s}': reference row {pair.ref.rownums[p]} ({_describe(pair, ref_rows[p])}) is missing: the prediction has {m} data rows, expected {n}"
            a, b = ref_rows[p], pred_rows[p]
            if not all(cells_equal(x, y) for x, y in zip(a, b, strict=True)):
                where = index.get(tuple(map(key, a)))
                hint = f"; the expected row is at prediction row {pair.pred.rownums[where[0]]}" if where else ""
                return (f"sheet '{s}' row {pair.pred.rownums[p]} (data row {p + 1}), {_first_diff(pair, a, b)}"
                        f"{hint} (row order matters: {ordered})")
    else:
        used = [False] * m
        for p in pair.positions:
            a = ref_rows[p]
            bucket = index.get(tuple(map(key, a)), deque())
            while bucket and used[bucket[0]]:
                bucket.popleft()
            found: int | None = bucket.popleft() if bucket else next(
                (j for j in range(m) if not used[j] and all(cells_equal(x, y) for x, y in zip(a, pred_rows[j], strict=True))), None)
            if found is not None:
                used[found] = True
                continue
            if not m:
                return f"sheet '{s}': the prediction has no data rows, expected {n}"
            best = max(range(m), key=lambda j: (sum(cells_equal(x, y) for x, y in zip(a, pred_rows[j], strict=True)), not used[j], -j))
            return (f"sheet '{s}': reference row {pair.ref.rownums[p]} ({_describe(pair, a)}) is not in the prediction; "
                    f"closest is prediction row {pair.pred.rownums[best]}, {_first_diff(pair, a, pred_rows[best])}")
        if pair.full and m > n:
            j = used.index(False)
            pair.extra = f"prediction row {pair.pred.rownums[j]} ({_describe(pair, pred_rows[j])}) is not in the reference"
    return None


def _row_count(pair: Pair) -> str | None:
    """The row count as a key statistic (Stage 3): the sampled content check cannot see surplus rows."""
    n, m = pair.ref.n_rows, pair.pred.n_rows
    if n == m:
        return None
    return f"sheet '{pair.name}': expected {n} data rows, got {m}" + (f"; {pair.extra}" if pair.extra else "")


def _sort_reason(sorts: list[Constraint], pair: Pair) -> str | None:
    """Why row order matters for this sheet: a sort the instruction asks for on one of its
    columns, and which the reference obeys (else the wording was about another sheet)."""
    for c in sorts:
        rc = resolve_column(c.column or "", [rc for rc, _ in pair.columns])
        if rc is not None and check(c, pair.ref, [rc]) is None:
            return f"the instruction asks to sort by {c.column}"
    return None


def _fail(stage: Stage, reason: str, mode: Literal["strict", "tolerant"], checked: list[str],
          constraints: list[Constraint]) -> SheetComparison:
    return SheetComparison(passed=False, stage=stage, reason=reason, mode=mode, checked=checked,
                           constraints=[c.label for c in constraints])


def _targets(c: Constraint, pairs: list[Pair]) -> list[tuple[Pair, list[str], list[str]]]:
    """(pair, reference columns, prediction columns) a constraint applies to."""
    out: list[tuple[Pair, list[str], list[str]]] = []
    for pair in pairs:
        if c.kind == "top_k":
            if pair.ref.n_rows == c.k:
                out.append((pair, [], []))
        elif c.column is None:
            out.append((pair, [rc for rc, _ in pair.columns], [pc for _, pc in pair.columns]))
        elif (rc := resolve_column(c.column, [rc for rc, _ in pair.columns])) is not None:
            out.append((pair, [rc], [dict(pair.columns)[rc]]))
    return out


def compare_sheets(reference: Path, predicted: Path, *, instruction: str = "", key_points: Sequence[str] = (),
                   strict: bool | None = None, why: str = "", sample_n: int = 30, seed: int = 0) -> SheetComparison:
    """Does `predicted` satisfy the task that `reference` answers? Stops at the first failing stage.

    strict=None decides from the instruction (and key points, sheets_structure.read_structure);
    True/False is the task's own decision, `why` its reason (shown in `checked`). A prediction
    that does not open fails at stage "open"; a reference that does not open raises
    UnreadableSheet (the task is broken, not the answer).
    """
    texts = [instruction, *key_points]
    rule = read_structure(texts, strict=strict)
    mode: Literal["strict", "tolerant"] = "strict" if rule.strict else "tolerant"
    checked = [f"mode {mode} ({why or rule.why})"]
    if rule.sheet_names:
        checked.append(f"sheets the instruction names are matched by name ({rule.sheet_names!r})")
    if rule.only_columns:
        checked.append(f"no column beyond the reference's ({rule.only_columns!r})")
    constraints = extract_constraints(texts)
    try:
        refs = load_tables(reference)
    except UnreadableSheet as exc:
        raise UnreadableSheet(f"reference {exc}") from None
    try:
        preds = load_tables(predicted, hints=[c for t in refs for c in t.columns])
    except (UnreadableSheet, OSError) as exc:
        return _fail("open", f"the prediction does not open: {exc}", mode, checked, constraints)
    checked += [f"reference {index_line(t)}" for t in refs if t.columns] + [f"prediction {index_line(t)}" for t in preds if t.columns]

    pairs = structure(refs, preds, rule, sample_n, seed)
    if isinstance(pairs, str):
        return _fail("structure", pairs, mode, checked, constraints)

    sorts = [c for c in constraints if c.kind == "sort"]
    asked = order_phrase(texts)
    for pair in pairs:
        ordered = _sort_reason(sorts, pair) or (f"the instruction asks for an order: {asked!r}" if asked else None)
        how = "in full" if pair.full else f"sampled ({len(pair.positions)} of {pair.ref.n_rows}: head/middle/tail/random, seed {seed})"
        checked.append(f"sheet '{pair.name}' vs '{pair.pred.name}': {len(pair.columns)} columns, rows compared {how}, "
                       f"{'by position' if ordered else 'order-insensitive'}")
        if (diff := _content(pair, ordered)) is not None:
            return _fail("content", diff, mode, checked, constraints)

    for c in constraints:
        targets = _targets(c, pairs)
        if not targets:
            checked.append(f"constraint {c.label}: not checked (no sheet or column it applies to)")
        for pair, ref_cols, pred_cols in targets:
            if (bad := check(c, pair.ref, ref_cols)) is not None:
                checked.append(f"constraint {c.label} on '{pair.name}': not applied (the reference breaks it, so it was misread: {bad})")
            elif (bad := check(c, pair.pred, pred_cols)) is not None:
                checked.append(f"constraint {c.label} on '{pair.name}': violated")
                return _fail("constraints", bad, mode, checked, constraints)
            else:
                checked.append(f"constraint {c.label} on '{pair.name}': holds")
    for pair in pairs:
        if (bad := _row_count(pair)) is not None:
            checked.append(f"row count on '{pair.name}': differs")
            return _fail("constraints", bad, mode, checked, constraints)
        checked.append(f"row count on '{pair.name}': {pair.ref.n_rows} as in the reference")
    sampled = sum(1 for p in pairs if not p.full)
    reason = (f"{len(pairs)} sheet(s) match ({', '.join(p.name for p in pairs)}), {sampled} of them by sampling; "
              f"{len(constraints)} constraint(s) recognised, none violated")
    return SheetComparison(passed=True, stage="done", reason=reason, mode=mode, checked=checked,
                           constraints=[c.label for c in constraints])


@dataclass(frozen=True)
class Outcome:
    """The comparator's verdict, or why it cannot decide (for the optional File Judge).

    It cannot decide, narrowly, when it cannot read a file in its format: the reference does not
    open as a table (`verdict` is None and `reference_error` holds what compare_sheets raises),
    or the prediction is in a format it does not read at all (.xls, .ods, .json, ...: `verdict`
    is its fail at "open"). A prediction in a format it reads that does not parse (a corrupt
    .xlsx) is a decided fail, as is everything past stage "open"."""

    verdict: SheetComparison | None
    undecided: str = ""  # why the comparator cannot decide; "" when it decided
    reference_error: UnreadableSheet | None = None


def compare_or_defer(reference: Path, predicted: Path, *, instruction: str = "", key_points: Sequence[str] = (),
                     strict: bool | None = None, why: str = "", sample_n: int = 30, seed: int = 0) -> Outcome:
    """compare_sheets, saying when its verdict is no verdict (instead of raising for the reference)."""
    try:
        verdict = compare_sheets(reference, predicted, instruction=instruction, key_points=key_points,
                                 strict=strict, why=why, sample_n=sample_n, seed=seed)
    except UnreadableSheet as exc:
        return Outcome(None, f"the comparator cannot read the {exc}", exc)
    if verdict.stage == "open" and predicted.suffix.lower() not in READABLE_SUFFIXES:
        what = f"a {predicted.suffix} file" if predicted.suffix else "a file without an extension"
        return Outcome(verdict, f"the comparator cannot read the prediction: {what} (it reads "
                                f"{', '.join(READABLE_SUFFIXES)})")
    return Outcome(verdict)


def compare_task_output(task: AnalyticsTask, tasks_dir: Path, predicted: Path, *, sample_n: int = 30,
                        seed: int = 0, output: ReferenceFile | None = None) -> SheetComparison:
    """A file_generation task's output against its reference file (`output`: which of the task's
    outputs, the first by default); strictness from the task."""
    ref = output or task.reference_file
    if ref is None:
        raise ValueError(f"task {task.id} has no reference file (category {task.category})")
    return compare_sheets(tasks_dir / ref.path, predicted, instruction=task.instruction,
                          key_points=task.key_points, strict=ref.strict_structure, why=ref.structure_reason,
                          sample_n=sample_n, seed=seed)

