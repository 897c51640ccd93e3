"""docqa's items for judge calibration (MADQA Appendix F.1; the core's scoring/judge_calibration.py
computes q0, q1 and samples): every ok attempt-0 answer of docqa runs, and the verdicts the
scorer gives them as `deskbench score --judge` does (exact under ANLS* -> 1, else the judge)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from deskbench.errors import UserError
from deskbench.scoring.judge_calibration import CalibrationItem, open_named_runs
from deskbench.tracks.docqa.scoring.judge import AnswerJudge
from deskbench.tracks.docqa.tasks import DocQATask


def collect_items(run_dirs: Sequence[Path], system: str | None = None) -> list[CalibrationItem]:
    """Every ok attempt-0 docqa answer of the runs (no verdicts), in a stable order."""
    from deskbench.tracks.docqa.episodes import run_submissions

    items: list[CalibrationItem] = []
    for run_dir, store in open_named_runs(run_dirs):
        if store.track() != "docqa":
            raise UserError(f"{run_dir} is a {store.track()} run; judge calibration needs docqa runs")
        tasks = {t.id: t for t in store.tasks_of(DocQATask)}
        for name in sorted(store.systems()):
            if system is not None and name != system:
                continue
            subs, _ = run_submissions(store, name)
            for sub in sorted(subs, key=lambda s: s.id or ""):
                task = tasks.get(sub.id) if sub.id is not None else None
                if task is None:
                    continue
                items.append(CalibrationItem(
                    id=f"{run_dir.name}/{name}/{task.id}", task_id=task.id, run=run_dir.name, system=name,
                    question=task.question, answer_variants=task.answer_variants, prediction=list(sub.answer)))
    if not items:
        raise UserError(f"no answered docqa items in {', '.join(str(d) for d in run_dirs)}"
                        f"{f' for system {system!r}' if system else ''}; run 'deskbench run' first")
    return items


def judge_items(items: Sequence[CalibrationItem], judge: AnswerJudge) -> list[CalibrationItem]:
    """The items with the scorer's verdict: exact under ANLS* -> 1 ("exact", the judge is not
    asked, as in `deskbench score --judge`), else the judge's 1 / 0.5 / 0 (None if unscored)."""
    from deskbench.tracks.docqa.scoring.answer import anls_star
    from deskbench.tracks.docqa.scoring.docqa import judge_many

    name = getattr(judge, "name", None)
    exact = [anls_star(i.prediction, i.answer_variants) == 1.0 for i in items]
    to_judge = [i for i, e in zip(items, exact, strict=True) if not e]

    asks = [(i.question, i.prediction, i.answer_variants) for i in to_judge]
    judged = asyncio.run(judge_many(judge, asks)) if asks else []
    by_id = {i.id: j for i, j in zip(to_judge, judged, strict=True)}
    out = []
    for item, is_exact in zip(items, exact, strict=True):
        if is_exact:
            out.append(item.model_copy(update={"judge_verdict": 1.0, "verdict_source": "exact", "judge": name,
                                               "judge_reason": "exact match (ANLS* = 1): the judge is not asked"}))
            continue
        j = by_id[item.id]
        out.append(item.model_copy(update={"judge_verdict": j.score, "verdict_source": "judge", "judge": name,
                                           "judge_reason": j.reasoning or j.error}))
    return out
