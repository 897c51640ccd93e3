"""Judges held to account: one run graded by several judges, and how much its numbers depend on which.

Why: an LLM judge decides what counts as correct, and a paper's figure measured with one judge
is often re-scored with another (cheaper, newer, another provider's). `deskbench score RUN
--judge A --judge B` scores the run once per judge (each a stored scoring of its own, the judges'
replies from the response cache when asked before: nothing is paid twice) and then reports here:

- agreement on each item's verdict (correct or wrong, nominal): Cohen's kappa for each pair of
  judges (Cohen 1960: (p_o - p_e) / (1 - p_e), chance from each judge's own marginals) and
  Krippendorff's alpha over all of them (Krippendorff 2011, "Computing Krippendorff's
  Alpha-Reliability": the coincidence matrix, any number of judges, an item a judge left
  unscored is a missing value); when a track gives partial scores (docqa's judge: correct 1,
  partial 0.5, incorrect 0), agreement on the scores too: alpha ordinal and the quadratic-weighted
  kappa MADQA measured its judge with (5 score levels or fewer), else alpha interval;
- the items they disagree on, each judge's verdict;
- each system's accuracy under each judge, its spread, and the ranking under each judge;
- the model version each provider returned to each judge (the reply's `model`: a judge spec like
  openai/gpt-4.1 names a family, the reply names the snapshot that answered).

The statistics are plain functions (`cohen_kappa`, `krippendorff_alpha`) so that they are tested
against published examples; `agreement` builds the report from stored items."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import combinations
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.contract.track import Track
    from deskbench.runs.outcomes import ItemOutcome
    from deskbench.runs.scorings import Scoring, StoredItem
    from deskbench.runs.store import RunStore
    from deskbench.runs.track import RunRequest

Level = Literal["nominal", "ordinal", "interval"]
_Delta = Callable[[Hashable, Hashable], float]  # a level's squared distance
EpisodeKey = tuple[str, str, int]  # task, system, attempt
SHOWN_DISAGREEMENTS = 10  # the terminal lists this many; --json lists every one
MAX_ORDINAL_LEVELS = 5  # partial scores with this many distinct values or fewer are ranked levels, more a scale


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels of the same items, in order. None when chance
    agreement is 1 (both gave one and the same label to every item: kappa is undefined)."""
    if len(a) != len(b):
        raise ValueError(f"two raters label the same items: {len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    chance = sum(ca[label] * cb[label] for label in ca) / (n * n)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def krippendorff_alpha(units: Sequence[Sequence[Hashable | None]], level: Level = "nominal") -> float | None:
    """Krippendorff's alpha of `units` (one row per item: each rater's value, None when that
    rater gave none). Only items with two values or more are pairable. `level`: nominal (any two
    different values disagree fully), ordinal (values ranked; the distance counts the values
    between them, by how often each was used), interval (squared difference of numbers). None
    when there is nothing to compare or no variation at all (every value the same: alpha is
    undefined)."""
    rows = [[v for v in unit if v is not None] for unit in units]
    rows = [r for r in rows if len(r) >= 2]
    coincidence: defaultdict[tuple[Hashable, Hashable], float] = defaultdict(float)
    for values in rows:
        weight = 1.0 / (len(values) - 1)
        for i, c in enumerate(values):
            for j, k in enumerate(values):
                if i != j:
                    coincidence[(c, k)] += weight
    totals: defaultdict[Hashable, float] = defaultdict(float)
    for (c, _k), o in coincidence.items():
        totals[c] += o
    n = sum(totals.values())
    if n <= 1:
        return None
    values = sorted(totals, key=_order) if level != "nominal" else list(totals)
    delta = _distance(values, totals, level)
    observed = sum(o * delta(c, k) for (c, k), o in coincidence.items())
    expected = sum(totals[c] * totals[k] * delta(c, k) for c in values for k in values)
    if expected == 0:
        return None
    return 1.0 - (n - 1) * observed / expected


def _order(value: Hashable) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    raise ValueError(f"ordinal and interval alpha need numbers, got {value!r}")


def _distance(values: list[Hashable], totals: Mapping[Hashable, float], level: Level) -> _Delta:
    """The squared distance δ² between two values at `level` (Krippendorff 2011, section B)."""
    if level == "nominal":
        return lambda c, k: 0.0 if c == k else 1.0
    if level == "interval":
        return lambda c, k: (_order(c) - _order(k)) ** 2
    rank = {v: i for i, v in enumerate(values)}

    def ordinal(c: Hashable, k: Hashable) -> float:
        lo, hi = sorted((rank[c], rank[k]))
        between = sum(totals[values[g]] for g in range(lo, hi + 1))
        return (between - (totals[c] + totals[k]) / 2) ** 2

    return ordinal


# -- the report --------------------------------------------------------------------------------

Verdict = Literal["correct", "wrong", "unscored"]


class JudgeItem(BaseModel):
    """One item as one judge's scoring left it (None: unscored)."""

    score: float | None = None
    correct: bool | None = None

    @property
    def verdict(self) -> Verdict:
        return "unscored" if self.correct is None else ("correct" if self.correct else "wrong")


class PairAgreement(BaseModel):
    judges: tuple[str, str]
    n: int  # items both scored
    agreement: float | None  # share of those with the same verdict
    kappa: float | None
    weighted_kappa: float | None = None  # quadratic-weighted, on the score levels (ordinal scores only)


class Disagreement(BaseModel):
    task_id: str
    system: str
    attempt: int
    verdicts: dict[str, Verdict]  # judge -> verdict
    scores: dict[str, float | None]


class SystemUnderJudges(BaseModel):
    system: str
    accuracy: dict[str, float | None]  # judge -> share of scored items judged correct
    scored: dict[str, int]  # judge -> items it scored
    rank: dict[str, int | None]  # judge -> place (1 best; ties share the better place)

    @property
    def spread(self) -> float | None:
        """Highest minus lowest accuracy across the judges (None: fewer than two scored it)."""
        known = [a for a in self.accuracy.values() if a is not None]
        return max(known) - min(known) if len(known) >= 2 else None


class JudgeAgreement(BaseModel):
    """How far a run's verdicts and numbers depend on its judge."""

    judges: list[str]
    scorings: dict[str, int | None] = Field(default_factory=dict)  # judge -> the stored scoring read
    reused: list[str] = Field(default_factory=list)  # judges whose stored scoring still held: nothing asked
    versions: dict[str, dict[str, list[str]]] = Field(default_factory=dict)  # judge -> model id -> returned versions
    items: int = 0  # items at least two judges scored (alpha's pairable units)
    partly_unscored: int = 0  # items some judge scored and another could not
    alpha: float | None = None  # Krippendorff's alpha, nominal, on correct/wrong
    alpha_scores: float | None = None  # on the scores, at `scores_level`; only when some score is partial
    scores_level: Level | None = None  # ordinal (a few levels, e.g. 0 / 0.5 / 1) or interval
    pairs: list[PairAgreement] = Field(default_factory=list)
    disagreements: list[Disagreement] = Field(default_factory=list)
    systems: list[SystemUnderJudges] = Field(default_factory=list)

    @property
    def ranking_moves(self) -> bool:
        return any(len({r for r in s.rank.values() if r is not None}) > 1 for s in self.systems)


def agreement(verdicts: Mapping[str, Mapping[EpisodeKey, JudgeItem]], *,
              scorings: Mapping[str, int | None] | None = None,
              versions: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
              reused: Sequence[str] = ()) -> JudgeAgreement:
    """The report over `verdicts` (judge -> each item it was asked about, scored or not)."""
    judges = list(verdicts)
    keys = sorted({k for items in verdicts.values() for k in items}, key=lambda k: (k[1], k[0], k[2]))
    units = [[_correct(verdicts[j].get(k)) for j in judges] for k in keys]
    score_units = [[_score(verdicts[j].get(k)) for j in judges] for k in keys]
    levels = sorted({s for unit in score_units for s in unit if s is not None})
    partial = any(s not in (0.0, 1.0) for s in levels)
    scores_level: Level | None = (None if not partial else "ordinal" if len(levels) <= MAX_ORDINAL_LEVELS
                                  else "interval")
    report = JudgeAgreement(
        judges=judges, scorings=dict(scorings or {}), reused=list(reused),
        versions={j: {m: sorted(v) for m, v in (versions or {}).get(j, {}).items()} for j in judges},
        items=sum(1 for u in units if sum(v is not None for v in u) >= 2),
        partly_unscored=sum(1 for u in units if 0 < sum(v is not None for v in u) < len(judges)),
        alpha=krippendorff_alpha(units, "nominal"),
        alpha_scores=krippendorff_alpha(score_units, scores_level) if scores_level else None,
        scores_level=scores_level,
    )
    for a, b in combinations(range(len(judges)), 2):
        both = [(u[a], u[b]) for u in units if u[a] is not None and u[b] is not None]
        weighted = None
        if scores_level == "ordinal" and len(levels) >= 2:
            from deskbench.scoring.judge_calibration import quadratic_weighted_kappa

            rank = {v: i for i, v in enumerate(levels)}
            graded = [(rank[x], rank[y]) for u in score_units if (x := u[a]) is not None and (y := u[b]) is not None]
            weighted = quadratic_weighted_kappa([x for x, _ in graded], [y for _, y in graded], len(levels))
        report.pairs.append(PairAgreement(
            judges=(judges[a], judges[b]), n=len(both),
            agreement=sum(x == y for x, y in both) / len(both) if both else None,
            kappa=cohen_kappa([x for x, _ in both], [y for _, y in both]), weighted_kappa=weighted))
    for key, unit in zip(keys, units, strict=True):
        if len({v for v in unit if v is not None}) > 1:
            items = [verdicts[j].get(key) or JudgeItem() for j in judges]
            report.disagreements.append(Disagreement(
                task_id=key[0], system=key[1], attempt=key[2],
                verdicts={j: i.verdict for j, i in zip(judges, items, strict=True)},
                scores={j: i.score for j, i in zip(judges, items, strict=True)}))
    report.systems = _systems(verdicts, judges)
    return report


def _correct(item: JudgeItem | None) -> bool | None:
    return None if item is None else item.correct


def _score(item: JudgeItem | None) -> float | None:
    return None if item is None or item.correct is None else item.score


def _systems(verdicts: Mapping[str, Mapping[EpisodeKey, JudgeItem]], judges: list[str]) -> list[SystemUnderJudges]:
    names = sorted({k[1] for items in verdicts.values() for k in items})
    rows = []
    for name in names:
        accuracy: dict[str, float | None] = {}
        scored: dict[str, int] = {}
        for j in judges:
            judged = [i for k, i in verdicts[j].items() if k[1] == name and i.correct is not None]
            scored[j] = len(judged)
            accuracy[j] = sum(bool(i.correct) for i in judged) / len(judged) if judged else None
        rows.append(SystemUnderJudges(system=name, accuracy=accuracy, scored=scored, rank={}))
    for j in judges:
        for row in rows:
            mine = row.accuracy[j]
            row.rank[j] = None if mine is None else 1 + sum(
                1 for other in rows if (o := other.accuracy[j]) is not None and o > mine)
    return rows


def items_of(stored: Sequence[StoredItem] | Sequence[ItemOutcome]) -> dict[EpisodeKey, JudgeItem]:
    """A scoring's items (stored, or a track's outcomes) as verdicts by episode."""
    return {(i.task_id, i.system, i.attempt): JudgeItem(score=i.score, correct=i.correct)
            if i.status == "scored" else JudgeItem() for i in stored}


# -- the terminal --------------------------------------------------------------------------------

def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def lines(report: JudgeAgreement) -> list[str]:
    """The report as plain lines (rich markup escaped by the caller's printing)."""
    n = len(report.judges)
    alpha = f"Krippendorff's alpha (nominal, correct/wrong) {_num(report.alpha)}"
    if report.scores_level is not None:
        alpha += f"; on the scores ({report.scores_level}) {_num(report.alpha_scores)}"
    out = [f"judge agreement ({n} judges, {report.items} items scored by at least two): {alpha}"
           + (f"; {report.partly_unscored} items unscored by some judge (left out of the pairs)"
              if report.partly_unscored else "")]
    for p in report.pairs:
        agreed = "–" if p.agreement is None else f"{round(p.agreement * p.n)} of {p.n} items ({_pct(p.agreement)})"
        weighted = "" if p.weighted_kappa is None else f" (quadratic-weighted on the scores {_num(p.weighted_kappa)})"
        out.append(f"  {p.judges[0]} vs {p.judges[1]}: Cohen's kappa {_num(p.kappa)}{weighted}, same verdict on {agreed}")
    for j in report.judges:
        stored = report.scorings.get(j)
        if j in report.reused:
            out.append(f"  {j}: the verdicts of stored scoring #{stored}, still current: nothing asked again "
                       "(the version of each call is in the judge transcripts)")
            continue
        got = report.versions.get(j) or {}
        said = "; ".join(f"{m}: {', '.join(v) or '(none returned)'}" for m, v in got.items()) or "no model call made"
        out.append(f"  {j}: returned model {said}" + (f" (scoring #{stored})" if stored is not None else ""))
    if report.systems:
        out.append("accuracy by judge (share of scored items judged correct, every attempt; rank in brackets):")
        for s in report.systems:
            cells = ", ".join(f"{j} {_pct(s.accuracy[j])} [{s.rank[j] or '–'}]" for j in report.judges)
            spread = "" if s.spread is None else f"; spread {100 * s.spread:.1f} points"
            out.append(f"  {s.system}: {cells}{spread}")
        moved = [s.system for s in report.systems if len({r for r in s.rank.values() if r is not None}) > 1]
        out.append(f"ranking: moves between judges for {', '.join(moved)}" if moved
                   else "ranking: the same under every judge")
    if report.disagreements:
        out.append(f"items the judges disagree on ({len(report.disagreements)}"
                   + (f", the first {SHOWN_DISAGREEMENTS}; --json lists all" if len(report.disagreements)
                      > SHOWN_DISAGREEMENTS else "") + "):")
        for d in report.disagreements[:SHOWN_DISAGREEMENTS]:
            said = ", ".join(f"{j} {v}" for j, v in d.verdicts.items())
            out.append(f"  {d.task_id} ({d.system}, attempt {d.attempt}): {said}")
    else:
        out.append("items the judges disagree on: none")
    return out


# -- `deskbench score RUN --judge A --judge B` -------------------------------------------------------

def check_judges(judges: Sequence[str], *, run_dir: bool, items_out: bool, scorer: bool) -> None:
    """Several judges: only on a run directory, each once, with the track's own scorer."""
    seen = [j for j, c in Counter(judges).items() if c > 1]
    if seen:
        raise UserError(f"--judge {seen[0]} is given twice; give each judge once")
    if not run_dir:
        raise UserError("several --judge compare judges on a run directory; a predictions file takes one --judge")
    if items_out:
        raise UserError("--items-out writes one judge's items: give one --judge with it (each judge's items are "
                        "kept in the run's stored scorings)")
    if scorer:
        raise UserError("--scorer replaces the track's judge: give one scorer or several --judge, not both")


def score_with_judges(track: Track, store: RunStore, systems: Sequence[str], judges: Sequence[str],
                      request: RunRequest, *, as_json: bool) -> JudgeAgreement:
    """Score the run once per judge, as `score --judge J` would (the track's tables, a stored
    scoring each), then report their agreement. --json: one document, each judge's report as
    `score --json` gives it under "judges", the agreement under "agreement"."""
    from dataclasses import replace

    from rich.markup import escape

    from deskbench.console import out
    from deskbench.runs.track_outcomes import show_scores
    from deskbench.scoring.judge_log import returned_versions

    verdicts: dict[str, dict[EpisodeKey, JudgeItem]] = {}
    scorings: dict[str, int | None] = {}
    versions: dict[str, dict[str, set[str]]] = {}
    shown: dict[str, object] = {}
    reused: list[str] = []
    for judge in judges:
        before = max((s.id for s in store.scorings()), default=0)
        if not as_json:
            out.rule(f"judge {escape(judge)}")
        held = stored_scoring(track, store, systems, judge, request.options)
        if held is not None:  # its verdicts still hold: read, never asked again
            reused.append(judge)
            scorings[judge] = held.id
            verdicts[judge] = items_of([i for i in store.scoring_items(held.id) if i.system in systems])
            mine = {s: r for s, r in held.reports.items() if s in systems}
            shown[judge] = mine or held.reports
            if not as_json:
                out.print(f"the verdicts of {escape(held.label())} still hold for every episode: read from the run, "
                          f"nothing asked again ('score --judge {escape(judge)}' alone scores and prints its tables)")
            continue
        with returned_versions() as seen:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed) if as_json else contextlib.nullcontext():
                show_scores(track, store, systems, replace(request, judge=judge), as_json=as_json)
            latest = store.latest_scoring()
            if latest is not None and latest.id > before:
                scorings[judge] = latest.id
                verdicts[judge] = items_of(store.scoring_items(latest.id))  # made for these systems (docqa's pooled 'human' too)
            else:  # a track whose score keeps no scoring: its outcomes (the judge's replies come from the cache)
                scorings[judge] = None
                verdicts[judge] = _outcomes(track, store, systems, replace(request, judge=judge))
        versions[judge] = seen
        if as_json:
            shown[judge] = json.loads(printed.getvalue() or "null")
    report = agreement(verdicts, scorings=scorings, reused=reused,
                       versions={j: {m: sorted(v) for m, v in got.items()} for j, got in versions.items()})
    if as_json:
        print(json.dumps({"judges": shown, "agreement": report.model_dump(mode="json")}, indent=2, ensure_ascii=False))
    else:
        out.rule("judges compared")
        for line in lines(report):
            out.print(escape(line))
    return report


def stored_scoring(track: Track, store: RunStore, systems: Sequence[str], judge: str,
                   options: BaseModel | None) -> Scoring | None:
    """The newest stored scoring by `judge` with the settings this command would record (the
    track's flags that decide a verdict, a flag at its default counted as absent; the judge's
    sampling) that still holds for every episode of `systems`: each scored in it, none run again
    or (the track's `scoring_change_times`) graded again since. None: score again."""
    from deskbench.models.settings import asked_for
    from deskbench.runs.scorings import ScoringSettings

    given = options.model_dump() if options is not None else {}
    defaults = ScoringSettings.of("", {k: f.default for k, f in type(options).model_fields.items()}
                                  if options is not None else {}).flags

    def plain(flags: Mapping[str, object]) -> dict[str, object]:
        return {k: v for k, v in flags.items() if k not in defaults or defaults[k] != v}

    want = plain(ScoringSettings.of("", {**given, "judge": judge}).flags)
    sampling = dict(asked_for("judge").given())
    finished = {s: store.finished_times(s) for s in systems}
    changed = {s: track.scoring_change_times(store, s) for s in systems}
    for scoring in reversed(store.scorings()):
        if plain(scoring.settings.flags) != want or scoring.settings.judge_sampling != sampling:
            continue
        items = {(i.task_id, i.system, i.attempt) for i in store.scoring_items(scoring.id)}
        holds = all((task, s, attempt) in items and at <= scoring.created
                    and changed[s].get((task, attempt), "") <= scoring.created
                    for s in systems for (task, attempt), at in finished[s].items())
        return scoring if holds and any(finished.values()) else None  # the newest match decides
    return None


def _outcomes(track: Track, store: RunStore, systems: Sequence[str], request: RunRequest) -> dict[EpisodeKey, JudgeItem]:
    from deskbench.runs.outcomes import ScorerRequest

    given = request.options if isinstance(request.options, track.score_options) else None
    with track.scorer_options(ScorerRequest(judge=request.judge, concurrency=request.concurrency,
                                            options=given)) as options:
        return items_of([o for s in systems for o in track.outcomes(store, s, options)])
