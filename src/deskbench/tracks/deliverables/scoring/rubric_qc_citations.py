"""C.3 citation validation (the consulting DRA paper, Appendix C.3), made mechanical where it can be.

The paper's QC reviewer opens every cited source and confirms three things: (1) the URL or
document resolves and matches the named source, (2) the source supports the specific claim
attributed to it, (3) the source is on the authorised list of the prompt. A failure is an Edit
on the affected verifier with the reason "citation invalid: [issue]"; a fabricated citation list
returns the row (C.1). deskbench reads what the run recorded, never the live web:

1. exists: a cited URL must be among the episode's recorded sources, the URLs its tool calls
   returned (a `url` or `uri` key at any depth of a tool call's result: the web_search hits and
   fetched pages of web_access.py, the searches and fetches a deep-research agent recorded; not
   its `citations` step, the list of what it cited), and a
   fetch of it must not have failed (status 400 or more). A URL no tool call returned was never
   seen in the run: deskbench cannot tell a page that exists from an invented one, so it is
   reported as "not among the recorded sources" for the reviewer to open. A cited document (a
   file name such as fuel_policy_final_v2.docx) must be one of the task's input files.
2. supports: a figure of the citing sentence (a number with a %, a currency sign, a decimal,
   or of 10 or more; years are left out) must appear in the recorded text of the source (the
   fetched page, else the search snippet; for a document, its text). It fails only when none
   does: the sentence often goes on to compute from the sourced figure. A sentence without a
   figure is left to the reviewer (`supports` None), as is a source whose text was not recorded.
3. authorised: a URL's host must be on the task's authorised domains (every citation_domains
   verifier's `allowed`, and domains written in the authorised sources' names and notes); under
   a closed corpus no external host is; under an open corpus any is. A hybrid task that names
   its external source without a domain ("Mordor Intelligence") cannot be checked (None). A
   document must be an authorised input file when the task lists its input files as sources.

The checks never change a score themselves: `citation_findings` turns each failure into a
proposed Edit (to fail) of the affected verifier, the citation-dependent verifier reading the
same document (citation_domains first), and several unrecorded URLs into a proposed Reject
(a possibly fabricated list); the reviewer acts on them (rubric_qc_checks.py, apply_qc).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from deskbench.errors import UserError
from deskbench.tasks.trajectory import ToolCallStep, TrajectoryStep
from deskbench.tracks.deliverables.scoring.verifier_base import VerifierResult
from deskbench.tracks.deliverables.scoring.verifiers_citations import (
    host_allowed,
    hyperlink_targets,
)
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask
from deskbench.tracks.deliverables.verifier_specs import CitationDomainsSpec, VerifierSpec

__all__ = ["CitationCheck", "RecordedSource", "authorised_domains", "citation_dependent", "recorded_sources",
           "validate_citations"]

_URL = re.compile(r"https?://[^\s<>()\[\]{}\"'`|]+", re.I)
_DOC = re.compile(r"(?<![\w/.-])\w[\w.()-]{0,80}\.(?:xlsx|xlsm|xls|docx|doc|pptx|csv|pdf|txt|json)\b", re.I)
_FIGURE = re.compile(r"(?P<cur>[$€£₹]\s?)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<pct>\s?%)?")
_DOMAIN = re.compile(r"\b(?:[a-z0-9-]+\.)+[a-z]{2,}\b", re.I)
_TEXT_KEYS = ("text", "content", "snippet", "cited_text", "page_content", "description")
_OFFICE = {".docx", ".xlsx", ".pptx", ".xlsm"}


class RecordedSource(BaseModel):
    """A URL the episode's tool calls returned, with the text recorded for it."""

    url: str
    status: int | None = None  # a fetch's HTTP status, when recorded
    text: str = ""  # page text or snippets, joined


class CitationCheck(BaseModel):
    """One cited source (a URL or a document) and the three C.3 checks on it."""

    source: str  # the URL or the document name as cited
    kind: Literal["url", "document"]
    where: str | None  # the output file it was cited in; None: the response text
    claim: str  # the citing sentence
    exists: bool
    supports: bool | None = None  # None: not checkable mechanically (no figure, no recorded text)
    authorised: bool | None = None  # None: the task gives no list to check against
    issues: list[str] = Field(default_factory=list)  # one per failed check, for "citation invalid: ..."

    @property
    def ok(self) -> bool:
        return not self.issues


def normalise_url(url: str) -> str:
    """A URL as compared: scheme and host lower case, no "www.", no #fragment, no trailing slash."""
    url = url.strip().split("#", 1)[0]
    m = re.match(r"(?i)(https?)://([^/?]+)(.*)", url)
    if not m:
        return url.rstrip("/")
    host = m.group(2).lower().removeprefix("www.")
    return f"{m.group(1).lower()}://{host}{m.group(3)}".rstrip("/")


def _host(url: str) -> str:
    m = re.match(r"(?i)https?://(?:[^@/]+@)?([^/:?#]+)", url)
    return m.group(1).lower().strip(".").removeprefix("www.") if m else ""


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


CITATION_STEPS = frozenset({"citations"})
"""Steps that list what the agent cited (the deep-research agents' `citations` step): no proof
that a source was searched or opened; their quoted text (Anthropic's cited_text, taken by the
provider from the search result) is added to a source other steps recorded."""


def recorded_sources(trajectory: Sequence[TrajectoryStep]) -> dict[str, RecordedSource]:
    """Every URL a tool call's result named (normalised URL -> the source), its recorded text
    joined and the worst fetch status kept; a citations step adds text only (CITATION_STEPS)."""
    out: dict[str, RecordedSource] = {}
    steps = [s for s in trajectory if isinstance(s, ToolCallStep)]
    for step in sorted(steps, key=lambda s: s.name in CITATION_STEPS):  # the citations steps last
        for node in _walk(step.result):
            url = node.get("url", node.get("uri"))
            if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
                continue
            if step.name in CITATION_STEPS and normalise_url(url) not in out:
                continue
            src = out.setdefault(normalise_url(url), RecordedSource(url=url))
            text = " ".join(str(node[k]) for k in _TEXT_KEYS if isinstance(node.get(k), str))
            if text:
                src.text = (src.text + "\n" + text).strip()
            status = node.get("status")
            if isinstance(status, int) and (src.status is None or status > src.status):
                src.status = status
    return out


def authorised_domains(task: DeliverableTask) -> list[str] | None:
    """The hosts a citation may point to; None when the task leaves it open (an open corpus, or
    a hybrid task naming no domain for its external sources)."""
    if task.corpus_discipline == "open":
        return None
    domains = [d for v in task.verifiers if isinstance(v, CitationDomainsSpec) for d in v.allowed]
    for s in task.authorized_sources:
        if s.kind == "external":
            domains += [d.lower().removeprefix("www.") for d in _DOMAIN.findall(f"{s.name} {s.note}")
                        if not re.search(r"\.(?:xlsx|docx|pptx|csv|pdf|txt|json|md)$", d, re.I)]
    if task.corpus_discipline == "closed":
        return list(dict.fromkeys(domains))  # usually none: any external host is unauthorised
    return list(dict.fromkeys(domains)) or None


def citation_dependent(task: DeliverableTask) -> list[VerifierSpec]:
    """The verifiers whose pass condition names a specific source (C.2 class 4): citation_domains,
    and any other whose id, pattern, criterion or description speaks of citing or sources, has a
    URL, or names an authorised source or an input file."""
    names = [s.name for s in task.authorized_sources if len(s.name) >= 4] + list(task.inputs)
    out: list[VerifierSpec] = []
    for v in task.verifiers:
        if isinstance(v, CitationDomainsSpec):
            out.append(v)
            continue
        text = " ".join([v.id.replace("_", " ").replace("-", " ")]
                        + [str(getattr(v, f, "") or "") for f in ("pattern", "criterion", "description")])
        if (re.search(r"\b(?:cit(?:e|es|ed|ing|ation)s?|sources?|https?://)\b", text, re.I)
                or any(n.lower() in text.lower() for n in names)):
            out.append(v)
    return out


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence around text[start:end] (a line at most), clipped to 300 characters."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    before = [m.end() for m in re.finditer(r"[.!?]\s+(?=[A-Z(\[])", text[line_start:start])]
    s = line_start + (before[-1] if before else 0)
    after = re.search(r"[.!?](?:\s|$)", text[end:line_end])
    e = end + after.end() if after else line_end
    return " ".join(text[s:e].split())[:300]


def _figures(text: str) -> list[float]:
    out = []
    for m in _FIGURE.finditer(text):
        raw = m.group("num")
        value = float(raw.replace(",", ""))
        if raw.isdigit() and 1900 <= value <= 2100 and not m.group("cur") and not m.group("pct"):
            continue  # a year
        if m.group("cur") or m.group("pct") or "." in raw or value >= 10:
            out.append(value)
    return out


def _supported(claim: str, cited: str, text: str) -> tuple[bool | None, list[float]]:
    """(whether the source states the claim's figures, the claim's figures); None without
    figures or recorded text. False only when the source states none of them: a citing sentence
    often goes on to compute from the sourced figure, and a derived figure is not the source's.
    The cited URL or name is taken out of the claim first (its digits are no figure)."""
    figures = _figures(claim.replace(cited, " "))
    if not figures or not text.strip():
        return None, figures
    have = set(_figures(text)) | {float(m) for m in re.findall(r"\d+(?:\.\d+)?", text.replace(",", ""))}
    found = [f for f in figures if any(abs(f - h) <= 1e-9 * max(1.0, abs(f)) for h in have)]
    return bool(found), figures


def _texts(submission: DeliverableSubmission, outputs: Path | None) -> list[tuple[str | None, str]]:
    """(where, text) of the response and each readable produced file (hyperlink targets too)."""
    from deskbench.runs.outputs import output_file
    from deskbench.tracks.deliverables.scoring.office import read_output

    out: list[tuple[str | None, str]] = [(None, submission.response)]
    for rec in submission.files:
        path = output_file(outputs, rec.name)
        if path is None:
            continue
        try:
            doc = read_output(path)
        except UserError:  # does not open, over a file limit, crashed its reader: no citations read
            continue
        text = doc.raw or doc.text
        if path.suffix.lower() in _OFFICE:
            text += "\n" + "\n".join(hyperlink_targets(path))
        out.append((rec.name, text))
    return out


def _document_text(task: DeliverableTask, name: str) -> str:
    from deskbench.tracks.deliverables.scoring.office import read_output

    if task.directory is None:
        return ""
    try:
        return read_output(task.directory / name).text
    except (UserError, OSError):  # no reader for it (a PDF), or it does not open: support not checked
        return ""


def validate_citations(task: DeliverableTask, submission: DeliverableSubmission, outputs: Path | None,
                       trajectory: Sequence[TrajectoryStep]) -> list[CitationCheck]:
    """The C.3 checks on every source the response and its files cite (module docstring)."""
    sources = recorded_sources(trajectory)
    allowed = authorised_domains(task)
    inputs = {n.lower(): n for n in task.inputs}
    input_sources = [s.name.lower() for s in task.authorized_sources if s.kind == "input_file"]
    outputs_named = {o.name.lower() for o in task.required_outputs}
    checks: list[CitationCheck] = []
    seen: set[tuple[str | None, str]] = set()
    for where, text in _texts(submission, outputs):
        for m in _URL.finditer(text):
            url = m.group(0).rstrip(".,;:!?)]}>*_")
            if (where, normalise_url(url)) in seen:
                continue
            seen.add((where, normalise_url(url)))
            claim = _sentence(text, m.start(), m.start() + len(url))
            src = sources.get(normalise_url(url))
            issues: list[str] = []
            exists = src is not None and not (src.status is not None and src.status >= 400)
            if src is None:
                issues.append(f"{url} is not among the sources the run recorded (never searched or opened)")
            elif not exists:
                issues.append(f"{url} did not resolve when fetched (HTTP {src.status})")
            supports, figures = _supported(claim, url, src.text if src is not None else "")
            if supports is False:
                issues.append(f"{url} states none of {', '.join(f'{f:g}' for f in figures)} "
                              f"(the figures of: {claim[:120]})")
            host = _host(url)
            authorised = None if allowed is None else host_allowed(host, allowed)
            if authorised is False:
                issues.append(f"{host} is not an authorised source ("
                              + (", ".join(allowed) if allowed else "closed corpus: no external source") + ")")
            checks.append(CitationCheck(source=url, kind="url", where=where, claim=claim, exists=exists,
                                        supports=supports, authorised=authorised, issues=issues))
        spans = [(m.start(), m.end()) for m in _URL.finditer(text)]
        found = [(m.start(), m.end(), inputs[n.lower()]) for n in task.inputs
                 for m in re.finditer(re.escape(n), text, re.I)]
        found += [(m.start(), m.end(), m.group(0)) for m in _DOC.finditer(text) if m.group(0).lower() not in inputs]
        for start, end, name in sorted(found):
            low = name.lower()
            if low in outputs_named or (where, low) in seen or any(a <= start < b for a, b in spans):
                continue
            seen.add((where, low))
            claim = _sentence(text, start, end)
            issues = []
            exists = low in inputs
            if not exists:
                issues.append(f"{name} is not one of the task's files ({', '.join(task.inputs)})")
            supports, figures = _supported(claim, name, _document_text(task, inputs[low]) if exists else "")
            if supports is False:
                issues.append(f"{name} states none of {', '.join(f'{f:g}' for f in figures)} "
                              f"(the figures of: {claim[:120]})")
            authorised = (low in input_sources) if (exists and input_sources) else None
            if authorised is False:
                issues.append(f"{name} is not among the authorised sources")
            checks.append(CitationCheck(source=name, kind="document", where=where, claim=claim, exists=exists,
                                        supports=supports, authorised=authorised, issues=issues))
    return checks


def affected_verifier(check: CitationCheck, dependent: Sequence[VerifierSpec]) -> VerifierSpec | None:
    """The citation-dependent verifier a failed check is recorded on, among those reading the
    same document (else all): one whose pattern names the cited source (it passed on the strength
    of that citation); for a failure of the authorised list alone, a citation_domains verifier;
    else a citation_domains verifier, else the first."""
    same = [v for v in dependent if v.file == check.where] or list(dependent)
    only_authorised = all("is not an authorised source" in i or "is not among the authorised sources" in i
                          for i in check.issues)
    if not only_authorised:
        for v in same:
            pattern = getattr(v, "pattern", None)
            if isinstance(pattern, str) and re.search(pattern, f"{check.source} {check.claim}",
                                                      re.I if getattr(v, "ignore_case", True) else 0):
                return v
    domains = next((v for v in same if isinstance(v, CitationDomainsSpec)), None)
    return domains if domains is not None else (same[0] if same else None)


def verifier_status(results: Sequence[VerifierResult] | None, vid: str) -> str | None:
    for r in results or []:
        if r.id == vid:
            return r.status
    return None
