"""Visual retrievers, multi-vector late interaction: `colqwen=MODEL` and `colpali=MODEL`.

ColPali (Faysse et al. 2024) and ColQwen2 embed a page image as one 128-d vector per image token
(plus the prompt's tokens) and a query as one per query token; a page's score is MaxSim, the sum
over the query's vectors of the best dot product with any of the page's (store.top_k_maxsim).
Both run through transformers' own classes (ColQwen2ForRetrieval / ColPaliForRetrieval and their
processors' process_images / process_queries, with the processors' prompts, query augmentation
tokens and image sizes), so a model is a transformers-format folder: vidore/colqwen2-v1.0-hf,
vidore/colpali-v1.3-hf, ... (colpali_engine's PEFT adapters, such as vidore/colqwen2.5-v0.2 that
HEAVEN re-ranks with, are merged into their base first: convert.py). A ColQwen2ForRetrieval whose
backbone is a Qwen2.5-VL (a converted ColQwen2.5) loads the same way.

Pages are rendered as HEAVEN renders them (144 dpi, at most 4,000,000 pixels; M3DocRAG's ColPali
also reads 144 dpi renders); the processor then sizes them. A page's rows are its non-padding
tokens, as when it is embedded alone (HEAVEN embeds one page at a time).

For HEAVEN's stage 2 (re-ranking the first stage's candidates with query-token filtering) the
retriever exposes `encode_query` (the query's vectors and token ids, to filter) and
`score_pages` (MaxSim of given query vectors against chosen pages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from deskbench.errors import UserError
from deskbench.search.embedded import store
from deskbench.search.embedded.dense import progress_line
from deskbench.search.embedded.visual import (
    ModelFolder,
    PageRender,
    check_model_type,
    device_and_dtype,
    find_model,
    hits,
    page_images,
)
from deskbench.search.retriever import PageSource, Retriever, index_folder

if TYPE_CHECKING:
    from PIL import Image

    from deskbench.search.index import ScoredPage


@dataclass(frozen=True)
class QueryTokens:
    """A query as the model sees it: one vector per non-padding token, and those tokens' ids."""

    vectors: store.F32  # (tokens, dims), unit rows
    input_ids: list[int]


@dataclass(frozen=True)
class LateOptions:
    """What changes the page vectors besides the model (HEAVEN's rendering by default)."""

    render: PageRender = field(default_factory=PageRender)
    batch_size: int = 4

    def record(self) -> dict[str, object]:
        return {"dpi": self.render.dpi, "page_max_pixels": self.render.max_pixels}


@dataclass(frozen=True)
class Family:
    """One late-interaction model family: its transformers classes and config model_type."""

    kind: str
    model_class: str
    processor_class: str
    model_types: tuple[str, ...]


COLQWEN2 = Family("colqwen", "ColQwen2ForRetrieval", "ColQwen2Processor", ("colqwen2",))
COLPALI_FAMILY = Family("colpali", "ColPaliForRetrieval", "ColPaliProcessor", ("colpali",))


class LateVisualRetriever:
    """Page images as token vectors; a query's score against a page is MaxSim."""

    def __init__(self, corpus: PageSource, folder: ModelFolder, family: Family, options: LateOptions) -> None:
        import torch
        import transformers

        check_model_type(folder, family.kind, family.model_types)
        self.folder, self.family, self.options = folder, family, options
        self.device, self.dtype = device_and_dtype()
        self._torch = torch
        self.processor = getattr(transformers, family.processor_class).from_pretrained(folder.path,
                                                                                         local_files_only=True)
        model = getattr(transformers, family.model_class).from_pretrained(folder.path, dtype=self.dtype,
                                                                          local_files_only=True)
        from deskbench.search.embedded.dense import refuse_unloaded

        refuse_unloaded(model, f"{family.kind}={folder.name}", folder.path)
        self.model = model.to(self.device).eval()
        self.dims = int(model.config.embedding_dim)
        self.vectors = store.build(
            index_folder(corpus, family.kind, folder.fingerprint, options.record()), corpus.page_keys(),
            lambda keys: self.embed_images(page_images(corpus, keys, options.render)),
            self.identity(), batch_size=options.batch_size,
            progress=progress_line(f"{family.kind}={folder.name}", len(corpus.page_keys())))

    def _rows(self, batch: Any) -> list[tuple[store.F32, list[int]]]:
        """Each input's embeddings without its padding (float32) and its token ids."""
        torch = self._torch
        inputs = {k: (v.to(self.dtype) if k == "pixel_values" else v).to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            out = self.model(**inputs).embeddings.float().cpu()
        mask = batch["attention_mask"].bool()
        return [(out[i][mask[i]].numpy(), batch["input_ids"][i][mask[i]].tolist()) for i in range(len(out))]

    def embed_images(self, images: Sequence[Image.Image]) -> list[store.F32]:
        """Page images to (tokens, dims) arrays, through the processor's process_images."""
        return [rows for rows, _ in self._rows(self.processor.process_images(images=list(images)))]

    def encode_query(self, query: str) -> QueryTokens:
        """A query through process_queries (its prefix and augmentation tokens included)."""
        rows, ids = self._rows(self.processor.process_queries(text=[query]))[0]
        return QueryTokens(rows, ids)

    def search_vectors(self, query: store.F32, k: int) -> list[ScoredPage]:
        """Top-k pages by MaxSim for query vectors (all of a query's, or a filtered subset)."""
        return hits(self.vectors, self.vectors.top_k_maxsim(query, k))

    def score_pages(self, query: store.F32, pages: Sequence[tuple[str, int]]) -> list[float]:
        """MaxSim of `query` against each of `pages` (a re-ranker's candidates), in their order."""
        where = {(d, p): i for i, (d, p, _) in enumerate(self.vectors.keys)}
        out: list[float] = []
        for page in pages:
            if page not in where:
                raise KeyError(f"page {page[1]} of {page[0]} is not in this retriever's index")
            i = where[page]
            rows = self.vectors.vectors[self.vectors.offsets[i]:self.vectors.offsets[i + 1]]
            out.append(float((query.astype(np.float32) @ rows.T).max(axis=1).sum()))
        return out

    def search(self, query: str, k: int) -> list[ScoredPage]:
        return self.search_vectors(self.encode_query(query).vectors, k)

    def identity(self) -> dict[str, object]:
        return {"kind": self.family.kind, "model": self.folder.name, "fingerprint": self.folder.fingerprint,
                "dims": self.dims, "scoring": "maxsim", "dtype": str(self.dtype).removeprefix("torch."),
                "classes": [self.family.model_class, self.family.processor_class], "images": self.options.record()}


class LateVisualKind:
    """A `KIND=MODEL` of late-interaction page-image retrieval."""

    needs_model = True

    def __init__(self, family: Family, summary: str, options: LateOptions | None = None) -> None:
        self.family = family
        self.name = family.kind
        self.summary = summary
        self.options = options or LateOptions()

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        if model is None:
            raise UserError(f"--retriever {self.name} needs a model: give {self.name}=MODEL")
        folder = find_model(self.name, model, allow_download=allow_download)
        return LateVisualRetriever(corpus, folder, self.family, self.options)


COLQWEN = LateVisualKind(COLQWEN2, "page images as ColQwen2 token vectors, MaxSim; e.g. colqwen=vidore/colqwen2-v1.0-hf")
COLPALI = LateVisualKind(COLPALI_FAMILY, "page images as ColPali token vectors, MaxSim; e.g. colpali=vidore/colpali-v1.3-hf")
