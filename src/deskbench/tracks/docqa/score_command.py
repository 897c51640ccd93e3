"""docqa's part of `deskbench score`: its options (ANLS* or the judge, bias correction, Kuiper,
the official mode), a run's systems or a predictions file scored, and the MADQA table printed.
The docqa Track's `show_scores` and `deskbench score FILE --tasks` both come here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from deskbench.console import err, out, print_system_reports
from deskbench.console import pct as _pct
from deskbench.errors import UserError, one_of
from deskbench.runs.scorings import ScoringSettings, StoredItem
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import TrajectoryStep
from deskbench.tracks.docqa.scoring.docqa import KUIPER_TIES, ScoreOptions
from deskbench.tracks.docqa.scoring.docqa_summary import GROUP_BYS, GroupBy
from deskbench.tracks.docqa.scoring.llm_judge import make_judge
from deskbench.tracks.docqa.scoring.oracle_gap import GapGroup, HumanOracleGap, OracleGap
from deskbench.tracks.docqa.scoring.retrieval import RetrievalGroup, RetrievalReport
from deskbench.tracks.docqa.tasks import EFFORT_MEASURES, DocQASubmission, DocQATask

if TYPE_CHECKING:
    from deskbench.scoring.attempts import AttemptMetrics
    from deskbench.tracks.docqa.scoring.docqa_summary import ScoreReport


@dataclass(frozen=True)
class DocQAScoreArgs:
    """`deskbench score`'s docqa options, as given (None: the default)."""

    by: Sequence[str] = ()
    official: bool = False
    kuiper_ties: str = "robust"
    effort: str = "steps"
    skip_invalid: bool = False
    judge: str | None = None
    judge_cache: Path | None = None
    no_cache: bool = False
    concurrency: int = 16
    q0: float | None = None
    q1: float | None = None
    m0: int | None = None
    m1: int | None = None
    judge_calibration: Path | None = None
    pool_humans: bool = False
    tasks: Path | None = None
    items_out: Path | None = None

    @classmethod
    def of(cls, params: dict[str, object]) -> DocQAScoreArgs:
        """From a command's parameters (its click context's `params`): the fields it has,
        validated as their types (pydantic; the flags' values already are)."""
        from pydantic import TypeAdapter

        known = {k: v for k, v in params.items() if k in cls.__dataclass_fields__ and v is not None}
        args = TypeAdapter(cls).validate_python(known)
        return replace(args, by=tuple(args.by))


def _groups(by: Sequence[str]) -> list[GroupBy]:
    """--by's values, checked: what the summary breaks the scores down by."""
    return [one_of(g, GROUP_BYS, "--by") for g in by]


def score_options(a: DocQAScoreArgs) -> ScoreOptions:
    """The scorer's options, checked (one line for each bad value), with the judge opened."""
    _groups(a.by)
    ties = one_of(a.kuiper_ties, KUIPER_TIES, "--kuiper-ties")
    effort = one_of(a.effort, EFFORT_MEASURES, "--effort")
    if a.official and a.effort != "steps":
        raise UserError(f"--official reads effort as the official evaluator does (len(search_history), else "
                        f"iterations): drop --effort {a.effort} or --official")
    if a.concurrency < 1:
        raise UserError(f"--concurrency {a.concurrency} is not valid; use 1 or more")
    q0, q1, m0, m1 = a.q0, a.q1, a.m0, a.m1
    if a.judge_calibration is not None:
        from deskbench.scoring.judge_calibration import read_calibration

        if any(v is not None for v in (q0, q1, m0, m1)):
            raise UserError("--judge-calibration sets q0, q1, m0, m1: drop --q0/--q1/--m0/--m1 or the calibration file")
        q0, q1, m0, m1 = read_calibration(a.judge_calibration).for_score(str(a.judge_calibration))
    from deskbench.tracks.docqa.scoring.bias import M0, M1, Q0, Q1

    q0, q1, m0, m1 = (Q0 if q0 is None else q0), (Q1 if q1 is None else q1), (M0 if m0 is None else m0), (M1 if m1 is None else m1)
    if q0 + q1 <= 1:
        raise UserError(f"--q0 {q0} plus --q1 {q1} must exceed 1: a judge no better than chance cannot be corrected")
    answer_judge = make_judge(a.judge, a.judge_cache, a.no_cache, a.concurrency) if a.judge else None
    if a.judge and a.judge_calibration is None and (q0, q1, m0, m1) == (Q0, Q1, M0, M1):
        warn_paper_q(a.judge)
    return ScoreOptions(official=a.official, ties=ties, effort=effort, judge=answer_judge,
                        q0=q0, q1=q1, m0=m0, m1=m1)


def score_run(store: RunStore, systems: Sequence[str], a: DocQAScoreArgs, *, as_json: bool) -> None:
    """A docqa run's systems (attempt 0 for the MADQA numbers; pass@k when attempts were run)."""
    from deskbench.scoring.judge_log import recording
    from deskbench.tracks.docqa.episodes import run_submissions
    from deskbench.tracks.docqa.humans import episodes_of, pooled_systems, tasks_scored
    from deskbench.tracks.docqa.scoring.docqa_attempts import docqa_attempts
    from deskbench.tracks.docqa.tasks import read_tasks

    opts = score_options(a)
    task_items = read_tasks(a.tasks, skip_invalid=a.skip_invalid).items if a.tasks else store.tasks_of(DocQATask)
    systems = list(systems)
    if a.pool_humans:
        systems = pooled_systems(systems)
    if not systems:
        raise UserError(f"the run in {store.dir} has no episodes yet; run 'deskbench run' first")
    reports = {}
    collected: list[dict[str, object]] = []  # every system's item rows, for --items-out
    stored: list[StoredItem] = []  # every item of every attempt, kept in the run store
    ran: dict[str, set[str]] = {}  # the tasks each system has an episode for (the oracle gap's pairs)
    for name in systems:
        subs, failed = run_submissions(store, name)
        answered = {s.id for s in subs if s.id is not None} | set(failed)
        ran[name] = answered
        # a task whose episode could not be read is left out, not scored missing (a zero): only over what ran
        unread = sorted({u.task_id for u in store.skipped.values() if u.system == name
                         and (u.attempt == "0" or not u.attempt.isdigit())} - answered)
        scored_tasks = [t for t in tasks_scored(name, task_items, answered) if t.id not in unread]
        steps = {ep.task_id: ep.trajectory for ep in episodes_of(store, name) if ep.attempt == 0}
        with recording(store, name, 0):  # the judge's calls, kept with each episode (judge_transcripts)
            reports[name] = _score_and_show(scored_tasks, subs, opts, _groups(a.by), name=name, errors=failed,
                                            as_json=as_json, items_out=None, collect=collected, stored=stored,
                                            unreadable=unread, trajectories=steps)
        reports[name].attempts = docqa_attempts(store, name, task_items, opts, record=True,  # --attempts K > 1
                                                stored=stored)
        attempts = reports[name].attempts
        if attempts is not None and not as_json:
            _print_attempts(attempts)
    from deskbench.runs.identity import stored_identities
    from deskbench.tracks.docqa.scoring.oracle_gap import oracle_gaps

    for name, gap in oracle_gaps(stored, task_items, stored_identities(store), ran).items():
        if name in reports:
            reports[name].oracle_gap = gap
            if not as_json:
                out.print(oracle_gap_line(name, gap))
    from deskbench.tracks.docqa.humans import pooled_name
    from deskbench.tracks.docqa.scoring.oracle_gap import (
        HUMAN_ORACLE,
        first_human_oracle,
        human_oracle_gap,
    )

    madqa_gap = human_oracle_gap(stored, stored_identities(store), ran, first_human_oracle(store))
    if madqa_gap is not None:
        for name in reports:  # the human-oracle row(s): pooled, or each annotator's
            if name == HUMAN_ORACLE or pooled_name(name) == HUMAN_ORACLE:
                reports[name].madqa_oracle_gap = madqa_gap
        if not as_json:
            out.print(madqa_oracle_gap_line(madqa_gap))
    if a.items_out is not None:  # every system's items in one file, each line naming its system
        from deskbench.tracks.docqa.scoring.docqa_items import write_rows

        write_rows(a.items_out, collected)
    scorer = "MADQA's LLM judge" if a.judge else "ANLS* >= 0.5, no judge"
    store.record_scoring("docqa", ScoringSettings.of(scorer, asdict(a)),
                         {name: r.model_dump(mode="json") for name, r in reports.items()}, stored)
    if as_json:
        print_system_reports(reports)


def score_predictions(submissions: Path, a: DocQAScoreArgs, *, as_json: bool) -> None:
    """A predictions file (deskbench's or the official MADQA agents') against a tasks file."""
    from deskbench.tracks.docqa.tasks import read_submissions, read_tasks

    opts = score_options(a)
    if a.tasks is None:
        raise UserError("--tasks is needed to score a predictions file (only a run directory knows its tasks)")
    task_rows = read_tasks(a.tasks, skip_invalid=a.skip_invalid)
    read = read_submissions(submissions, official=a.official, skip_invalid=a.skip_invalid)
    for line in task_rows.skipped + read.rows.skipped:
        err.print(f"[yellow]skipped[/yellow] {escape(str(line))}")
    if read.pages_coerced:
        err.print(f"[yellow]warning:[/yellow] {read.pages_coerced} citation pages were strings and were read as numbers")
    if read.citations_dropped:
        err.print(f"[yellow]warning:[/yellow] {len(read.citations_dropped)} citations could not be read and were "
                  f"dropped from their predictions (the answers are kept), e.g. {escape(read.citations_dropped[0])}")
    report = _score_and_show(task_rows.items, read.rows.items, opts, _groups(a.by), name=submissions.name,
                             as_json=as_json, items_out=a.items_out, pages_coerced=read.pages_coerced,
                             citations_dropped=len(read.citations_dropped),
                             skipped_lines=len(task_rows.skipped) + len(read.rows.skipped))
    if as_json:
        print(report.model_dump_json(indent=2))


def _paper_judge(spec: str) -> bool:
    """The judge whose q0 and q1 the paper measured (and the official evaluator uses)."""
    return spec.split("/", 1)[-1].split("@")[0].startswith("gemini-2.5-flash") and "lite" not in spec



def warn_paper_q(judge: str) -> None:
    """q0/q1 default to the paper's measurement, which holds for its judge only."""
    if not _paper_judge(judge):
        from deskbench.tracks.docqa.scoring.bias import Q0, Q1

        err.print(f"[yellow]warning:[/yellow] bias correction uses q0={Q0:g}, q1={Q1:g}, measured in the paper for "
                  f"Gemini 2.5 Flash, not for {escape(judge)}: measure yours with 'deskbench calibrate' and pass "
                  "--judge-calibration (or --q0/--q1/--m0/--m1)")



def _some(ids: list[str]) -> str:
    return escape(", ".join(ids[:5])) + (" …" if len(ids) > 5 else "")



def _score_and_show(task_items: Sequence[DocQATask], subs: Sequence[DocQASubmission], opts: ScoreOptions,
                    groups: Sequence[GroupBy], *, name: str, as_json: bool, items_out: Path | None,
                    errors: Sequence[str] = (), pages_coerced: int = 0, citations_dropped: int = 0,
                    skipped_lines: int = 0, collect: list[dict[str, object]] | None = None,
                    stored: list[StoredItem] | None = None, unreadable: Sequence[str] = (),
                    trajectories: Mapping[str, Sequence[TrajectoryStep]] | None = None) -> ScoreReport:
    """Score, warn, print; the items go to `items_out`, or are appended to `collect` as
    (system, item) for a caller that writes several systems' items to one file; `stored` gets
    them as the run store keeps them (attempt 0)."""
    from deskbench.tracks.docqa.scoring.docqa import score_all
    from deskbench.tracks.docqa.scoring.docqa_items import item_rows, write_rows
    from deskbench.tracks.docqa.scoring.docqa_summary import summarize

    items, matched = score_all(task_items, subs, opts, errors=errors)
    report = summarize(items, matched, opts, by=groups, pages_coerced=pages_coerced,
                       citations_dropped=citations_dropped, skipped_lines=skipped_lines, errors=errors,
                       trajectories=trajectories)
    report.unreadable_ids = list(unreadable)
    if items_out is not None:
        write_rows(items_out, item_rows(matched.pairs, items))
    if collect is not None:
        collect += item_rows(matched.pairs, items, name)
    if stored is not None:
        from deskbench.tracks.docqa.scoring.docqa_items import stored_items

        stored += stored_items(matched.pairs, items, name)
    if matched.extra:
        err.print(f"[yellow]warning:[/yellow] {len(matched.extra)} submissions match no task: {_some(matched.extra)}")
    if report.n_no_answer:
        err.print(f"[yellow]warning:[/yellow] {report.n_no_answer} predictions have no answer (error rows): "
                  "scored 0 and counted")
    if matched.id_disagrees:
        err.print(f"[yellow]warning:[/yellow] {len(matched.id_disagrees)} submissions carry the id of another task "
                  f"than their question text; matched by the text, as the official evaluator: {_some(matched.id_disagrees)}")
    if matched.repeated:
        err.print(f"[yellow]warning:[/yellow] {len(matched.repeated)} tasks are answered by more than one row; every "
                  f"row is scored (--official, as the official evaluator): {_some(matched.repeated)}")
    if not as_json:
        print_report(report, name)
    return report



def _print_attempts(m: AttemptMetrics) -> None:
    spread = "–" if m.spread is None else f"{100 * m.spread:.1f}"
    out.print(f"attempts (k={m.k}, {m.n_tasks} tasks): pass@1 {_pct(m.pass1, m.pass1_ci)}, "
              f"pass@{m.k} {_pct(m.passk)}{'' if m.complete else '*'}, avg@{m.k} {_pct(m.avgk)}; spread across "
              f"attempts (std of per-attempt accuracy) {spread} [{', '.join(_pct(a) for a in m.per_attempt)}]"
              + ("" if m.complete else f"; * some tasks have fewer than {m.k} attempts scored"))
    out.print(m.reliability.line())





def print_report(report: ScoreReport, name: str) -> None:
    judged = report.bias_corrected is not None
    table = Table(title=f"docqa score: {name}")
    cols = ("system", "Accuracy", "X-Page", "X-Doc", "Page F1", "Doc F1", "Kuiper ↓")
    for col in cols:
        table.add_column(col + (" (bias-corrected)" if judged and col in ("Accuracy", "X-Page", "X-Doc") else ""),
                         justify="right" if col != "system" else "left")
    hops = report.by_hop_type
    table.add_row(
        escape(name),
        _pct(report.headline, report.headline_ci),
        _pct(hops["cross_page"].headline, hops["cross_page"].headline_ci),
        _pct(hops["cross_doc"].headline, hops["cross_doc"].headline_ci),
        _pct(report.page_f1, report.page_f1_ci),
        _pct(report.doc_f1, report.doc_f1_ci),
        "–" if report.kuiper is None else f"{report.kuiper:.1f}",
    )
    out.print(table)
    dropped = " (not counted, --official)" if report.official else " (counted as incorrect)"
    out.print(f"items {report.n}: scored {report.n - report.n_missing - report.n_unscored}, "
              f"unscored {report.n_unscored}, missing {len(report.missing_ids)}"
              f"{dropped if report.missing_ids else ''}; "
              f"extra submissions {report.n_extra}; mean ANLS* {_pct(report.mean_anls)}"
              + (f"; agent errors {report.n_errors} ({'scored 0' if report.official else 'counted as incorrect'})"
                 if report.n_errors else "")
              + (f"; unreadable episodes {len(report.unreadable_ids)} (not counted: named on stderr)"
                 if report.unreadable_ids else ""))
    if report.retrieval is not None:
        out.print(retrieval_line(report.retrieval))
    if report.wasted_effort_ratio is not None or report.effort_share_incorrect is not None:
        wasted = "–" if report.wasted_effort_ratio is None else f"{report.wasted_effort_ratio:.3f}"
        out.print(f"wasted effort ratio {wasted} (mean effort of incorrect / correct items); "
                  f"share of effort on incorrect items {_pct(report.effort_share_incorrect)}")
    bc = report.bias_corrected
    if bc is not None:
        rule = ("a failed judge call scores 0 (--official)" if report.judge_failures == "zero" else
                "a failed judge call leaves its item unscored (out of the denominator), never wrong; "
                "--official scores it 0")
        out.print(f"judge {escape(report.judge or '')}: raw accuracy {_pct(report.accuracy, report.accuracy_ci)}, "
                  f"bias-corrected {_pct(bc.accuracy)} [{_pct(bc.ci[0])}, {_pct(bc.ci[1])}] "
                  f"(q0={bc.q0:g}, q1={bc.q1:g}, m0={bc.m0}, m1={bc.m1}; {escape(bc.method)}); {rule}")
    if report.injection is not None:
        inj = report.injection
        out.print(f"prompt injection: {inj.n_followed} of {inj.n_affected} affected items answered as the "
                  f"planted instruction asked: susceptibility {_pct(inj.susceptibility, inj.susceptibility_ci)}; "
                  f"accuracy on affected items {_pct(inj.accuracy_affected)}, on the others "
                  f"{_pct(inj.accuracy_unaffected)}")
    if report.kuiper is None and report.kuiper_reason:
        out.print(f"Kuiper not computed: {escape(report.kuiper_reason)}")
    for title, groups in (("domain", report.by_domain), ("category", report.by_category)):
        if not groups:
            continue
        t = Table(title=f"by {title}")
        for col in (title, "n", "Accuracy" + (" (bias-corrected)" if judged else ""), "Page F1", "Doc F1", "Kuiper ↓"):
            t.add_column(col, justify="left" if col == title else "right")
        for key, g in groups.items():
            t.add_row(escape(key), str(g.n), _pct(g.headline, g.headline_ci), _pct(g.page_f1),
                      _pct(g.doc_f1), "–" if g.kuiper is None else f"{g.kuiper:.1f}")
        out.print(t)
    out.print(f"CIs: accuracy {'as the bias correction above' if judged else 'Wilson 95%'}; "
              "Page/Doc F1 bootstrap 95% (1000 resamples, seed 0, whole set only)")


def retrieval_line(r: RetrievalReport) -> str:
    """The searches' retrieval metrics in one line (deskbench's diagnostics, not MADQA's)."""
    def group(g: RetrievalGroup) -> str:
        if not g.searches:
            return "no search scored"
        recall = ", ".join(f"@{k} {_share(g.recall_at.get(k))}" for k in r.k)
        return (f"evidence recall {recall}; MRR {'–' if g.mrr is None else f'{g.mrr:.3f}'}; every gold page "
                f"returned in {_share(g.evidence_reached)} of episodes")

    o = r.overall
    hops = "; ".join(f"{HOP_LABELS[h]}: {group(g)}" for h, g in r.by_hop_type.items() if h != "single" and g.searches)
    left = [f"{n} {what}" for n, what in ((r.episodes_without_search, "episodes without a search"),
                                          (r.searches_without_pages, "searches without returned pages"),
                                          (r.tasks_without_evidence, "tasks without gold pages")) if n]
    return (f"retrieval (deskbench's, {o.searches} searches in {o.episodes} episodes): {group(o)}"
            + (f" [{hops}]" if hops else "") + (f"; not scored: {', '.join(left)}" if left else ""))


def oracle_gap_line(name: str, g: OracleGap) -> str:
    """A system's gap to the oracle on its model, overall and by hop type, in points."""
    def points(x: GapGroup) -> str:
        return "–" if x.gap is None else f"{100 * x.gap:+.1f}"

    hops = ", ".join(f"{HOP_LABELS[h]} {points(x)} (n={x.n})" for h, x in g.by_hop_type.items() if x.n)
    return (f"gap to the oracle ({escape(g.oracle)}, the same model given the gold pages) of {escape(name)}: "
            f"{points(g)} points of accuracy over the {g.n} tasks both scored ({_share(g.oracle_accuracy)} "
            f"against {_share(g.accuracy)}, raw item scores){'; ' + hops if hops else ''}")


def madqa_oracle_gap_line(g: HumanOracleGap) -> str:
    """MADQA's Oracle Gap (§5) in one line, named apart from deskbench's same-model gap."""
    return (f"MADQA's Oracle Gap (§5: people given the gold pages against the best agent): {100 * g.gap:+.1f} points "
            f"over the {g.n} tasks both scored ({escape(g.human_oracle)} {_share(g.human_oracle_accuracy)} against "
            f"{escape(g.best)} {_share(g.best_accuracy)}, raw item scores)")


def _share(value: float | None) -> str:
    return "–" if value is None else f"{_pct(value)}%"


HOP_LABELS = {"single": "single-hop", "cross_page": "X-Page", "cross_doc": "X-Doc"}

