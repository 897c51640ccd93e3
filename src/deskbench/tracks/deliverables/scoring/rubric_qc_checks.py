"""The Appendix C checks a QC reviewer runs on a row, as findings with a proposed action.

- C.2 verifier QC: every verifier gets a coverage check (the row's Confirm covers it); a subset
  is re-derived at full rigour, in the paper's priority order: (1) final-answer verifiers
  (decision_line, or one whose id or description says final answer / decision; a decision the
  response states is also checked inside each required output file), (2) trap verifiers (named
  by the task's traps), (3) numeric verifiers with tight tolerances (relative tolerance or range
  within 1%; the tightest five, at least three numeric ones when there are three; all of them
  when the SME scores look suspiciously uniform: deskbench's verifiers are automatic, so that is
  read on the five criterion scores, all equal), (4) citation-dependent verifiers, (5)
  output-file verifiers.
  Each is a REQUIRED finding: the row stays "pending" until the verifier has an explicit Confirm
  or Edit (as a 0 does under the Score-0 rule).
- C.3 citation validation: rubric_qc_citations.py; each failed check proposes an Edit of the
  affected verifier to fail with the reason "citation invalid: [issue]"; unrecorded URLs making
  up at least half of two or more cited ones propose a Reject (a possibly fabricated list).
- C.4 check A (rubric-justification match), for every cell, not only 0s: the justification
  should describe the score given. A 0 is read as rubric_score0 reads it (score-1 wording and no
  score-0 wording: Edit to 1, C.5); any other score is a mismatch when its justification has
  (un-negated) wording of another score's Table 19 cell and none of its own: Edit to that score.
- C.4 check B (verifier coherence): EP against the numeric verifiers' pass rate (>= 80% with EP
  0/1, < 50% with EP 3); DI against the trap and citation-dependent verifiers and the C.3
  failures (DI 3 with any of them failing; DI 0/1 with all passing and no citation failure).
- C.4 check C (overall-comment consistency): a comment praising a criterion scored 0 (or,
  praising the response as a whole, with any 0 it never mentions), or damning a criterion
  scored 3, is flagged.

Findings advise; only C.2's requirement changes the row's status. What the reviewer did about
each finding (its `outcome`) is filled in by apply_qc from the latest action on its target.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from deskbench.tracks.deliverables.scoring.rubric import unnegated
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import QCAction
from deskbench.tracks.deliverables.scoring.rubric_qc_citations import (
    CitationCheck,
    affected_verifier,
    citation_dependent,
    verifier_status,
)
from deskbench.tracks.deliverables.scoring.rubric_qc_final import CHECKS, QCFinding
from deskbench.tracks.deliverables.scoring.rubric_score0 import Score0Mismatch
from deskbench.tracks.deliverables.scoring.verifier_base import VerifierResult
from deskbench.tracks.deliverables.tasks import (
    RUBRIC_CODES,
    TABLE_19,
    DeliverableTask,
    RubricCriterion,
)
from deskbench.tracks.deliverables.verifier_specs import DecisionLineSpec, NumericSpec, VerifierSpec

__all__ = ["CHECKS", "QCFinding", "check_a", "check_b", "check_c", "citation_findings", "outcome",
           "priority_findings"]

TIGHT = 0.01  # a numeric verifier is "tight" when its relative tolerance (or range) is within 1%


# -- C.2 -------------------------------------------------------------------------------------------

_FINAL = re.compile(r"\bfinal[ _-]?answer\b|\bdecision\b|\brecommendation\b", re.I)


def _tightness(v: NumericSpec) -> float:
    if v.range is not None:
        mid = abs(v.range[0] + v.range[1]) / 2
        return (v.range[1] - v.range[0]) / mid if mid else float("inf")
    tol = [v.rel_tol] if v.rel_tol is not None else []
    if v.abs_tol is not None and v.expected:
        tol.append(v.abs_tol / abs(v.expected))
    return min(tol) if tol else 0.0  # no tolerance: exact


def priority_findings(task: DeliverableTask, results: Sequence[VerifierResult] | None,
                      scores: Mapping[str, int],
                      file_decisions: Mapping[str, Sequence[VerifierResult]] | None = None) -> list[QCFinding]:
    """C.2: the verifiers to re-derive, each once under its highest priority class.
    `file_decisions`: a final-answer verifier's id -> its spec run on each output file."""
    status = {r.id: r for r in results or []}
    classes: dict[str, str] = {}

    def put(vid: str, label: str) -> None:
        classes.setdefault(vid, label)

    for v in task.verifiers:
        if isinstance(v, DecisionLineSpec) or _FINAL.search(f"{v.id} {v.description}"):
            put(v.id, "1 final answer")
    for t in task.traps:
        for vid in t.verifiers:
            put(vid, f"2 trap {t.id}")
    numeric = [v for v in task.verifiers if isinstance(v, NumericSpec)]
    uniform = len(set(scores.values())) == 1
    ranked = sorted(numeric, key=_tightness)
    tight = [v for v in ranked if _tightness(v) <= TIGHT]
    chosen = tight if uniform else (tight[:5] if len(tight) >= 3 else ranked[:3])
    for v in chosen:
        put(v.id, "3 tight numeric" + (", all of them: the five scores are uniform" if uniform else ""))
    for v in citation_dependent(task):
        put(v.id, "4 citation-dependent")
    for v in task.verifiers:
        if v.file is not None:
            put(v.id, f"5 output file {v.file}")
    out = []
    for v in task.verifiers:  # the task's order within each class
        if v.id not in classes:
            continue
        r = status.get(v.id)
        text = f"re-derive ({classes[v.id]}): automatic {r.status if r else 'not run'}"
        if r is not None and r.evidence:
            text += f": {r.evidence}"
        for f in (file_decisions or {}).get(v.id, []):
            text += f"; in {f.id}: {f.status}"
        out.append(QCFinding(check="C.2", target=f"verifier:{v.id}", finding=text, required=True))
    return sorted(out, key=lambda f: classes[f.target.removeprefix("verifier:")][0])


def final_answer_in_files(task: DeliverableTask, response: str,
                          outputs: Path | None) -> dict[str, list[VerifierResult]]:
    """C.2 (1): each decision_line verifier that reads the response, run on each required text
    output (docx, pptx, md) too ("verified against the output file when one exists"); the
    results are named by the file."""
    from deskbench.tracks.deliverables.scoring.verifiers import run_verifiers

    files = [o.name for o in task.required_outputs if o.format in ("docx", "pptx", "md")]
    out: dict[str, list[VerifierResult]] = {}
    for v in task.verifiers:
        if isinstance(v, DecisionLineSpec) and v.file is None and files:
            specs: list[VerifierSpec] = [v.model_copy(update={"file": f}) for f in files]
            out[v.id] = [r.model_copy(update={"id": f})
                         for r, f in zip(run_verifiers(specs, response, outputs), files, strict=True)]
    return out


# -- C.3 -------------------------------------------------------------------------------------------


def citation_findings(task: DeliverableTask, checks: Sequence[CitationCheck],
                      results: Sequence[VerifierResult] | None) -> list[QCFinding]:
    """C.3: one finding per failed citation check, proposing an Edit to fail of the affected
    verifier when it passes; a proposed Reject when the citation list looks fabricated."""
    dependent = citation_dependent(task)
    out = []
    for c in checks:
        if c.ok:
            continue
        v = affected_verifier(c, dependent)
        where = c.where or "the response"
        issue = "; ".join(c.issues)
        if v is None:
            out.append(QCFinding(check="C.3", target="row", finding=f"citation invalid in {where}: {issue} "
                                 "(the task has no citation-dependent verifier to record it on)"))
            continue
        passing = verifier_status(results, v.id) == "pass"
        out.append(QCFinding(
            check="C.3", target=f"verifier:{v.id}", finding=f"citation invalid in {where}: {issue}",
            action="edit" if passing else None, score=0 if passing else None,
            reason=f"citation invalid: {c.issues[0]}"[:300] if passing else ""))
    urls = [c for c in checks if c.kind == "url"]
    unrecorded = [c for c in urls if not c.exists]
    if len(unrecorded) >= 2 and 2 * len(unrecorded) >= len(urls):
        out.append(QCFinding(
            check="C.3", target="row", action="reject",
            finding=(f"{len(unrecorded)} of {len(urls)} cited URLs were never searched or opened in the run "
                     f"({', '.join(c.source for c in unrecorded[:5])}): open them; sources that do not exist "
                     "make a fabricated citation list (Reject/Return, C.1)"),
            reason="fabricated citation list: cited sources not found"))
    return out


# -- C.4 check A -------------------------------------------------------------------------------------

_WORDING: dict[str, dict[int, list[str]]] = {
    "DI": {0: [r"fabricat\w*", r"invent(?:ed|s)\b", r"hallucinat\w*", r"ignores? (?:the )?source constraints"],
           1: [r"multiple (?:factual |data )?(?:errors|inaccuracies)", r"several (?:factual )?errors",
               r"vague (?:citations?|sourcing)", r"unauthori[sz]ed sources?"],
           2: [r"mostly accurate", r"minor (?:factual |data )?(?:errors?|inaccurac\w*)", r"(?:one|two|1-2) minor errors?",
               r"sourcing gaps?"],
           3: [r"all facts verified", r"100% adherence", r"fully (?:accurate|sourced|verified)",
               r"every (?:figure|fact|number) (?:is )?(?:verified|traced|sourced)"]},
    "AR": {0: [r"illogical", r"self[- ]contradict\w*", r"fails? to identify the core", r"no inference"],
           1: [r"gaps? in (?:the )?(?:logic|reasoning)", r"logical gaps?", r"no evidence[- ]backed",
               r"miss(?:es|ed|ing)? (?:the |some |key )?(?:interdependenc\w*|key variables?)"],
           2: [r"sound reasoning with minor gaps", r"minor gaps", r"small leaps?", r"identifies most key variables"],
           3: [r"\bMECE\b", r"hidden variables?", r"strong logic", r"cause[- ]and[- ]effect|cause-effect"]},
    "RF": {0: [r"dominated by noise", r"forbidden content", r"largely off[- ]topic"],
           1: [r"scope creep", r"partly relevant", r"\b50-60\s?% relevant"],
           2: [r"\b70-80\s?% relevant", r"mostly relevant", r"low tangential", r"some tangential"],
           3: [r"\b90\s?%\+? relevant", r"fully relevant", r"wholly on[- ]task", r"excludes out[- ]of[- ]scope"]},
    "EP": {0: [r"fundamental (?:math|calculation) errors?", r"wrong units?", r"black[- ]box"],
           1: [r"off by (?:about |roughly |~)?\d+(?:\.\d+)?\s?%", r"partial unit normali[sz]ation",
               r"gaps? in (?:the )?methodology"],
           2: [r"minor (?:computational |calculation |rounding )?errors?", r"most (?:calculation )?steps shown",
               r"all units normali[sz]ed"],
           3: [r"100% accurate", r"complete audit trail", r"unit discipline", r"all calculations (?:are )?correct"]},
    "FD": {0: [r"unusable", r"ignores? (?:the )?format", r"no actionable", r"truncated", r"malformed"],
           1: [r"partial(?:ly)? (?:format )?complian\w*", r"lack(?:s|ing)? (?:of )?specificity"],
           2: [r"minor (?:format )?deviations?", r"some interpretation needed", r"follows (?:the )?format with minor"],
           3: [r"executive[- ]ready", r"100% compliance", r"drop[- ]in[- ]ready", r"fully complian\w*"]},
}
"""Wording of each Table 19 cell (its key phrases and their usual paraphrases), per criterion and score."""


def _rx(phrases: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in phrases), re.I)


def check_a(scores: Mapping[str, int], justifications: Mapping[str, str], zeros: Sequence[Score0Mismatch],
            rubric: Sequence[RubricCriterion] | None = None) -> list[QCFinding]:
    """C.4 check A on every cell: the score-0 mismatches (`zeros`, rubric_score0) as the
    canonical Edit to 1, and each other score whose justification describes another score."""
    out = [QCFinding(check="C.4A", target=m.code, action="edit", score=1,
                     finding=f"{m.code} 0 but the justification describes score 1 ({'; '.join(m.score1_wording)}); "
                             f"score-1 cell: {m.anchor}",
                     reason="justification describes score 1, not score 0 (C.5)") for m in zeros]
    anchors: dict[str, dict[int, str]] = {c.code: c.anchors for c in rubric} if rubric else {}
    for code in RUBRIC_CODES:
        score = scores[code]
        if score == 0:
            continue
        described = {}
        for level, phrases in _WORDING[code].items():
            found = unnegated(_rx(phrases), justifications[code])
            if found:
                described[level] = sorted({f.lower() for f in found})
        if not described or score in described:
            continue
        level = min(described, key=lambda s: (abs(s - score), s))
        cell = anchors.get(code, {}).get(level) or TABLE_19[code][1][level]
        out.append(QCFinding(check="C.4A", target=code, action="edit", score=level,
                             finding=f"{code} {score} but the justification describes score {level} "
                                     f"({'; '.join(described[level])}); score-{level} cell: {cell}",
                             reason=f"justification describes score {level}, not {score} (C.4 check A)"))
    return out


# -- C.4 check B -------------------------------------------------------------------------------------


def check_b(task: DeliverableTask | None, results: Sequence[VerifierResult] | None, scores: Mapping[str, int],
            citations: Sequence[CitationCheck] = ()) -> list[QCFinding]:
    """C.4 check B: EP against the numeric verifiers, DI against the trap and source verifiers
    and the citation failures."""
    out = []
    numeric = [r for r in results or [] if r.kind == "numeric"]
    if numeric:
        rate = sum(r.status == "pass" for r in numeric) / len(numeric)
        if rate >= 0.8 and scores["EP"] <= 1:
            out.append(QCFinding(check="C.4B", target="EP",
                                 finding=f"check B: EP {scores['EP']} with {rate:.0%} of numeric verifiers passing"))
        elif rate < 0.5 and scores["EP"] == 3:
            out.append(QCFinding(check="C.4B", target="EP",
                                 finding=f"check B: EP 3 with only {rate:.0%} of numeric verifiers passing"))
    if task is None or results is None:
        return out
    by_id = {r.id: r for r in results}
    source_ids = list(dict.fromkeys([v for t in task.traps for v in t.verifiers]
                                    + [v.id for v in citation_dependent(task)]))
    judged = [by_id[i] for i in source_ids if i in by_id and by_id[i].status != "unobservable"]
    failing = [r.id for r in judged if r.status == "fail"]
    invalid = [c for c in citations if not c.ok]
    di = scores["DI"]
    if di == 3 and (failing or invalid):
        what = ([f"trap/source verifiers failing: {', '.join(failing)}"] if failing else []) + (
            [f"{len(invalid)} citation(s) failing C.3"] if invalid else [])
        out.append(QCFinding(check="C.4B", target="DI", finding=f"check B: DI 3 with {'; '.join(what)}"))
    elif di <= 1 and judged and not failing and not invalid:
        out.append(QCFinding(check="C.4B", target="DI", finding=(
            f"check B: DI {di} with every trap and source verifier passing ({', '.join(r.id for r in judged)}) "
            "and no citation failing C.3")))
    return out


# -- C.4 check C -------------------------------------------------------------------------------------

_TOPIC: dict[str, str] = {
    "DI": r"data|figures?|numbers?|facts?|sources?|sourcing|citations?|references?",
    "AR": r"reasoning|logic|analysis|analytical|argument|rigou?r",
    "RF": r"relevan\w*|focus\w*|scope|on[- ]topic|off[- ]topic",
    "EP": r"calculations?|math\w*|arithmetic|computations?|execution|numbers add up",
    "FD": r"format\w*|layout|deliverable|structure|presentation|memo|deck|report",
}
_GOOD = (r"aligned|sound|accurate|correct|strong|excellent|good|solid|clear|well[- ]\w+|robust|thorough|"
         r"precise|complete|impressive|great|reliable|executive[- ]ready|on point|spot on|no issues")
_BAD = (r"fabricat\w*|wrong|incorrect|weak|poor|missing|flawed|errors?|unusable|inaccura\w*|invented|"
        r"hallucinat\w*|broken|fails?|failed|sloppy|confus\w*|misleading|unreliable")
_OVERALL = re.compile(r"\b(?:overall|the response|this response|the answer|the work|the memo|the deliverable)\b|"
                      r"^\s*(?:excellent|great|strong|solid|good)\b", re.I)


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in re.split(r"[.;!?\n]+|\bbut\b|\bhowever\b|\balthough\b", text, flags=re.I) if c.strip()]


def check_c(scores: Mapping[str, int], comment: str) -> list[QCFinding]:
    """C.4 check C: the overall comment against the five scores (module docstring)."""
    if not comment.strip():
        return []
    good, bad = re.compile(rf"\b(?:{_GOOD})\b", re.I), re.compile(rf"\b(?:{_BAD})\b", re.I)
    topics = {c: re.compile(rf"\b(?:{t})\b", re.I) for c, t in _TOPIC.items()}
    praised: dict[str, list[str]] = {}
    damned: dict[str, list[str]] = {}
    overall_praise: list[str] = []
    for clause in _clauses(comment):
        pos, neg = unnegated(good, clause), unnegated(bad, clause)
        named = [c for c, rx in topics.items() if rx.search(clause)]
        for c in named:
            if pos and not neg:
                praised.setdefault(c, []).append(clause)
            if neg and not pos:
                damned.setdefault(c, []).append(clause)
        if pos and not neg and (not named or _OVERALL.search(clause)):
            overall_praise.append(clause)
    out = []
    for code in RUBRIC_CODES:
        if scores[code] == 0 and code in praised:
            out.append(QCFinding(check="C.4C", target=code, finding=(
                f"check C: the comment praises {code} (\"{praised[code][0]}\") but {code} is 0")))
        elif scores[code] == 0 and (overall_praise or any(c != code for c in praised)) and code not in damned:
            quote = overall_praise[0] if overall_praise else next(v[0] for k, v in praised.items() if k != code)
            out.append(QCFinding(check="C.4C", target=code, finding=(
                f"check C: the comment reads positively (\"{quote}\") and never names what makes {code} 0")))
        elif scores[code] == 3 and code in damned:
            out.append(QCFinding(check="C.4C", target=code, finding=(
                f"check C: the comment faults {code} (\"{damned[code][0]}\") but {code} is 3")))
    return out


# -- outcomes ---------------------------------------------------------------------------------------


def outcome(f: QCFinding, latest: Mapping[str, QCAction], primary: Mapping[str, int],
            automatic: Mapping[str, str]) -> str:
    """What the reviewer did about a finding: the latest action on its target."""
    row = latest.get("row")
    if row is not None and row.action == "reject":
        return f"returned: {row.reason}"
    a = latest.get(f.target)
    if a is None:
        return "confirmed (row)" if f.target == "row" and row is not None else "open"
    if a.action == "confirm":
        return "confirmed"
    if a.action == "edit" and f.target.startswith("verifier:"):
        before = automatic.get(f.target.removeprefix("verifier:"), "?")
        return f"edited: {before} -> {'pass' if a.score == 1 else 'fail'} ({a.reason})"
    if a.action == "edit":
        return f"edited: {primary.get(f.target, '?')} -> {a.score} ({a.reason})"
    return a.action
