"""docqa in the episode viewer (Track.viewer_views): a question with its gold answers and evidence
pages, an answer with its cited pages, and each item's score as `deskbench score` decides it
(ANLS* >= 0.5 offline; the judge's verdict and MADQA H.3's error class of a wrong item when a
stored scoring holds it). The stored and the offline item are shown by one function (docqa_shown),
so no rule is written twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from deskbench.contract.viewer import AnswerView, EpisodeScore, Scores, TaskView, ViewerViews
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

if TYPE_CHECKING:
    from deskbench.runs.store import Episode, RunStore
    from deskbench.tracks.docqa.tasks import ItemScore


def docqa_shown(item: ItemScore, answer: Sequence[str] | None) -> EpisodeScore:
    """A docqa item: its metrics, the judge's verdict and reasoning, and MADQA H.3's error class
    of a wrong item (tracks/docqa/taxonomy.py)."""
    from deskbench.tracks.docqa.taxonomy import classify, is_incorrect, says_not_found

    shown = EpisodeScore()
    shown.metrics = {"accuracy": item.accuracy, "decided by": item.accuracy_source, "ANLS*": round(item.anls, 4),
                     "exact": item.exact, "Page F1": round(item.page_f1, 4), "Doc F1": round(item.doc_f1, 4)}
    answers = list(answer) if answer is not None else None
    if is_incorrect(item):
        shown.error_class = classify(item, answers)
        if says_not_found(answers):
            shown.metrics["says not found"] = True
    if item.judge_verdict:
        shown.metrics["judge verdict"] = item.judge_verdict
    if item.judge_issue:
        shown.metrics["judge's main issue"] = item.judge_issue
    if item.judge_reasoning:
        shown.reasoning.append(("answer judge", item.judge_reasoning))
    return shown


class DocQAViews(ViewerViews):
    def task(self, task: BaseModel) -> TaskView | None:
        if not isinstance(task, DocQATask):
            return None
        t = task
        return TaskView(question=t.question, gold=[" | ".join(v) for v in t.answer_variants],
                        gold_pages=[(e.document, e.page) for e in t.evidence], hop_type=t.hop_type,
                        facts=[(k, v) for k, v in (("domain", t.domain), ("category", t.document_category)) if v])

    def answer(self, submission: BaseModel) -> AnswerView | None:
        if not isinstance(submission, DocQASubmission):
            return None
        s = submission
        return AnswerView(answer=list(s.answer),
                          cited=[(c.document, c.page) for c in s.citations if isinstance(c.page, int)])

    def scores(self, store: RunStore, system: str) -> Scores:
        """ANLS* >= 0.5 (docqa's default, no judge) for every attempt, as `deskbench score` scores
        attempt 0 and the attempts block scores the others."""
        from deskbench.tracks.docqa.episodes import run_submissions
        from deskbench.tracks.docqa.humans import tasks_scored
        from deskbench.tracks.docqa.outcomes import docqa_outcomes
        from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all

        attempts = sorted({a for _, a in store.done(system)})
        tasks = store.tasks_of(DocQATask)
        out: Scores = {}
        for attempt in attempts:
            subs, failed = run_submissions(store, system, attempt)
            ran = {s.id for s in subs if s.id is not None} | set(failed)
            scored = [t for t in tasks_scored(system, tasks, ran) if t.id in ran]
            items, _ = score_all(scored, subs, ScoreOptions(), errors=failed)
            answers = {s.id: s.answer for s in subs if s.id is not None}
            for item, outcome in zip(items, docqa_outcomes(items, system, attempt=attempt), strict=True):
                shown = docqa_shown(item, answers.get(item.id)).with_outcome(outcome)
                if shown.status == "unscored":
                    shown.why_unscored = item.judge_error or "not scored"
                out[(item.id, attempt)] = shown
        return out

    def stored(self, row: Mapping[str, Any]) -> EpisodeScore:
        from pydantic import TypeAdapter

        from deskbench.tracks.docqa.tasks import ItemScore

        fields = set(ItemScore.__dataclass_fields__)
        item = TypeAdapter(ItemScore).validate_python({k: v for k, v in row.items() if k in fields})
        prediction = row.get("prediction")
        return docqa_shown(item, prediction.get("answer") if isinstance(prediction, dict) else None)

    def episode_metrics(self, task: BaseModel | None, episode: Episode) -> dict[str, Any]:
        """The episode's searches against the task's gold pages (scoring/retrieval.py)."""
        from deskbench.tracks.docqa.scoring.retrieval import episode_retrieval

        if not isinstance(task, DocQATask):
            return {}
        return episode_retrieval(episode.trajectory, {(e.document, e.page) for e in task.evidence})

    def no_model_calls(self, store: RunStore, episode: Episode) -> str | None:
        """A person (the human baseline app) or an import (a predictions file) made no model call."""
        from deskbench.runs.imported import imported_systems
        from deskbench.tracks.docqa.humans import is_human

        if is_human(episode.system):
            return ("No model calls: a person answered this task in the deskbench web app; what they searched and "
                    "read is in the steps, if any.")
        source = imported_systems(store).get(episode.system)
        if source is not None:
            return (f"No transcript: this system was imported from a predictions file ({source.source}) with "
                    "deskbench import, which holds the answers, not the model calls that produced them.")
        return None


VIEWS = DocQAViews()
