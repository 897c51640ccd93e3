"""HEAVEN (Kim et al. 2025, "Hybrid-Vector Retrieval for Visually Rich Documents"): `--retriever
heaven=DSE,COLQWEN[,option=value...]`, as MADQA's official baseline runs it (baselines/heaven/,
commit 978fa76; the paper's G.3 and Table 13).

Stage 1 (retrieval.py _stage1_with_vs_pages): the query's DSE vector against the VS-pages
(heaven_vs.py) and against every page. A page's VS-score is its best VS-page's; the pages outside
the top `vs_filter` share by VS-score have their page score zeroed (not dropped); a page's stage-1
score is alpha * VS-score + (1 - alpha) * page score, and the top k1 go on.

Stage 2 (_stage2_rerank): the query's ColQwen token vectors split by part of speech (query_filtering.py
POSTokenFilter: the tokens decoded one by one, special tokens and <|endoftext|> dropped, all-caps
ones lowered, the first kept token, "Query", set aside, nouns (tags N*) key, the rest non-key).
Every candidate gets MaxSim over the key tokens (over all tokens when there are none); the best
max(k, int(k1 * rho)) go on and get MaxSim over the non-key tokens too; the final score is
beta * stage-1 score + (1 - beta) * (key + non-key), best k returned.

Values: the official `ask`/`evaluate` defaults and example.sh (k1 200, k2 5, alpha 0.1, beta 0.3,
VS filter 0.5, rho 0.25), which are also Table 13's; the index side passes --use-vs-pages
--reduction-factor 15 --use-dla. Where the code and the paper differ (the code groups title regions
across the whole corpus, not per document; the DSE query image is qwen_vl_utils' 56x56 rounding of
its 1x1 request) the code is followed. Options after the models change them, e.g.
`heaven=/m/dse,/m/colqwen2.5,k1=100,layout=grid`; every value is recorded in `identity()`.

POS tags come from NLTK's averaged perceptron tagger when nltk and its data are installed (nothing
is downloaded); else from the named fallback below, and the identity says which.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from deskbench.errors import UserError
from deskbench.search.embedded import heaven_vs, store
from deskbench.search.retriever import PageSource, Retriever, index_folder

if TYPE_CHECKING:
    from PIL import Image

    from deskbench.search.embedded.late_visual import LateVisualRetriever
    from deskbench.search.embedded.visual import DseRetriever
    from deskbench.search.index import ScoredPage


@dataclass(frozen=True)
class HeavenOptions:
    """HEAVEN's values (the official example.sh, = the paper's Table 13) and the VS-page layout."""

    k1: int = 200  # --stage1-k
    k2: int = 5  # --stage2-k: the pages the heaven agent shows its model
    reduction_factor: int = 15  # r
    vs_filter: float = 0.5  # --vs-page-filter-ratio
    rho: float = 0.25  # --query-filter-ratio
    alpha: float = 0.1
    beta: float = 0.3
    vs_pages: bool = True  # --use-vs-pages (the official default)
    query_filtering: bool = True  # not --no-query-filtering
    layout: str = "auto"  # heaven_vs.LAYOUTS; official --use-dla: DocLayout-YOLO

    def record(self) -> dict[str, object]:
        return asdict(self)


def parse_model(text: str) -> tuple[str, str | None, HeavenOptions]:
    """`DSE,COLQWEN[,name=value...]` (or `DSE` alone: stage 1 only, the official --stage2-encoder none)."""
    items = [p.strip() for p in text.split(",")]
    models = [p for p in items if "=" not in p]
    settings = dict(p.split("=", 1) for p in items if "=" in p)
    if not 1 <= len(models) <= 2 or not all(models) or items[:len(models)] != models:
        raise UserError(f"--retriever heaven={text}: give the DSE model, then the ColQwen2.5 model, then options: "
                        "heaven=MrLight/dse-qwen2-2b-mrl-v1,/models/colqwen2.5-hf[,k1=200,layout=grid,...]")
    options = HeavenOptions()
    known = {f.name: f.type for f in fields(HeavenOptions)}
    values: dict[str, Any] = {}
    for name, raw in settings.items():
        if name not in known:
            raise UserError(f"--retriever heaven=...,{name}={raw}: no option {name!r}; options are {', '.join(known)}")
        kind = type(getattr(options, name))
        try:
            if kind is bool:
                if raw not in ("true", "false"):
                    raise ValueError(raw)
                values[name] = raw == "true"
            else:
                values[name] = kind(raw)
        except ValueError:
            raise UserError(f"--retriever heaven=...,{name}={raw}: {name} takes a {kind.__name__} "
                            f"(default {getattr(options, name)})") from None
    options = replace(options, **values)
    if options.layout not in heaven_vs.LAYOUTS:
        raise UserError(f"--retriever heaven=...,layout={options.layout}: choose one of {', '.join(heaven_vs.LAYOUTS)}")
    return models[0], (models[1] if len(models) == 2 else None), options


# -- stage 1 ------------------------------------------------------------------------------------


def stage1(page_sims: np.ndarray, vs_sims: np.ndarray | None, vs_pages: Sequence[Sequence[int]], alpha: float,
           vs_filter: float, k: int) -> list[tuple[int, float]]:
    """The top k pages (index, score) of stage 1 (module docstring); without VS-pages, by page
    similarity alone (_stage1_direct). numpy's argsort as the official code calls it, so pages of
    equal score come out in its order."""
    if vs_sims is None:
        top = np.argsort(page_sims)[::-1][:k]
        return [(int(i), float(page_sims[i])) for i in top]
    n = len(page_sims)
    best: dict[int, float] = {}
    for v, pages in enumerate(vs_pages):
        for p in pages:
            best[p] = max(best.get(p, -np.inf), float(vs_sims[v]))
    vs_score = np.zeros(n)  # a page in no VS-page scores 0
    for p, s in best.items():
        vs_score[p] = s
    keep = max(1, int(n * vs_filter))
    mask = np.zeros(n)
    mask[np.argsort(vs_score)[::-1][:keep]] = 1.0
    final = alpha * vs_score + (1 - alpha) * (page_sims * mask)
    top = np.argsort(final)[::-1][:k]
    return [(int(i), float(final[i])) for i in top]


# -- stage 2: query-token filtering and re-ranking ---------------------------------------------


class PosTagger(Protocol):
    """Penn Treebank tags for tokens (HEAVEN keeps the nouns, tags N*, as key tokens)."""

    name: str

    def tag(self, tokens: list[str]) -> list[str]: ...

    def words(self, text: str) -> list[str]: ...


class NltkTagger:
    """The official tagger: nltk.pos_tag (the averaged perceptron), its data already installed."""

    name = "NLTK averaged perceptron tagger (official)"

    def tag(self, tokens: list[str]) -> list[str]:
        import nltk

        return [t for _, t in nltk.pos_tag(tokens)]

    def words(self, text: str) -> list[str]:
        import nltk

        try:
            return list(nltk.word_tokenize(text))
        except LookupError:  # punkt missing: the tagger data alone was installed
            return _WORDS.findall(text)


_WORDS = re.compile(r"\w+|[^\w\s]")
_CLOSED_WORDS = """
a an the this that these those some any each every no all both either neither much many more most few less
least several such what which who whom whose when where why how whether if than then
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
one ones oneself myself yourself himself herself itself ourselves themselves
be is am are was were been being do does did done doing have has had having
can could may might must shall should will would ought
and or but nor so yet not also only just very too as
of in on at by for with about against between into through during before after above below to from up down
out off over under again further per via within without across along among around upon toward towards
there here please list give find show tell state name according based
"""
CLOSED_CLASS = frozenset(_CLOSED_WORDS.split())


class ClosedClassTagger:
    """Fallback tagger: a word is a noun ("NN") unless it is a number ("CD"), punctuation (":"), or
    one of a closed list of function words and question words ("X"). Coarser than NLTK's."""

    name = "closed-class word list (fallback; official: NLTK averaged perceptron tagger)"

    def tag(self, tokens: list[str]) -> list[str]:
        out = []
        for t in tokens:
            word = t.strip().lower()
            if not any(c.isalnum() for c in word):
                out.append(":")
            elif word.replace(".", "").replace(",", "").isdigit():
                out.append("CD")
            elif word in CLOSED_CLASS or not any(c.isalpha() for c in word):
                out.append("X")
            else:
                out.append("NN")
        return out

    def words(self, text: str) -> list[str]:
        return _WORDS.findall(text)


def pos_tagger() -> PosTagger:
    """NLTK's tagger when nltk and its tagger data are on this machine (never downloaded), else
    the fallback."""
    if importlib.util.find_spec("nltk") is not None:
        try:
            import nltk

            nltk.data.find("taggers/averaged_perceptron_tagger_eng")
            return NltkTagger()
        except LookupError:
            pass
    return ClosedClassTagger()


def split_tokens(decoded: Sequence[str | None], tagger: PosTagger) -> tuple[list[int], list[int]] | None:
    """POSTokenFilter.split_embeddings' first method: key (noun) and non-key positions of the
    query's tokens; None when neither has any (the caller then falls back to words)."""
    valid: list[int] = []
    cleaned: list[str] = []
    for i, tok in enumerate(decoded):
        if tok is None or tok == "<|endoftext|>":
            continue
        if tok.upper() == tok:
            tok = tok.lower()
        valid.append(i)
        cleaned.append(tok.strip())
    if not cleaned:
        return None
    tags = tagger.tag(cleaned)
    key = [i for n, (i, t) in enumerate(zip(valid, tags, strict=True)) if n > 0 and t.startswith("N")]
    other = [i for n, (i, t) in enumerate(zip(valid, tags, strict=True)) if n > 0 and not t.startswith("N")]
    return (key, other) if key or other else None


def split_words(query: str, n_vectors: int, tagger: PosTagger) -> tuple[list[int], list[int]]:
    """The second method: the query's words tagged, positions shifted by half the extra vectors."""
    words = tagger.words(query)
    tags = tagger.tag(words)
    offset = (n_vectors - len(words)) // 2 if n_vectors != len(words) else 0
    key = [i + offset for i, t in enumerate(tags) if t.startswith("N") and 0 <= i + offset < n_vectors]
    other = [i + offset for i, t in enumerate(tags) if not t.startswith("N") and 0 <= i + offset < n_vectors]
    return key, other


MaxSim = Callable[[np.ndarray, Sequence[int]], list[float]]
"""MaxSim of query vectors against candidate pages (by index), in their order."""


def stage2(candidates: Sequence[tuple[int, float]], query: np.ndarray, split: tuple[list[int], list[int]] | None,
           maxsim: MaxSim, k: int, rho: float, beta: float) -> list[tuple[int, float]]:
    """The re-ranking of stage 1's candidates (module docstring); `split` None: every query token,
    no refinement (the official --no-query-filtering)."""
    pages = [i for i, _ in candidates]
    first = dict(candidates)
    if split is None:
        scores = maxsim(query, pages)
        ranked = [(i, beta * first[i] + (1 - beta) * s) for i, s in zip(pages, scores, strict=True)]
    else:
        key, other = split
        key_scores = dict(zip(pages, maxsim(query[key] if key else query, pages), strict=True))
        refine = max(k, int(len(candidates) * rho))
        kept = sorted(pages, key=lambda i: key_scores[i], reverse=True)[:refine]
        other_scores = maxsim(query[other], kept) if other else [0.0] * len(kept)
        ranked = [(i, beta * first[i] + (1 - beta) * (key_scores[i] + o)) for i, o in zip(kept, other_scores, strict=True)]
    ranked.sort(key=lambda r: r[1], reverse=True)
    return ranked[:k]


# -- the retriever --------------------------------------------------------------------------------


QUERY_IMAGE_SIDE = 56
"""smart_resize(1, 1) with qwen_vl_utils' MIN_PIXELS (4 * 28 * 28): sides ceil(56 / 28) * 28."""


class HeavenRetriever:
    """DSE over VS-pages and pages, then ColQwen re-ranking (module docstring)."""

    def __init__(self, corpus: PageSource, dse: DseRetriever, colqwen: LateVisualRetriever | None,
                 options: HeavenOptions, detector: heaven_vs.LayoutDetector | None, tagger: PosTagger | None = None) -> None:
        """`detector` None: the official no-DLA VS-pages (grids); `tagger` None: pos_tagger()."""
        self.dse, self.colqwen, self.options = dse, colqwen, options
        self.keys = list(dse.vectors.keys)
        if colqwen is not None and [k[:2] for k in colqwen.vectors.keys] != [k[:2] for k in self.keys]:
            raise UserError("--retriever heaven: the DSE and ColQwen indexes hold different pages; delete the corpus's "
                            "retrievers/ folder and run again")
        self.tagger = tagger or pos_tagger()
        self.detector = detector
        self._lock = threading.Lock()
        self.vs_vectors: np.ndarray | None = None
        self.vs_folder: Path | None = None  # where the VS-pages' vectors are (and, beside it, their pages)
        self.vs_pages: list[list[int]] = []
        if options.vs_pages:
            self.vs_vectors, self.vs_pages = self._build_vs_pages(corpus)

    # VS-pages depend on every page (regions are grouped across the corpus): built once per corpus
    # state, stored next to the page vectors as their own index (keys: one per VS-page).
    def _build_vs_pages(self, corpus: PageSource) -> tuple[np.ndarray, list[list[int]]]:
        digest = hashlib.sha256(json.dumps(self.keys).encode()).hexdigest()[:16]
        described = heaven_vs.describe(self.detector)
        opts = {"reduction_factor": self.options.reduction_factor, "pages": digest, **described,
                "layout": self.options.layout}
        folder = self.vs_folder = index_folder(corpus, "heaven-vs", self.dse.folder.fingerprint, opts)
        groups_file = folder.with_name(folder.name + ".groups.json")
        identity = {"kind": "heaven-vs", "dse": self.dse.identity(), **opts}
        groups: list[list[int]] | None = None
        if groups_file.is_file():
            groups = json.loads(groups_file.read_text(encoding="utf-8"))
            have = store.read(folder, identity)
            if have is not None and len(have.keys) == len(groups):
                return have.vectors, groups
        print(f"heaven: building VS-pages over {len(self.keys)} pages ({described['dla']})", file=sys.stderr)
        count, make, groups = self._vs_plan(corpus)
        keys = [("#vs-page", i, digest) for i in range(count)]
        made = store.build(folder, keys, lambda chunk: self._embed_vs([make(k[1]) for k in chunk]), identity,
                           batch_size=self.dse.options.batch_size)
        tmp = groups_file.with_name(groups_file.name + ".tmp")
        tmp.write_text(json.dumps(groups), encoding="utf-8")
        tmp.replace(groups_file)
        return made.vectors, groups

    def _embed_vs(self, images: Sequence[heaven_vs.Pixels]) -> list[store.F32]:
        """DSE vectors of VS-page images, sized as pages are; an image Qwen2-VL cannot take (an
        aspect ratio over 200) gets a zero vector, as DSEEncoder.encode_images gives a failed image."""
        sized: list[Image.Image] = []
        failed: set[int] = set()
        for n, pixels in enumerate(images):
            try:
                sized.append(self.dse.page_image(_pil(pixels)))
            except ValueError:
                failed.add(n)
        rows = iter(self.dse.embed_images(sized) if sized else [])
        dims = int(self.dse.vectors.vectors.shape[1])
        return [np.zeros((1, dims), np.float32) if n in failed else next(rows) for n in range(len(images))]

    def _vs_plan(self, corpus: PageSource) -> tuple[int, Callable[[int], heaven_vs.Pixels], list[list[int]]]:
        """How many VS-pages, how to make VS-page i (lazily: one at a time), and their pages."""
        from deskbench.search.embedded.visual import page_images

        render = self.dse.options.render

        def image(i: int) -> heaven_vs.Pixels:
            return np.asarray(page_images(corpus, [self.keys[i]], render)[0], dtype=np.uint8)

        if self.detector is None:
            grid = heaven_vs.grid_plan(len(self.keys), self.options.reduction_factor)
            return len(grid.pages), lambda v: heaven_vs.vs_page_image(grid, v, [], image, grid_only=True), grid.pages
        pdf_of = getattr(corpus, "pdf_path", None)
        regions: list[heaven_vs.Region] = []
        for i, (doc, page, _) in enumerate(self.keys):
            pixels = image(i)
            for box in self.detector.titles(pdf_of(doc) if pdf_of else None, page, pixels):
                if heaven_vs.crop(pixels, box) is not None:
                    regions.append(heaven_vs.Region(i, box))
        plan = heaven_vs.plan([r.page for r in regions], len(self.keys), self.options.reduction_factor)
        count = len(plan.pages) if plan.whole_pages else len(plan.chunks)
        return count, lambda v: heaven_vs.vs_page_image(plan, v, regions, image), plan.pages

    def _maxsim(self, query: np.ndarray, pages: Sequence[int]) -> list[float]:
        assert self.colqwen is not None
        return self.colqwen.score_pages(query, [(self.keys[i][0], self.keys[i][1]) for i in pages])

    def dse_query(self, query: str) -> np.ndarray:
        """The query's DSE vector as HEAVEN's encoder makes it: the model card's dummy image asked
        at 1x1, which qwen_vl_utils' fetch_image rounds up to its minimum, 56x56 (4 image tokens)."""
        from PIL import Image

        from deskbench.search.embedded.visual import QUERY_PROMPT

        image = Image.new("RGB", (QUERY_IMAGE_SIDE, QUERY_IMAGE_SIDE))
        return np.asarray(self.dse._embed([QUERY_PROMPT.format(query=query)], [image])[0], dtype=np.float32)

    def stage1(self, query: str, k: int) -> list[tuple[int, float]]:
        q = self.dse_query(query)
        page_sims = self.dse.vectors.vectors @ q
        vs_sims = self.vs_vectors @ q if self.vs_vectors is not None else None
        return stage1(page_sims, vs_sims, self.vs_pages, self.options.alpha, self.options.vs_filter, k)

    def split(self, query: str, vectors: np.ndarray, input_ids: Sequence[int]) -> tuple[list[int], list[int]] | None:
        """The key / non-key token positions of a query (None: filtering off)."""
        if not self.options.query_filtering:
            return None
        assert self.colqwen is not None
        tok = self.colqwen.processor.tokenizer
        decoded = [tok.decode(int(t), skip_special_tokens=False) for t in input_ids]
        got = split_tokens(decoded, self.tagger)
        return got if got is not None else split_words(query, len(vectors), self.tagger)

    def ranked(self, query: str, k: int) -> list[tuple[int, float]]:
        """Page indices and scores, best first."""
        first = self.stage1(query, self.options.k1)
        if self.colqwen is None:
            return first[:k]
        q = self.colqwen.encode_query(query)
        return stage2(first, q.vectors, self.split(query, q.vectors, q.input_ids), self._maxsim, k,
                      self.options.rho, self.options.beta)

    def search(self, query: str, k: int) -> list[ScoredPage]:
        from deskbench.search.index import ScoredPage

        if k < 1:
            return []
        with self._lock:  # episodes search from worker threads; the models run one query at a time
            ranked = self.ranked(query, k)
        return [ScoredPage(self.keys[i][0], self.keys[i][1], s) for i, s in ranked]

    def identity(self) -> dict[str, object]:
        return {"kind": "heaven", "stage1": self.dse.identity(),
                "stage2": self.colqwen.identity() if self.colqwen is not None else None,
                "options": self.options.record(), **heaven_vs.describe(self.detector),
                "vs_pages": len(self.vs_pages) if self.options.vs_pages else None,
                "pos_tagger": self.tagger.name if self.options.query_filtering else None,
                "source": "MADQA baselines/heaven (commit 978fa76), example.sh values"}


def _pil(pixels: heaven_vs.Pixels) -> Image.Image:
    from PIL import Image

    return Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8), "RGB")


class HeavenKind:
    """`heaven=DSE,COLQWEN[,option=value...]`: HEAVEN's two-stage visual retrieval."""

    name = "heaven"
    needs_model = True
    summary = ("HEAVEN two-stage visual retrieval: DSE over VS-pages and pages, ColQwen2.5 re-ranking with "
               "query-token filtering; heaven=DSE_MODEL,COLQWEN_MODEL[,k1=200,layout=auto,...]")

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        from deskbench.search.embedded.late_visual import COLQWEN2, LateOptions, LateVisualRetriever
        from deskbench.search.embedded.visual import DseOptions, DseRetriever, find_model

        if model is None:
            raise UserError("--retriever heaven needs its models: heaven=DSE_MODEL,COLQWEN_MODEL, e.g. "
                            "heaven=MrLight/dse-qwen2-2b-mrl-v1,/models/colqwen2.5-v0.2-hf")
        dse_name, colqwen_name, options = parse_model(model)
        dse = DseRetriever(corpus, find_model("dse", dse_name, allow_download=allow_download), DseOptions())
        colqwen = None
        if colqwen_name is not None:
            colqwen = LateVisualRetriever(corpus, find_model("colqwen", colqwen_name, allow_download=allow_download),
                                          COLQWEN2, LateOptions())
        detector = heaven_vs.layout_detector(options.layout, allow_download=allow_download) if options.vs_pages else None
        return HeavenRetriever(corpus, dse, colqwen, options, detector)


HEAVEN = HeavenKind()
