"""docqa's per-item output (`score --items-out`, frame in scoring/items_out.py): one row per item
with what a reader needs to audit it without the run: the question, the gold answers and evidence
pages, the prediction and its citations, every metric and the judge's verdict and reasoning (also
under `judge.llm_judge`, the name its calls have in the run store's judge_transcripts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

from deskbench.runs.scorings import StoredItem
from deskbench.scoring.items_out import ItemAudit
from deskbench.scoring.items_out import item_row as frame_row
from deskbench.scoring.items_out import write_rows as write_rows
from deskbench.scoring.judge_log import DOCQA_JUDGE
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, ItemScore


def item_row(task: DocQATask, sub: DocQASubmission | None, item: ItemScore, system: str | None = None) -> dict[str, Any]:
    judge: dict[str, dict[str, Any]] = {}
    if item.judge_verdict is not None:
        judge[DOCQA_JUDGE] = {"verdict": item.judge_verdict, "reasoning": item.judge_reasoning,
                              "issue": item.judge_issue, "error": item.judge_error}
    audit = ItemAudit(
        question=task.question,
        gold={"answers": task.answer_variants, "evidence": [[e.document, e.page] for e in task.evidence]},
        prediction=None if sub is None else {
            "answer": sub.answer, "citations": [[c.document, c.page] for c in sub.citations],
            **({"error": sub.error} if sub.error else {})},
        judge=judge)
    return frame_row(json.loads(to_json(item, exclude_none=True)), audit, system)


def stored_items(pairs: Sequence[tuple[DocQATask, DocQASubmission | None]], items: Sequence[ItemScore],
                 system: str, attempt: int = 0) -> list[StoredItem]:
    """One system's items of one attempt as the run store keeps them (runs/scorings.py): each
    item's outcome (tracks/docqa/outcomes.py) with its row; unscored with the judge's error."""
    from deskbench.tracks.docqa.outcomes import docqa_outcomes

    rows = item_rows(pairs, items, system)
    return [StoredItem.of(o, row, item.judge_error or "")
            for o, row, item in zip(docqa_outcomes(items, system, attempt=attempt), rows, items, strict=True)]


def item_rows(pairs: Sequence[tuple[DocQATask, DocQASubmission | None]], items: Sequence[ItemScore],
              system: str | None = None) -> list[dict[str, Any]]:
    """The rows of one system's scored items (`items` in the order of `pairs`, as score_all gives them)."""
    return [item_row(t, s, i, system) for (t, s), i in zip(pairs, items, strict=True)]
