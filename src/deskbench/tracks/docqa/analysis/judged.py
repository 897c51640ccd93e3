"""How the analyses decide correctness: ANLS* (no judge) or, with `--judge MODEL`, as MADQA H.3
does: the LLM judge's score (correct 1, partial 0.5, incorrect 0; an answer exact under ANLS*
scores 1 without a call) and "a score >= 0.5 counts as correct".

Why a module of its own: every `deskbench analyse` command scores runs, and each must (1) say in
its output which scorer it used, so no number changes silently, and (2) never pay for a verdict
the run already holds. A run scored by `deskbench score --judge MODEL` (or `run --judge`) keeps
every verdict with its item (runs/scorings.py); an analysis with the same judge and the same judge
settings reads them back and calls the judge only for answers no stored scoring judged. A stored
verdict is reused only when it was given on exactly the inputs the judge would be shown now (the
question, the answer as submitted, the gold variants) and the episode was not run again after
that scoring; a stored judge error is no verdict and is asked again. The judge is opened only
when a verdict is missing, so an analysis of a fully judged run needs no API key."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.runs.scorings import Scoring, StoredItem
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.scoring.judge import AnswerJudge, Judgement, Verdict
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, ItemScore

CORRECT_AT = 0.5  # MADQA H.3: "a score >= 0.5 counts as correct"
ANLS_RULE = "ANLS* >= 0.5 against the best answer variant (no judge; --judge MODEL decides as MADQA H.3)"
JUDGE_RULE = ("the judge's score >= 0.5 (MADQA H.3: correct 1, partial 0.5, incorrect 0; answers exact under "
              "ANLS* score 1 without a call); averages are of the score, as the paper's accuracy")
_VERDICTS: tuple[Verdict, ...] = ("correct", "partial", "incorrect")

AskKey = tuple[str, str, str]  # the judge's inputs: question, answer as submitted, gold variants (JSON)


class AnalysisScoring(BaseModel):
    """What decided correctness in an analysis, written into its JSON report."""

    scorer: Literal["ANLS*", "judge"]
    judge: str | None = None  # the --judge model
    rule: str
    reused: int = 0  # verdicts read from the runs' stored scorings
    asked: int = 0  # verdicts the judge was asked for now
    unscored: int = 0  # judge calls that failed: those items are left out, never counted wrong
    scorings: list[str] = []  # the stored scorings verdicts came from (`run dir#id`)

    def line(self) -> str:
        """One line for stderr."""
        if self.scorer == "ANLS*":
            return f"scored with {ANLS_RULE}"
        where = f" from stored scoring {', '.join(self.scorings)}" if self.scorings else ""
        failed = f", {self.unscored} unscored (the judge failed)" if self.unscored else ""
        return (f"scored with judge {self.judge}: correct when its score >= {CORRECT_AT:g} (MADQA H.3); "
                f"{self.reused} verdicts reused{where}, {self.asked} asked now{failed}")


def ask_key(question: str, predicted: str | Sequence[str], variants: Sequence[Sequence[str]]) -> AskKey:
    """A judge call's inputs as one key (the answer as submitted: a string stays a string)."""
    answer = predicted if isinstance(predicted, str) else list(predicted)
    return question, json.dumps(answer, ensure_ascii=False), json.dumps([list(v) for v in variants], ensure_ascii=False)


def _stored_judgement(item: StoredItem) -> Judgement | None:
    """The judge's verdict kept in a stored item's row; None for none or a judge error."""
    from deskbench.scoring.judge_log import DOCQA_JUDGE

    found: Any = (item.row.get("judge") or {}).get(DOCQA_JUDGE) or {}
    verdict = found.get("verdict")
    if verdict not in _VERDICTS:
        return None
    return Judgement(verdict, reasoning=found.get("reasoning") or "", main_issue=found.get("issue"))


def _finished(store: RunStore, system: str) -> dict[str, dict[tuple[str, int], str]]:
    """When each episode a row's stored verdicts can be about ended, by stored system: the row's
    own; for a pooled `human` row also every annotator's (its answers are theirs), and under the
    pooled name the latest of theirs for each task (a `score --pool-humans` stores it so)."""
    from deskbench.tracks.docqa.humans import KINDS, pooled_name

    if system not in KINDS:
        return {system: store.finished_times(system)}
    out = {s: store.finished_times(s) for s in store.systems() if pooled_name(s) == system}
    pooled: dict[tuple[str, int], str] = {}
    for times in out.values():
        for key, when in times.items():
            pooled[key] = max(when, pooled.get(key, when))
    out[system] = pooled
    return out


class _Reusing:
    """An AnswerJudge that answers from stored verdicts and asks the real judge for the rest."""

    def __init__(self, stored: dict[AskKey, Judgement], judging: Judging) -> None:
        self.stored = stored
        self.judging = judging
        self.name = f"stored verdicts, else {judging.spec}"

    async def judge(self, question: str, predicted: str | Sequence[str], variants: Sequence[Sequence[str]]) -> Judgement:
        known = self.stored.get(ask_key(question, predicted, variants))
        if known is not None:
            self.judging.reused += 1
            return known
        self.judging.asked += 1
        return await self.judging.real_judge().judge(question, predicted, variants)

    async def aclose(self) -> None:
        """Close the real judge's connections (they belong to this event loop), when it was opened."""
        if self.judging.opened is not None and (close := getattr(self.judging.opened, "aclose", None)) is not None:
            await close()


@dataclass
class Judging:
    """The analyses' scorer: ANLS* when `spec` is None, else the judge `spec` with the runs' stored
    verdicts reused. One per command: it counts verdicts reused and asked for its summary.
    `opener` opens the real judge (default: `deskbench score`'s, with the response cache)."""

    spec: str | None = None
    concurrency: int = 16
    cache: Path | None = None
    no_cache: bool = False
    opener: Callable[[], AnswerJudge] | None = None
    reused: int = 0
    asked: int = 0
    unscored: int = 0
    opened: AnswerJudge | None = None
    scorings: list[str] = field(default_factory=list)
    _stored: dict[str, list[tuple[Scoring, list[StoredItem]]]] = field(default_factory=dict)

    @property
    def judged(self) -> bool:
        return self.spec is not None

    def real_judge(self) -> AnswerJudge:
        """The judge itself, opened on first need; a judge that cannot be opened (a missing key)
        stops the command with its one line."""
        if self.opened is None:
            from deskbench.models.types import ProviderRefused

            try:
                if self.opener is not None:
                    self.opened = self.opener()
                else:
                    from deskbench.tracks.docqa.scoring.llm_judge import make_judge

                    assert self.spec is not None
                    self.opened = make_judge(self.spec, self.cache, self.no_cache, self.concurrency)
            except ProviderRefused:
                raise
            except UserError as exc:  # raised inside the judge's gather, where other errors mean "unscored"
                raise ProviderRefused(str(exc)) from exc
        return self.opened

    def _judged_scorings(self, store: RunStore) -> list[tuple[Scoring, list[StoredItem]]]:
        """The run's docqa scorings made with this judge and these judge settings, oldest first,
        with their items (read once per run)."""
        key = str(store.dir)
        if key not in self._stored:
            from deskbench.models.settings import JUDGE_DEFAULTS, asked_for

            def effective(asked: dict[str, Any]) -> dict[str, Any]:  # a default asked for is the default
                return {**JUDGE_DEFAULTS.given(), **asked}

            sampling = effective(dict(asked_for("judge").given()))
            self._stored[key] = [(s, store.scoring_items(s.id)) for s in store.scorings()
                                 if s.track == "docqa" and s.settings.flags.get("judge") == self.spec
                                 and effective(s.settings.judge_sampling) == sampling]
        return self._stored[key]

    def stored_verdicts(self, store: RunStore, system: str, tasks: Sequence[DocQATask],
                        subs: Sequence[DocQASubmission]) -> dict[AskKey, Judgement]:
        """`system`'s verdicts by this judge that still hold: on the same question, answer and gold
        as now, the episode not run again since (a later scoring's verdict replaces an earlier)."""
        from deskbench.tracks.docqa.scoring.docqa import judge_question

        tasks_by_id = {t.id: t for t in tasks}
        subs_by_id = {s.id: s for s in subs if s.id is not None}
        finished = _finished(store, system)
        out: dict[AskKey, Judgement] = {}
        for scoring, items in self._judged_scorings(store):
            official = bool(scoring.settings.flags.get("official"))
            used = False
            for item in items:
                if item.attempt != 0 or item.system not in finished:
                    continue
                task, sub = tasks_by_id.get(item.task_id), subs_by_id.get(item.task_id)
                judgement = _stored_judgement(item)
                done = finished[item.system].get((item.task_id, 0))
                if task is None or sub is None or judgement is None or done is None or done > scoring.created:
                    continue
                gold, prediction = item.row.get("gold") or {}, item.row.get("prediction") or {}
                if gold.get("answers") != [list(v) for v in task.answer_variants] or prediction.get("answer") != list(sub.answer):
                    continue  # scored against another task file, or another answer
                question = judge_question(task, sub, official)
                if not question:
                    continue
                out[ask_key(question, sub.submitted_answer, task.answer_variants)] = judgement
                used = True
            label = f"{store.dir.name}#{scoring.id}"
            if used and label not in self.scorings:
                self.scorings.append(label)
        return out

    def reusing(self, store: RunStore, system: str, tasks: Sequence[DocQATask],
                subs: Sequence[DocQASubmission]) -> AnswerJudge:
        """The judge for scoring `system`'s answers: its stored verdicts by this judge that still
        hold, the real judge (opened on first need) for the rest; `deskbench report --judge`
        scores with it too."""
        return _Reusing(self.stored_verdicts(store, system, tasks, subs), self)

    def score(self, store: RunStore, system: str, tasks: Sequence[DocQATask],
              subs: Sequence[DocQASubmission]) -> list[ItemScore]:
        """One system's items, one per task in order (missing answers score 0), as `deskbench
        score` scores them: with ANLS*, or with this judge and the run's stored verdicts."""
        from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all

        if self.spec is None:
            return score_all(tasks, subs, ScoreOptions())[0]
        items, _ = score_all(tasks, subs, ScoreOptions(judge=self.reusing(store, system, tasks, subs)))
        self.unscored += sum(i.accuracy_source == "judge_error" for i in items)
        return items

    def summary(self) -> AnalysisScoring:
        if self.spec is None:
            return AnalysisScoring(scorer="ANLS*", rule=ANLS_RULE)
        return AnalysisScoring(scorer="judge", judge=self.spec, rule=JUDGE_RULE, reused=self.reused,
                               asked=self.asked, unscored=self.unscored, scorings=list(self.scorings))

