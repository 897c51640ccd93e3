"""Retrieval alone: each task's question searched once per retriever, the pages returned scored
against the gold evidence (`deskbench retrieve`).

No model answers: this is the number users of retrieval benchmarks ask for, and the way to choose
a `--retriever` before paying for agent runs. The figures are those of scoring/retrieval.py
(evidence recall@k, reciprocal rank of the first gold page, every gold page within the depth), over
one search a task, overall and by hop type; deskbench's diagnostics, not a MADQA metric (the paper
scores final citations only). The query is the question as written (what a one-shot RAG system
sends) or its content words joined by OR (`keywords`: a lenient keyword query, which BM25's
Whoosh syntax otherwise reads as AND of every word); which one is named in the output.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel

from deskbench.corpus import Corpus
from deskbench.errors import one_of
from deskbench.search.retriever import RetrieverSpec, open_retriever, parse_spec
from deskbench.tracks.docqa.scoring.retrieval import K, RetrievalGroup, Tally
from deskbench.tracks.docqa.tasks import HOP_TYPES, DocQATask

QueryForm = Literal["question", "keywords"]
QUERY_FORMS: tuple[QueryForm, ...] = ("question", "keywords")
DEPTH = max(K)


class TaskRetrieval(BaseModel):
    """One task's search: what was asked and the pages returned, best first."""

    id: str
    query: str
    returned: list[tuple[str, int]]
    gold: list[tuple[str, int]]


class RetrieverResult(BaseModel):
    """One retriever over the tasks."""

    retriever: str  # the spec as given
    identity: dict[str, object]  # what decides its rankings (search/retriever.py Retriever.identity)
    open_seconds: float  # opening it, its index built or updated when needed
    query_ms_p50: float
    query_ms_p95: float
    no_pages: int  # searches that returned no page at all
    overall: RetrievalGroup
    by_hop_type: dict[str, RetrievalGroup]
    tasks: list[TaskRetrieval]


class RetrievalEval(BaseModel):
    query_form: QueryForm
    k: list[int]
    tasks: int  # tasks with gold evidence, each searched once per retriever
    tasks_without_evidence: int  # left out: nothing to score against
    results: list[RetrieverResult]


def query_of(task: DocQATask, form: QueryForm) -> str:
    if form == "question":
        return task.question
    from deskbench.tracks.docqa.generate.validate import content_words

    return " OR ".join(content_words(task.question)) or task.question


def evaluate(tasks: Sequence[DocQATask], corpus: Corpus, specs: Sequence[RetrieverSpec | str], *,
             query_form: str = "question", allow_download: bool = False,
             progress: Callable[[str], None] | None = None) -> RetrievalEval:
    """Search each task with gold evidence once per retriever (top DEPTH pages) and score it."""
    form: QueryForm = one_of(query_form, QUERY_FORMS, "--query")
    scored = [t for t in tasks if t.evidence]
    results = []
    for raw in specs:
        spec = parse_spec(raw) if isinstance(raw, str) else raw
        if progress is not None:
            progress(f"opening {spec} (its index is built on first use)")
        started = time.perf_counter()
        retriever = open_retriever(spec, corpus, allow_download=allow_download)
        opened = time.perf_counter() - started
        overall, by_hop = Tally(), {hop: Tally() for hop in HOP_TYPES}
        rows, times = [], []
        for task in scored:
            query = query_of(task, form)
            t0 = time.perf_counter()
            pages = retriever.search(query, DEPTH)
            times.append((time.perf_counter() - t0) * 1000)
            returned = [(p.document, p.page) for p in pages]
            gold = {(e.document, e.page) for e in task.evidence}
            overall.add([returned], gold)
            by_hop[task.hop_type].add([returned], gold)
            rows.append(TaskRetrieval(id=task.id, query=query, returned=returned, gold=sorted(gold)))
        results.append(RetrieverResult(
            retriever=str(spec), identity=retriever.identity(), open_seconds=round(opened, 3),
            query_ms_p50=round(statistics.median(times), 3) if times else 0.0,
            query_ms_p95=round(_p95(times), 3) if times else 0.0, no_pages=sum(not r.returned for r in rows),
            overall=overall.group(), by_hop_type={h: t.group() for h, t in by_hop.items()}, tasks=rows))
    return RetrievalEval(query_form=form, k=list(K), tasks=len(scored), tasks_without_evidence=len(tasks) - len(scored),
                         results=results)


def _p95(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def table(result: RetrievalEval) -> list[list[str]]:
    """Rows for the text table: retriever, recall@k..., MRR, all gold within DEPTH, p50 ms, open s."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    rows = [["retriever", *(f"R@{k}" for k in result.k), "MRR", f"all gold@{DEPTH}", "query p50 ms", "open s"]]
    for r in result.results:
        g = r.overall
        rows.append([r.retriever, *(pct(g.recall_at.get(k)) for k in result.k), pct(g.mrr), pct(g.evidence_reached),
                     f"{r.query_ms_p50:.2f}", f"{r.open_seconds:.2f}"])
    return rows
