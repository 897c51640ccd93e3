"""Compare systems of one track on the tasks they all ran (`deskbench compare`, issue 21 item 4).

Input: each system's `ItemOutcome`s (runs/outcomes.py), so the same code compares docqa,
analytics and deliverables systems. Output: one `Comparison`, the same shape whatever the number
of systems (what `--json` prints and the HTML page draws).

Rules:

* Attempt 0 only. Every system has an attempt 0 of every task it ran; later attempts (pass@k
  runs) would weigh a system's tasks unevenly and pair nothing on the other side. They are
  counted per system (`n_later_attempts`) and left out.
* The leaderboard is over the common tasks: those every system ran (has an attempt-0 item for,
  scored or not). A system's other tasks are listed (`excluded`), never mixed in, so a 4-task
  and a 60-task system are ranked on the same tasks.
* Unscored items (a judge that failed, a chart without a vision judge, an ungraded deliverable)
  are neither right nor wrong: a system's row uses its scored common tasks and counts the rest;
  a pair's tests use only the common tasks both systems have scored (`n_paired`) and count the
  others (`n_unpaired`).
* Accuracy is the share of correct items with its Wilson 95% interval; the mean score has a
  percentile bootstrap interval (seeded, `resamples`).
* Pairs (a before b in the order the systems were given):
  - exact McNemar on the binary outcomes (`a_only` = b10: a correct, b not; `b_only` = b01);
    Holm's step-down adjustment across all pairs (`p_holm`), the family being every pair with
    at least one paired task;
  - a paired bootstrap of the per-task score differences a - b: the mean difference and its
    percentile interval (task indices resampled, seeded);
  - effect sizes, both named: `mean_diff` itself (in score units: what a reader needs to judge
    whether a difference matters, with its interval), and Cohen's d with the pooled SD of the two
    systems' scores on the paired tasks (analysis/stats.cohens_d; the d the deliverables tables
    report, so the two agree; the numerator is exactly the mean paired difference). Not d_z
    (mean / SD of the differences): it grows as the two systems agree more, so it measures the
    test's power rather than the size of the gap. `odds_ratio` = b10 / b01, the conditional odds
    ratio McNemar tests (None when b01 = 0).
* Reliability across attempts (`reliability`, issue 37): when every system ran each common task
  at least twice, k = the fewest attempts any system has of them (each system's first k count;
  its later ones are left out, so all are held to the same k). Per system: pass^k as tau-bench
  defines it (scoring/attempts.py: C(c, k) / C(n, k) over a task's n scored attempts, c
  successful; a success is the track's `correct`), with its Wilson 95% interval (with n = k a
  task's pass^k is 0 or 1), pass@k (best of k) and avg@k, the mean per-task success rate and the
  consistency of answers. Pairs: the same tests as above on the binary "all k attempts correct"
  over the common tasks both systems have k scored attempts of: exact McNemar, Holm across the
  pairs, a paired bootstrap of the pass^k difference.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from pydantic import BaseModel

from deskbench.analysis.stats import (
    bootstrap_mean_ci,
    cohens_d,
    holm,
    mcnemar_exact,
    wilson_interval,
)
from deskbench.runs.outcomes import ItemOutcome
from deskbench.scoring.attempts import SUCCESS_RULE, Attempt, attempt_metrics

ALPHA = 0.05


@dataclass
class SystemOutcomes:
    """One system's outcomes, as given to `compare`."""

    label: str  # unique among the systems compared
    system: str  # the name stored in the run
    run_dir: str
    outcomes: list[ItemOutcome]



def system_labels(pairs: Sequence[tuple[Path, str]]) -> list[str]:
    """Labels for (run directory, system) pairs: the system name; `system (rundir-name)` when runs
    share the name; `system (run path)` when their directories share a name too (as the report
    names them)."""
    names = Counter(s for _, s in pairs)
    short = [s if names[s] == 1 else f"{s} ({d.name})" for d, s in pairs]
    clashes = Counter(short)
    return [f"{s} ({d})" if clashes[label] > 1 else label for (d, s), label in zip(pairs, short, strict=True)]

class SystemInfo(BaseModel):
    label: str
    system: str
    run_dir: str
    n_tasks: int  # tasks with an attempt-0 item
    n_unscored: int  # of those, unscored
    n_later_attempts: int  # items of attempts after the first, left out


class Excluded(BaseModel):
    """A system's tasks outside the common set (ran by it, not by every system)."""

    system: str
    task_ids: list[str]


class LeaderboardRow(BaseModel):
    rank: int
    system: str
    n_common: int  # common tasks (the same for every row)
    n_scored: int  # common tasks this system has scored
    n_unscored: int  # common tasks left unscored: out of its accuracy and mean, never wrong
    n_correct: int
    accuracy: float | None  # n_correct / n_scored
    accuracy_ci: tuple[float, float] | None  # Wilson 95%
    mean_score: float | None
    mean_score_ci: tuple[float, float] | None  # percentile bootstrap 95%


class PairRow(BaseModel):
    a: str
    b: str
    n_common: int
    n_paired: int  # common tasks both have scored: what every test of the pair uses
    n_unpaired: int  # common tasks one or both left unscored
    both: int
    a_only: int  # b10: a correct, b wrong
    b_only: int  # b01: b correct, a wrong
    neither: int
    mcnemar_p: float | None  # exact, two-sided; None without a paired task
    p_holm: float | None  # Holm across the pairs
    mean_diff: float | None  # mean over paired tasks of score a - score b
    mean_diff_ci: tuple[float, float] | None  # paired percentile bootstrap 95%
    cohens_d: float | None  # pooled-SD d of the paired scores; None when undefined
    odds_ratio: float | None  # a_only / b_only; None when b_only = 0


class ReliabilityRow(BaseModel):
    """One system's reliability over the common tasks' first k attempts."""

    system: str
    n_tasks: int  # common tasks with k scored attempts (pass^k's tasks)
    pass_hat: float | None  # pass^k
    pass_hat_ci: tuple[float, float] | None  # Wilson 95% (a task's pass^k is 0 or 1 with n = k)
    curve: list[float | None]  # pass^j, j = 1 .. k
    passk: float | None  # pass@k: the best of k, averaged
    avgk: float | None
    success_rate: float | None  # mean per-task success rate
    solved: list[int]  # tasks succeeded in exactly c of k attempts, c = 0 .. k
    consistency: float | None  # share of tasks whose k answers agree
    n_consistency: int  # tasks with an answer known for each attempt


class ReliabilityPair(BaseModel):
    """a against b on "all k attempts correct", over the common tasks both have k scored attempts of."""

    a: str
    b: str
    n_paired: int
    both: int
    a_only: int  # a all correct, b not
    b_only: int
    neither: int
    mcnemar_p: float | None
    p_holm: float | None  # Holm across the reliability pairs
    mean_diff: float | None  # pass^k of a - pass^k of b on the paired tasks
    mean_diff_ci: tuple[float, float] | None  # paired percentile bootstrap 95%


class ReliabilityComparison(BaseModel):
    """Reliability across attempts: every system's pass^k and the pairwise tests on it."""

    k: int
    rule: str = SUCCESS_RULE
    rows: list[ReliabilityRow]  # best pass^k first
    pairs: list[ReliabilityPair]  # every pair, in the order of `systems`


class Comparison(BaseModel):
    """What `deskbench compare --json` prints: one shape for any number of systems and runs."""

    track: str
    attempt: int = 0
    alpha: float = ALPHA
    resamples: int
    seed: int
    systems: list[SystemInfo]
    common_tasks: list[str]
    excluded: list[Excluded]  # one entry per system, in the order of `systems`
    leaderboard: list[LeaderboardRow]  # best first
    pairs: list[PairRow]  # every pair, in the order of `systems`
    method: str  # how correct and score are defined for this track, in words
    notes: list[str]
    reliability: ReliabilityComparison | None = None  # every system ran each common task twice or more


def _none(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _ci(ci: tuple[float, float]) -> tuple[float, float] | None:
    return None if math.isnan(ci[0]) or math.isnan(ci[1]) else (float(ci[0]), float(ci[1]))


def _first_attempts(s: SystemOutcomes) -> dict[str, ItemOutcome]:
    first: dict[str, ItemOutcome] = {}
    for o in s.outcomes:
        if o.attempt != 0:
            continue
        if o.task_id in first:
            raise ValueError(f"{s.label}: two attempt-0 items for task {o.task_id!r}")
        first[o.task_id] = o
    return first


def _score(o: ItemOutcome) -> float:
    """A scored item's score (ItemOutcome's validator gives every scored item one)."""
    if o.score is None:
        raise ValueError(f"{o.system} / {o.task_id}: a scored item without a score")
    return float(o.score)


def _row(label: str, items: list[ItemOutcome], n_common: int, resamples: int, seed: int) -> LeaderboardRow:
    scored = [o for o in items if o.status == "scored"]
    correct = sum(bool(o.correct) for o in scored)
    scores = [_score(o) for o in scored]
    return LeaderboardRow(
        rank=0, system=label, n_common=n_common, n_scored=len(scored), n_unscored=len(items) - len(scored),
        n_correct=correct, accuracy=correct / len(scored) if scored else None,
        accuracy_ci=_ci(wilson_interval(correct, len(scored))) if scored else None,
        mean_score=sum(scores) / len(scores) if scores else None,
        mean_score_ci=_ci(bootstrap_mean_ci(scores, resamples=resamples, seed=seed)) if scores else None,
    )


def _pair(a: str, b: str, xa: list[ItemOutcome], xb: list[ItemOutcome], resamples: int, seed: int) -> PairRow:
    paired = [(x, y) for x, y in zip(xa, xb, strict=True) if x.status == "scored" and y.status == "scored"]
    m = mcnemar_exact([bool(x.correct) for x, _ in paired], [bool(y.correct) for _, y in paired])
    sa = [_score(x) for x, _ in paired]
    sb = [_score(y) for _, y in paired]
    diffs = [p - q for p, q in zip(sa, sb, strict=True)]
    return PairRow(
        a=a, b=b, n_common=len(xa), n_paired=len(paired), n_unpaired=len(xa) - len(paired),
        both=m.both, a_only=m.a_only, b_only=m.b_only, neither=m.neither,
        mcnemar_p=m.p if paired else None, p_holm=None,
        mean_diff=sum(diffs) / len(diffs) if diffs else None,
        mean_diff_ci=_ci(bootstrap_mean_ci(diffs, resamples=resamples, seed=seed)) if diffs else None,
        cohens_d=_none(cohens_d(sa, sb)),
        odds_ratio=m.a_only / m.b_only if m.b_only else None,
    )


def _attempts_of(s: SystemOutcomes, common: set[str]) -> dict[str, dict[int, ItemOutcome]]:
    """A system's outcomes of the common tasks, by task and attempt (a repeated one keeps the last)."""
    out: dict[str, dict[int, ItemOutcome]] = {}
    for o in s.outcomes:
        if o.task_id in common:
            out.setdefault(o.task_id, {})[o.attempt] = o
    return out


def _all_correct(attempts: dict[int, ItemOutcome], k: int) -> bool | None:
    """Whether the first k attempts were all correct; None unless all k are scored."""
    first = [attempts.get(a) for a in range(k)]
    if any(o is None or o.status != "scored" for o in first):
        return None
    return all(bool(o.correct) for o in first if o is not None)


def reliability(systems: Sequence[SystemOutcomes], common: Sequence[str], *, resamples: int = 1000,
                seed: int = 0) -> ReliabilityComparison | None:
    """pass^k of every system over `common` and the pairs' tests on it (see the module docstring);
    None unless every system has at least two attempts of the common tasks."""
    common_set = set(common)
    by_system = [_attempts_of(s, common_set) for s in systems]
    runs = [max((a + 1 for t in b.values() for a in t), default=0) for b in by_system]
    k = min(runs, default=0)
    if k < 2:
        return None
    rows = []
    for s, b in zip(systems, by_system, strict=True):
        am = attempt_metrics([Attempt(o.task_id, a, o.score, o.correct, o.answer)
                              for t in common if t in b for a, o in b[t].items()], k)
        r = am.reliability
        hits = r.solved[k] if r.n_tasks else 0
        rows.append(ReliabilityRow(
            system=s.label, n_tasks=r.n_tasks, pass_hat=r.pass_hat,
            pass_hat_ci=_ci(wilson_interval(hits, r.n_tasks)) if r.n_tasks else None, curve=r.curve,
            passk=am.passk, avgk=am.avgk, success_rate=r.success_rate, solved=r.solved,
            consistency=r.consistency, n_consistency=r.n_consistency))
    rows.sort(key=lambda r: (-(r.pass_hat if r.pass_hat is not None else -1.0), r.system))
    pairs = []
    for i, j in combinations(range(len(systems)), 2):
        both_k = [(x, y) for t in common
                  if (x := _all_correct(by_system[i].get(t, {}), k)) is not None
                  and (y := _all_correct(by_system[j].get(t, {}), k)) is not None]
        m = mcnemar_exact([x for x, _ in both_k], [y for _, y in both_k])
        diffs = [float(x) - float(y) for x, y in both_k]
        pairs.append(ReliabilityPair(
            a=systems[i].label, b=systems[j].label, n_paired=len(both_k), both=m.both, a_only=m.a_only,
            b_only=m.b_only, neither=m.neither, mcnemar_p=m.p if both_k else None, p_holm=None,
            mean_diff=sum(diffs) / len(diffs) if diffs else None,
            mean_diff_ci=_ci(bootstrap_mean_ci(diffs, resamples=resamples, seed=seed)) if diffs else None))
    tested = [(n, p.mcnemar_p) for n, p in enumerate(pairs) if p.mcnemar_p is not None]
    for (n, _), q in zip(tested, holm([p for _, p in tested]), strict=True):
        pairs[n].p_holm = q
    return ReliabilityComparison(k=k, rows=rows, pairs=pairs)


def compare(systems: Sequence[SystemOutcomes], *, track: str, method: str = "", resamples: int = 1000,
            seed: int = 0) -> Comparison:
    """The leaderboard over the common tasks and every pairwise test (see the module docstring)."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    labels = [s.label for s in systems]
    if len(set(labels)) != len(labels):
        raise ValueError(f"system labels must be unique: {labels}")
    firsts = [_first_attempts(s) for s in systems]
    order = list(dict.fromkeys(t for f in firsts for t in f))  # first-seen task order
    common = [t for t in order if all(t in f for f in firsts)]
    common_set = set(common)
    infos = [SystemInfo(label=s.label, system=s.system, run_dir=s.run_dir, n_tasks=len(f),
                        n_unscored=sum(o.status == "unscored" for o in f.values()),
                        n_later_attempts=sum(o.attempt != 0 for o in s.outcomes))
             for s, f in zip(systems, firsts, strict=True)]
    excluded = [Excluded(system=s.label, task_ids=[t for t in f if t not in common_set])
                for s, f in zip(systems, firsts, strict=True)]
    rows = [_row(s.label, [f[t] for t in common], len(common), resamples, seed)
            for s, f in zip(systems, firsts, strict=True)]
    rows.sort(key=lambda r: (-(r.accuracy if r.accuracy is not None else -1.0),
                             -(r.mean_score if r.mean_score is not None else -1.0), r.system))
    rows = [r.model_copy(update={"rank": k}) for k, r in enumerate(rows, 1)]
    pairs = [_pair(systems[i].label, systems[j].label, [firsts[i][t] for t in common],
                   [firsts[j][t] for t in common], resamples, seed)
             for i, j in combinations(range(len(systems)), 2)]
    tested = [(k, p.mcnemar_p) for k, p in enumerate(pairs) if p.mcnemar_p is not None]
    for (k, _), q in zip(tested, holm([p for _, p in tested]), strict=True):
        pairs[k].p_holm = q
    notes = []
    if not common:
        notes.append("no task was run by every system: nothing to compare")
    for e in excluded:
        if e.task_ids:
            notes.append(f"{e.system}: {len(e.task_ids)} task(s) not run by every system, left out: "
                         + ", ".join(e.task_ids[:10]) + (" …" if len(e.task_ids) > 10 else ""))
    later = sum(i.n_later_attempts for i in infos)
    held = reliability(systems, common, resamples=resamples, seed=seed)
    if later:
        notes.append(f"{later} item(s) of attempts after the first are left out of the leaderboard and the pairs "
                     "(attempt 0)" + (f"; the reliability table reads the first {held.k} attempts of each task"
                                      if held is not None else ": not every system ran each task twice, so "
                                      "there is no pass^k"))
    unpaired = sum(p.n_unpaired for p in pairs)
    if unpaired:
        notes.append("common tasks unscored for one side of a pair are left out of that pair's tests "
                     "(n_unpaired), never counted as wrong")
    return Comparison(track=track, resamples=resamples, seed=seed, systems=infos, common_tasks=common,
                      excluded=excluded, leaderboard=rows, pairs=pairs, method=method, notes=notes,
                      reliability=held)

