"""Lexical solvability (MADQA §3, Appendix E.1, Table 8): could Ctrl+F find the evidence?

For each question, the n-grams (n = 1, 2, 3) of its words after removing stopwords and question
words; then (1) overlap: the share of those n-grams present in the gold evidence pages' text,
(2) pages matched: corpus pages containing at least one of them, (3) precision: the share of matched
pages that are gold evidence, (4) recall: the share of gold pages matched. Pages get the same
treatment (stopwords out, then n-grams), so a bigram means the same on both sides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from statistics import median

import numpy as np
from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.tracks.docqa.agents.lexical import STOPWORDS
from deskbench.tracks.docqa.tasks import DocQATask

NS: tuple[int, ...] = (1, 2, 3)
QUESTION_WORDS = frozenset(
    ["describe", "list", "name", "give", "provide", "state", "identify", "according", "mentioned",
     "tell", "explain", "many", "much", "not", "can", "could", "would", "should", "i", "me", "you"]
)
_WORD = re.compile(r"[^\W_]+")
_BATCH = 500


def content_words(text: str) -> list[str]:
    """Lower-cased words without stopwords and question words, in order."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS and w not in QUESTION_WORDS]


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    toks = content_words(text)
    return {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)}


class QuestionOverlap(BaseModel):
    id: str
    n: int
    ngrams: int  # distinct question n-grams
    overlap: float | None  # share present in the evidence pages; None without n-grams or evidence
    pages_matched: int | None  # corpus pages with at least one; None without a corpus scan
    precision: float | None  # gold pages among matched pages; None when nothing matched
    recall: float | None  # gold pages matched / gold pages


class NgramSummary(BaseModel):
    n: int
    questions: int
    mean_overlap: float | None
    median_pages: float | None
    precision: float | None  # mean over questions that matched any page
    recall: float | None  # mean over questions with evidence


class LexicalReport(BaseModel):
    pages: int  # corpus pages scanned
    summary: list[NgramSummary]
    questions: list[QuestionOverlap]


def question_overlap(
    task: DocQATask, n: int, evidence_text: str, matched: set[tuple[str, int]] | None = None,
) -> QuestionOverlap:
    """One question at one n: overlap with `evidence_text` and, given the set of corpus pages that
    contain any question n-gram, pages matched, precision and recall."""
    grams = ngrams(task.question, n)
    gold = {(e.document, e.page) for e in task.evidence}
    have = ngrams(evidence_text, n)
    overlap = len(grams & have) / len(grams) if grams and gold else None
    precision = recall = None
    if matched is not None:
        hit = len(matched & gold)
        precision = hit / len(matched) if matched else None
        recall = hit / len(gold) if gold else None
    return QuestionOverlap(id=task.id, n=n, ngrams=len(grams), overlap=overlap,
                           pages_matched=None if matched is None else len(matched),
                           precision=precision, recall=recall)


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


def summarise(rows: Sequence[QuestionOverlap]) -> list[NgramSummary]:
    out = []
    for n in sorted({r.n for r in rows}):
        rs = [r for r in rows if r.n == n]
        pages = [r.pages_matched for r in rs if r.pages_matched is not None]
        out.append(NgramSummary(n=n, questions=len(rs), mean_overlap=_mean(r.overlap for r in rs),
                                median_pages=float(median(pages)) if pages else None,
                                precision=_mean(r.precision for r in rs), recall=_mean(r.recall for r in rs)))
    return out


def lexical_analysis(
    tasks: Sequence[DocQATask], pages: Iterable[tuple[str, int, str]], ns: Sequence[int] = NS,
) -> LexicalReport:
    """Overlap, pages matched, precision and recall of every task at every n, scanning `pages`
    ((document, page, text), each read once) for the question n-grams."""
    wanted = {(t.id, n): ngrams(t.question, n) for t in tasks for n in ns}
    gold_pages = {(e.document, e.page) for t in tasks for e in t.evidence}
    # Which questions own each n-gram, so one pass over the corpus serves every question.
    owners: dict[tuple[str, ...], list[str]] = {}
    for (tid, _n), grams in wanted.items():
        for g in grams:
            owners.setdefault(g, []).append(tid)
    matched: dict[tuple[str, int], set[tuple[str, int]]] = {k: set() for k in wanted}
    evidence: dict[tuple[str, int], str] = {}
    scanned = 0
    for doc, page, text in pages:
        scanned += 1
        if (doc, page) in gold_pages:
            evidence[(doc, page)] = text
        for n in ns:
            for g in ngrams(text, n) & owners.keys():
                for tid in owners[g]:
                    matched[(tid, n)].add((doc, page))
    rows: list[QuestionOverlap] = []
    for t in tasks:
        ev_text = "\n".join(evidence.get((e.document, e.page), "") for e in t.evidence)
        rows.extend(question_overlap(t, n, ev_text, matched[(t.id, n)]) for n in ns)
    return LexicalReport(pages=scanned, summary=summarise(rows), questions=rows)


def corpus_pages(corpus_dir: Path) -> Iterable[tuple[str, int, str]]:
    """Every page of a corpus, read in batches."""
    from deskbench.corpus import Corpus

    corpus = Corpus.open(corpus_dir)  # opened now: a bad directory fails before any work
    keys = [(d.doc_id, p) for d in corpus.documents() for p in range(1, d.page_count + 1)]

    def scan() -> Iterator[tuple[str, int, str]]:
        for start in range(0, len(keys), _BATCH):
            batch = keys[start:start + _BATCH]
            yield from ((d, p, text) for (d, p), text in zip(batch, corpus.page_texts(batch), strict=True))

    return scan()


def load_lexical(tasks_path: Path, corpus_dir: Path) -> LexicalReport:
    from deskbench.tracks.docqa.tasks import read_tasks

    if not tasks_path.is_file():
        raise UserError(f"--tasks {tasks_path} is not a file; give a docqa tasks JSONL")
    tasks = read_tasks(tasks_path).items
    if not tasks:
        raise UserError(f"{tasks_path} holds no tasks")
    return lexical_analysis(tasks, corpus_pages(corpus_dir))
