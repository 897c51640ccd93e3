"""docqa's per-item output (`score --items-out`): one row per item with what a reader needs to
audit it without the run: the question, the gold answers and evidence pages, the prediction and its
citations, every metric and the judge's verdict and reasoning."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

from deskbench.tasks.docqa import DocQASubmission, DocQATask, ItemScore


def item_row(task: DocQATask, sub: DocQASubmission | None, item: ItemScore, system: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"system": system} if system is not None else {}
    row.update(json.loads(to_json(item, exclude_none=True)))
    row["question"] = task.question
    row["gold"] = {"answers": task.answer_variants, "evidence": [[e.document, e.page] for e in task.evidence]}
    row["prediction"] = None if sub is None else {
        "answer": sub.answer, "citations": [[c.document, c.page] for c in sub.citations],
        **({"error": sub.error} if sub.error else {})}
    return row


def item_rows(pairs: Sequence[tuple[DocQATask, DocQASubmission | None]], items: Sequence[ItemScore],
              system: str | None = None) -> list[dict[str, Any]]:
    """The rows of one system's scored items (`items` in the order of `pairs`, as score_all gives them)."""
    return [item_row(t, s, i, system) for (t, s), i in zip(pairs, items, strict=True)]


def write_rows(path: Any, rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
