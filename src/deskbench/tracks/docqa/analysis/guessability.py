"""Guessability (MADQA §3, Appendix E.2): accuracy of the `guess` agent, which sees no document,
split by question type so that random chance on constrained answers is told apart from knowledge
(contamination).

Classes follow the E.2 classification prompt, in its order, as deterministic patterns
(question_class.py); with a model, MADQA Prompt 2 classifies them (classify_model.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.models.types import ChatModel
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.analysis.drift import run_accuracies
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.question_class import CLASSES, QuestionClass, classify_question
from deskbench.tracks.docqa.tasks import DocQATask


class ClassCounts(BaseModel):
    questions: int  # test-set questions of this class
    correct: float  # correct guesses (sum of accuracy)
    accuracy: float | None  # correct / questions
    share_of_correct: float | None  # this class's part of all correct guesses (Table 9 breakdown)


class SystemGuessability(BaseModel):
    system: str
    questions: int
    correct: float
    guessability: float  # correct / questions: accuracy without documents
    by_class: dict[str, ClassCounts]
    # Table 9: half the correct yes/no and binary guesses would be right by chance anyway ...
    random: float
    # ... and correct "other" guesses are recall of facts: memorisation, as a share of the test set.
    contamination: float
    knowledge: float  # guessability - random: every answer that chance does not explain
    chance_baseline: float  # 0.5 x (yes/no + binary questions) / questions: a coin on every one


class GuessabilityReport(BaseModel):
    run: str
    classes: dict[str, QuestionClass]  # task id -> class
    classifier: str = "patterns"  # or the model that classified (MADQA Prompt 2)
    pattern_fallbacks: list[str] = []  # ids the model could not classify: patterns used instead
    systems: list[SystemGuessability]
    scoring: AnalysisScoring | None = None  # what decided correctness


def guessability(
    tasks: Sequence[DocQATask], accuracy: Mapping[str, float | None], system: str = "guess",
    classes: Mapping[str, QuestionClass] | None = None,
) -> SystemGuessability:
    """Guessability of one system over `tasks`; a task without an accuracy counts as wrong (a guess
    that failed to come back is no correct guess)."""
    if not tasks:
        raise UserError("no tasks to measure guessability on")
    cls = classes or {t.id: classify_question(t.question, t.answer_variants) for t in tasks}
    n = len(tasks)
    questions = {c: 0 for c in CLASSES}
    correct = {c: 0.0 for c in CLASSES}
    for t in tasks:
        questions[cls[t.id]] += 1
        correct[cls[t.id]] += accuracy.get(t.id) or 0.0
    total = sum(correct.values())
    by_class: dict[str, ClassCounts] = {
        c: ClassCounts(questions=questions[c], correct=correct[c],
                       accuracy=correct[c] / questions[c] if questions[c] else None,
                       share_of_correct=correct[c] / total if total else None)
        for c in CLASSES
    }
    random = 0.5 * (correct["yes_no"] + correct["binary_choice"]) / n
    return SystemGuessability(
        system=system, questions=n, correct=total, guessability=total / n, by_class=by_class,
        random=random, contamination=correct["other"] / n, knowledge=total / n - random,
        chance_baseline=0.5 * (questions["yes_no"] + questions["binary_choice"]) / n,
    )


def is_guess_system(system: str) -> bool:
    return system.split(":", 1)[0] == "guess"


def load_guessability(run_dir: Path, model: ChatModel | None = None, judging: Judging | None = None) -> GuessabilityReport:
    """Guessability of every `guess` system in a run directory; questions are classified by
    `model` with MADQA's Prompt 2 when one is given, else by the deterministic patterns; answers
    scored by ANLS* or `judging`'s judge."""
    judging = judging or Judging()
    store = RunStore(run_dir, create=False)
    systems = [s for s in store.systems() if is_guess_system(s)]
    if not systems:
        raise UserError(f"the run in {run_dir} has no guess-agent episodes; run 'deskbench run --agent guess' into it")
    tasks = store.tasks_of(DocQATask)
    fallback: list[str] = []
    if model is not None:
        import asyncio

        from deskbench.tracks.docqa.analysis.classify_model import classify_all

        classes, fallback = asyncio.run(classify_all(model, tasks))
    else:
        classes = {t.id: classify_question(t.question, t.answer_variants) for t in tasks}
    out = [guessability(tasks, run_accuracies(store, s, judging), s, classes) for s in systems]
    store.close()
    return GuessabilityReport(run=str(run_dir), classes=classes, systems=out,
                              classifier=model.id if model is not None else "patterns",
                              pattern_fallbacks=fallback, scoring=judging.summary())
