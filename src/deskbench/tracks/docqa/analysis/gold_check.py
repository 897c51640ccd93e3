"""The oracle gold-answer check (MADQA §2.2): "We provided GPT-5 with the human-annotated oracle
evidence pages. If the model failed to answer correctly using the perfect context, the instance was
flagged for manual check."

deskbench's `oracle` agent is that pass (the model given the task's gold evidence pages, nothing
else): run it into a run directory (`deskbench run --agent oracle --model MODEL`), and this check
lists the tasks whose gold answer the oracle's answer disagrees with (not correct: ANLS* below 0.5,
or with --judge the judge's score below 0.5, as H.3). A flag is a task to look at by hand, not a
verdict on the gold: the oracle may be wrong. So each flagged task also names the run's other
systems that did answer it correctly (an answer others found is more likely the oracle's miss).

It also lists the tasks no system of the run answered correctly, the set §2.2's later review
went through ("the questions that were not answered correctly by any of the tested baseline
models or any of real humans").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.analysis.judged import CORRECT_AT, AnalysisScoring, Judging
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, ItemScore

ORACLE = "oracle"
METHOD = ("MADQA §2.2: the oracle (a model given the gold evidence pages) answering incorrectly flags the "
          "task's gold answer for a manual check")


class FlaggedTask(BaseModel):
    id: str
    question: str
    gold: list[list[str]]  # the answer variants
    evidence: list[tuple[str, int]]
    oracle_answer: list[str]
    accuracy: float  # the oracle's: below 0.5
    verdict: str | None = None  # the judge's, when judged
    solved_by: list[str]  # the run's other systems that answered it correctly


class OracleCheck(BaseModel):
    system: str
    checked: int  # tasks the oracle answered and that were scored
    flagged: list[FlaggedTask]
    not_answered: list[str]  # tasks without an answer of the oracle (a failed episode, or not run): unchecked
    unscored: list[str]  # the judge failed on them: unchecked


class GoldCheckReport(BaseModel):
    run: str
    method: str = METHOD
    oracles: list[OracleCheck]
    systems: list[str]  # every system of the run, each scored
    unsolved: list[str]  # tasks no system answered correctly (among those some system answered)
    scoring: AnalysisScoring | None = None


def is_oracle(system: str, agent: str | None = None) -> bool:
    """An oracle system: its recorded agent, else its name's agent part (`oracle:MODEL`)."""
    return (agent or system.split(":", 1)[0]) == ORACLE


def check_oracle(system: str, tasks: Sequence[DocQATask], subs: Sequence[DocQASubmission],
                 items: Sequence[ItemScore], others: dict[str, dict[str, float | None]]) -> OracleCheck:
    """One oracle's flags: `items` are its scores, one per task in order; `others` every other
    system's accuracy by task."""
    answered = {s.id: s for s in subs if s.id is not None}
    flagged: list[FlaggedTask] = []
    not_answered: list[str] = []
    unscored: list[str] = []
    checked = 0
    for task, item in zip(tasks, items, strict=True):
        sub = answered.get(task.id)
        if sub is None:
            not_answered.append(task.id)
            continue
        if item.accuracy is None:
            unscored.append(task.id)
            continue
        checked += 1
        if item.accuracy >= CORRECT_AT:
            continue
        flagged.append(FlaggedTask(
            id=task.id, question=task.question, gold=[list(v) for v in task.answer_variants],
            evidence=list(dict.fromkeys((e.document, e.page) for e in task.evidence)),
            oracle_answer=list(sub.answer), accuracy=item.accuracy, verdict=item.judge_verdict,
            solved_by=[s for s, acc in others.items() if (a := acc.get(task.id)) is not None and a >= CORRECT_AT],
        ))
    return OracleCheck(system=system, checked=checked, flagged=flagged, not_answered=not_answered, unscored=unscored)


def unsolved(tasks: Sequence[DocQATask], accuracy: dict[str, dict[str, float | None]],
             answered: dict[str, set[str]]) -> list[str]:
    """Tasks some system answered and none answered correctly."""
    out = []
    for task in tasks:
        tried = [s for s in accuracy if task.id in answered[s]]
        scores = [accuracy[s].get(task.id) for s in tried]
        if tried and not any(a is not None and a >= CORRECT_AT for a in scores):
            out.append(task.id)
    return out


def load_gold_check(run_dir: Path, oracles: Sequence[str] = (), judging: Judging | None = None) -> GoldCheckReport:
    """The check over a run: its oracle systems (or the `oracles` named) against the gold answers,
    answers scored by ANLS* or `judging`'s judge (stored verdicts reused)."""
    from deskbench.runs.identity import stored_identities
    from deskbench.tracks.docqa.episodes import run_submissions

    judging = judging or Judging()
    store = RunStore(run_dir, create=False)
    systems = store.systems()
    if not systems:
        raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run --agent oracle' into it first")
    identities = stored_identities(store)
    if oracles:
        unknown = [s for s in oracles if s not in systems]
        if unknown:
            raise UserError(f"--system {unknown[0]}: no such system in {run_dir}; it has {', '.join(systems)}")
        chosen = list(oracles)
    else:
        chosen = [s for s in systems if is_oracle(s, identities[s].config.agent if s in identities else None)]
    if not chosen:
        raise UserError(f"the run in {run_dir} has no oracle system (its systems: {', '.join(systems)}); run "
                        "'deskbench run --agent oracle --model MODEL' into it, or name the system to use with --system")
    tasks = store.tasks_of(DocQATask)
    subs: dict[str, list[DocQASubmission]] = {}
    items: dict[str, list[ItemScore]] = {}
    for system in systems:
        subs[system] = run_submissions(store, system)[0]
        items[system] = judging.score(store, system, tasks, subs[system])
    store.close()
    accuracy = {s: {i.id: i.accuracy for i in items[s]} for s in systems}
    answered = {s: {x.id for x in subs[s] if x.id is not None} for s in systems}
    checks = [check_oracle(o, tasks, subs[o], items[o], {s: a for s, a in accuracy.items() if s != o})
              for o in chosen]
    return GoldCheckReport(run=str(run_dir), oracles=checks, systems=systems,
                           unsolved=unsolved(tasks, accuracy, answered), scoring=judging.summary())
