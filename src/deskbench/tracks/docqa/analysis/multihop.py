"""Multi-hop difficulty (MADQA §5, Appendix H.1): does accuracy fall with the physical page gap
between evidence pages, or with their semantic distance?

- page gap (same-document items): "the page index difference between evidence locations" (H.1),
  so adjacent pages have gap 1; with three or more pages, the largest difference of a pair (last
  minus first page), as the semantic distance takes the largest distance of a pair. Bins (the paper
  does not give them): 1, 2, 3-5, 6+.
- semantic distance: 1 - cos of the evidence pages' TF-IDF vectors (the paper embeds pages with
  Snowflake Arctic Embed, which `--embedding` picks when it is installed: embedding_choice.py);
  with more than two pages, the largest distance
  of a pair (cross-document items: of a pair from different documents). Bins as Tables 14-15:
  0-0.15, 0.15-0.3, 0.3-0.45, 0.45-0.6, 0.6+.
Accuracy is reported per system and pooled over systems (the paper pools five models).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.analysis.drift import run_accuracies
from deskbench.tracks.docqa.analysis.embedding_choice import (
    EmbeddingChoice,
    EmbeddingUsed,
    choose_embedding,
)
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.textsim import (
    Embedder,
    cosine_distance,
    pearson_r,
    tfidf_matrix,
)
from deskbench.tracks.docqa.tasks import DocQATask, hop_type

GAP_BINS: tuple[tuple[str, int, int | None], ...] = (("1", 1, 1), ("2", 2, 2), ("3-5", 3, 5), ("6+", 6, None))
DISTANCE_BINS: tuple[tuple[str, float, float | None], ...] = (
    ("0-0.15", 0.0, 0.15), ("0.15-0.3", 0.15, 0.3), ("0.3-0.45", 0.3, 0.45), ("0.45-0.6", 0.45, 0.6), ("0.6+", 0.6, None),
)
POOLED = "all systems"


class MultihopItem(BaseModel):
    id: str
    hop_type: str  # cross_page (same document) or cross_doc
    pages: list[tuple[str, int]]
    page_gap: int | None  # same-document items only
    semantic_distance: float


class BinAccuracy(BaseModel):
    bin: str
    n: int  # item x system pairs with an accuracy
    items: int
    accuracy: float | None


class HopTypeAnalysis(BaseModel):
    n: int
    accuracy: float | None
    by_page_gap: list[BinAccuracy]  # empty for cross-document items
    by_semantic_distance: list[BinAccuracy]
    r_page_gap: float | None  # Pearson r of gap vs accuracy over item x system pairs
    r_semantic_distance: float | None


class SystemMultihop(BaseModel):
    system: str
    same_document: HopTypeAnalysis
    cross_document: HopTypeAnalysis


class MultihopReport(BaseModel):
    run: str
    method: str
    items: list[MultihopItem]
    systems: list[SystemMultihop]  # the last one pools every system (POOLED)
    scoring: AnalysisScoring | None = None  # what decided the accuracies (set by load_multihop)
    embedding: EmbeddingUsed | None = None  # what embedded the pages, with the fallback named (set by load_multihop)


def page_gap(pages: Sequence[tuple[str, int]]) -> int | None:
    """The page index difference between the evidence pages of one document (MADQA H.1): the
    largest of any pair, i.e. last page - first page (adjacent pages: 1); None when the evidence
    spans documents or has fewer than two distinct pages."""
    if len({d for d, _ in pages}) != 1:
        return None
    nums = {p for _, p in pages}
    if len(nums) < 2:
        return None
    return max(nums) - min(nums)


def gap_bin(gap: int) -> str:
    for label, lo, hi in GAP_BINS:
        if gap >= lo and (hi is None or gap <= hi):
            return label
    raise ValueError(f"page gap {gap} is below 1: two distinct pages differ by at least 1")


def distance_bin(distance: float) -> str:
    """Bins are closed below, open above: 0.15 falls in 0.15-0.3."""
    for label, lo, hi in DISTANCE_BINS:
        if distance >= lo and (hi is None or distance < hi):
            return label
    return DISTANCE_BINS[0][0]  # a rounding error below 0


def multihop_items(
    tasks: Sequence[DocQATask], page_texts: Callable[[list[tuple[str, int]]], list[str]],
    embed: Embedder | None = None,
) -> list[MultihopItem]:
    """The multi-hop tasks with their page gap and semantic distance. The TF-IDF is fitted over the
    distinct evidence pages of all multi-hop tasks together."""
    multi = [t for t in tasks if hop_type(t.evidence) in ("cross_page", "cross_doc")]
    pages_of = {t.id: list(dict.fromkeys((e.document, e.page) for e in t.evidence)) for t in multi}
    distinct = list(dict.fromkeys(p for t in multi for p in pages_of[t.id]))
    if not distinct:
        return []
    vectors = (embed or tfidf_matrix)(page_texts(distinct))
    row = {p: i for i, p in enumerate(distinct)}
    out = []
    for t in multi:
        pages = pages_of[t.id]
        kind = hop_type(t.evidence)
        pairs = [(a, b) for a, b in combinations(pages, 2) if kind == "cross_page" or a[0] != b[0]]
        dist = max(cosine_distance(vectors[row[a]], vectors[row[b]]) for a, b in pairs)
        out.append(MultihopItem(id=t.id, hop_type=kind, pages=pages, page_gap=page_gap(pages), semantic_distance=dist))
    return out


def _bins(
    points: Sequence[tuple[str, str, float]], labels: Sequence[str],
) -> list[BinAccuracy]:
    """points: (item id, bin label, accuracy)."""
    out = []
    for label in labels:
        accs = [a for _, b, a in points if b == label]
        out.append(BinAccuracy(bin=label, n=len(accs), items=len({i for i, b, _ in points if b == label}),
                               accuracy=float(np.mean(accs)) if accs else None))
    return out


def _analyse(items: Sequence[MultihopItem], accuracies: Sequence[Mapping[str, float | None]], same_doc: bool) -> HopTypeAnalysis:
    pts = [(it, float(a)) for acc in accuracies for it in items if (a := acc.get(it.id)) is not None]
    gaps = [(it, a) for it, a in pts if it.page_gap is not None]
    return HopTypeAnalysis(
        n=len(pts), accuracy=float(np.mean([a for _, a in pts])) if pts else None,
        by_page_gap=_bins([(it.id, gap_bin(it.page_gap), a) for it, a in gaps if it.page_gap is not None],
                          [b[0] for b in GAP_BINS]) if same_doc else [],
        by_semantic_distance=_bins([(it.id, distance_bin(it.semantic_distance), a) for it, a in pts],
                                   [b[0] for b in DISTANCE_BINS]),
        r_page_gap=pearson_r([float(it.page_gap or 0) for it, _ in gaps], [a for _, a in gaps]) if same_doc else None,
        r_semantic_distance=pearson_r([it.semantic_distance for it, _ in pts], [a for _, a in pts]),
    )


def multihop_report(
    items: Sequence[MultihopItem], accuracy_by_system: Mapping[str, Mapping[str, float | None]],
    run: str = "", method: str = "tfidf",
) -> MultihopReport:
    """Accuracy by bin per system, then pooled over all systems (when there are several)."""
    same = [i for i in items if i.hop_type == "cross_page"]
    cross = [i for i in items if i.hop_type == "cross_doc"]
    groups: list[tuple[str, list[Mapping[str, float | None]]]] = [(s, [a]) for s, a in accuracy_by_system.items()]
    if len(groups) > 1:
        groups.append((POOLED, list(accuracy_by_system.values())))
    systems = [SystemMultihop(system=s, same_document=_analyse(same, accs, True),
                              cross_document=_analyse(cross, accs, False)) for s, accs in groups]
    return MultihopReport(run=run, method=method, items=list(items), systems=systems)


def load_multihop(run_dir: Path, corpus_dir: Path, judging: Judging | None = None,
                  embedding: EmbeddingChoice | None = None) -> MultihopReport:
    """Multi-hop analysis of every system in a run, the page texts read from the corpus and
    embedded by `embedding` (default TF-IDF; the CLI chooses as embedding_choice.py says); answers
    scored by ANLS* or `judging`'s judge."""
    judging = judging or Judging()
    embedding = embedding or choose_embedding("tfidf")
    from deskbench.corpus import Corpus

    store = RunStore(run_dir, create=False)
    if not store.systems():
        raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
    corpus = Corpus.open(corpus_dir)
    items = multihop_items(store.tasks_of(DocQATask), corpus.page_texts, embedding.embedder("document"))
    if not items:
        raise UserError(f"the run in {run_dir} has no multi-hop task (evidence on two or more pages)")
    accs = {s: run_accuracies(store, s, judging) for s in store.systems()}
    store.close()
    report = multihop_report(items, accs, run=str(run_dir), method=embedding.method)
    report.scoring = judging.summary()
    report.embedding = embedding.used
    return report


def plot_multihop(report: MultihopReport, path: Path) -> None:
    """Figure 14: same-document accuracy by page gap and by semantic distance (pooled systems)."""
    from deskbench.analysis.plotting import pyplot, save_figure

    plt = pyplot()
    s = report.systems[-1]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = [("same document: page gap", s.same_document.by_page_gap),
              ("same document: semantic distance", s.same_document.by_semantic_distance),
              ("cross document: semantic distance", s.cross_document.by_semantic_distance)]
    for ax, (title, bins) in zip(axes, panels, strict=True):
        ax.bar([b.bin for b in bins], [100 * (b.accuracy or 0.0) for b in bins], color="#4878a8")
        for k, b in enumerate(bins):
            ax.text(k, 100 * (b.accuracy or 0.0) + 1, f"n={b.n}", ha="center", fontsize=8)
        ax.set_ylim(0, 110)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("accuracy (%)")
    fig.suptitle(f"Multi-hop accuracy ({s.system}, {report.method})")
    fig.tight_layout()
    save_figure(fig, path)
