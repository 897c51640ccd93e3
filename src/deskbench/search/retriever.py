"""Retrievers: what a search runs on, chosen per run (`--retriever SPEC`).

The agents search through `Corpus.search`; a run decides what answers it. The spec grammar:

    bm25                          the Whoosh-exact page index (the default; MADQA's official tool)
    KIND=MODEL                    a retriever kind with its model: a local folder, or a hub name
                                  already in the local Hugging Face cache (nothing is downloaded)
    A+B[+C...]                    hybrid: each part's ranking fused by reciprocal rank (RRF, k=60)

Kinds are found in a registry (built-ins, then the `deskbench.retrievers` entry points, then a
`package.module:Name` path), so a new retriever is a plugin, not an edit here. A kind's `open`
builds or updates its index over the corpus (stored in the corpus folder, per kind and model, so
it is built once) and returns a `Retriever`, whose `identity()` is recorded with the run's
configuration: a resume under another retriever or model is refused, as for any other setting.

This module knows the corpus only as a `PageSource` (what a retriever reads), so the core's corpus
package can import it without a cycle.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.corpus.images import ImageSpec
    from deskbench.search.index import PageIndex, ScoredPage

RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack, Clarke and Buettcher 2009), the value fusion
libraries default to: a page's fused score is the sum over parts of 1 / (RRF_K + rank)."""

FUSION_DEPTH = 100
"""How deep each part of a hybrid is read before fusing (at least k)."""


class PageSource(Protocol):
    """What a retriever reads from a corpus (`deskbench.corpus.Corpus` is one)."""

    root: Path
    index: PageIndex

    def page_keys(self) -> list[tuple[str, int, str]]:
        """Every page of the corpus as (document, page, the document's content hash), in order."""
        ...

    def page_texts(self, pages: Sequence[tuple[str, int]]) -> list[str]: ...

    def page_image(self, doc_id: str, page: int, spec: ImageSpec | None = None) -> bytes: ...


@runtime_checkable
class Retriever(Protocol):
    """An opened retriever: top-k pages for a query, best first."""

    def search(self, query: str, k: int) -> list[ScoredPage]: ...

    def identity(self) -> dict[str, object]:
        """What decides its rankings (kind, model, the model's weights hash, its options): recorded
        in the run's configuration and shown in the report."""
        ...


@runtime_checkable
class RetrieverKind(Protocol):
    """A kind of retriever (`bm25`, `dense`, ...): opens one over a corpus, building its index."""

    name: str
    needs_model: bool
    summary: str  # one line for `deskbench list retrievers` and the docs

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever: ...


@dataclass(frozen=True)
class Part:
    """One `KIND[=MODEL]` of a spec."""

    kind: str
    model: str | None = None

    def __str__(self) -> str:
        return self.kind if self.model is None else f"{self.kind}={self.model}"


@dataclass(frozen=True)
class RetrieverSpec:
    """A parsed `--retriever` value: one part, or several fused by RRF."""

    parts: tuple[Part, ...]

    def __str__(self) -> str:
        return "+".join(str(p) for p in self.parts)

    @property
    def is_default(self) -> bool:
        return self.parts == (Part("bm25"),)


DEFAULT = "bm25"
_KIND = re.compile(r"^[A-Za-z][\w.:-]*$")


def parse_spec(text: str, flag: str = "--retriever") -> RetrieverSpec:
    """`bm25`, `dense=PATH`, `bm25+dense=PATH`: one line naming what is wrong otherwise."""
    parts: list[Part] = []
    # a module path's colon and a Windows-free model path are kept; '+' separates the parts
    for raw in text.split("+"):
        item = raw.strip()
        kind, eq, model = item.partition("=")
        kind, model = kind.strip(), model.strip()
        if not kind or not _KIND.match(kind) or (eq and not model):
            raise UserError(f"{flag} {text!r}: {item!r} is not KIND or KIND=MODEL; e.g. {flag} bm25, "
                            f"{flag} dense=/models/arctic-embed, {flag} bm25+dense=/models/arctic-embed")
        parts.append(Part(kind, model or None))
    if len(set(parts)) != len(parts):
        raise UserError(f"{flag} {text!r} names a part twice; give each retriever of a hybrid once")
    return RetrieverSpec(tuple(parts))


# -- the registry --------------------------------------------------------------------------

# Built-in kinds by name -> "module:attribute", imported on first use (the embedding kinds import
# torch, which no other command should pay for).
BUILTIN: dict[str, str] = {
    "bm25": "deskbench.search.retriever:BM25",
    "dense": "deskbench.search.embedded.dense:DENSE",
    "colbert": "deskbench.search.embedded.colbert:COLBERT",
    "dse": "deskbench.search.embedded.visual:DSE",
    "colqwen": "deskbench.search.embedded.late_visual:COLQWEN",
    "colpali": "deskbench.search.embedded.late_visual:COLPALI",
    "heaven": "deskbench.search.embedded.heaven:HEAVEN",
}


def register_builtin(name: str, target: str) -> None:
    """Add a built-in kind (used by deskbench's own modules; a plugin uses the entry point)."""
    BUILTIN[name] = target


def kind(name: str) -> RetrieverKind:
    """The retriever kind `name`: a built-in, an entry point of `deskbench.retrievers`, or a
    `package.module:Name` path."""
    from deskbench.plugins import instance, lookup

    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        value: object = getattr(importlib.import_module(module), attr)
        origin = "built in"
    else:
        plugin = lookup("retrievers", name)
        if plugin is None:
            raise UserError(f"--retriever {name!r} is not a retriever kind; choose one of {', '.join(names())} "
                            "(or a plugin's entry point in deskbench.retrievers, or package.module:Name)")
        value, origin = instance(plugin), plugin.origin
    if not isinstance(value, RetrieverKind):
        raise UserError(f"retriever {name!r} ({origin}) is not a retriever kind: it needs name, needs_model, "
                        "summary and open(corpus, model, allow_download=...)")
    return value


def names() -> list[str]:
    """Every kind's name, built-ins first (plugins are not imported to list them)."""
    from deskbench.plugins import listing

    return [*BUILTIN, *(n for n, _ in listing("retrievers") if n not in BUILTIN)]


def check_spec(spec: RetrieverSpec | str, flag: str = "--retriever") -> RetrieverSpec:
    """`spec` parsed, each part's kind found (a built-in, an entry point, a module path) and its
    model given or not as the kind needs: a mistake is one line before anything is created.
    Models are looked for only when the retriever is opened."""
    if isinstance(spec, str):
        spec = parse_spec(spec, flag)
    for part in spec.parts:
        k = kind(part.kind)
        if k.needs_model and part.model is None:
            raise UserError(f"{flag} {part.kind} needs a model: give {part.kind}=MODEL (a local folder, or a hub "
                            "name already downloaded)")
        if not k.needs_model and part.model is not None:
            raise UserError(f"{flag} {part}: {part.kind} takes no model; give {part.kind} alone")
    return spec


def open_retriever(spec: RetrieverSpec | str, corpus: PageSource, *, allow_download: bool = False) -> Retriever:
    """Open (building or updating the index of) the retriever `spec` over `corpus`."""
    spec = check_spec(spec)
    opened = [kind(part.kind).open(corpus, part.model, allow_download=allow_download) for part in spec.parts]
    return opened[0] if len(opened) == 1 else Hybrid(opened)


# -- BM25: the page index ------------------------------------------------------------------


class Bm25Retriever:
    """The corpus's own page index, searched as MADQA's Whoosh tool searches (search/index.py)."""

    def __init__(self, index: PageIndex) -> None:
        self.index = index

    def search(self, query: str, k: int) -> list[ScoredPage]:
        return self.index.search(query, k).pages

    def identity(self) -> dict[str, object]:
        from deskbench.search.analyzer import ANALYZER_NAME

        return {"kind": "bm25", "analyzer": ANALYZER_NAME}


class _Bm25Kind:
    name = "bm25"
    needs_model = False
    summary = "BM25F over page text, as MADQA's official Whoosh tool ranks (the default)"

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        return Bm25Retriever(corpus.index)


BM25: RetrieverKind = _Bm25Kind()


# -- hybrid: reciprocal-rank fusion --------------------------------------------------------


class Hybrid:
    """Several retrievers' rankings fused by RRF; ties by the first part's order, then page order."""

    def __init__(self, parts: Sequence[Retriever], rrf_k: int = RRF_K) -> None:
        self.parts = list(parts)
        self.rrf_k = rrf_k

    def search(self, query: str, k: int) -> list[ScoredPage]:
        from deskbench.search.index import ScoredPage

        if k < 1:
            return []
        fused: dict[tuple[str, int], float] = {}
        first_seen: dict[tuple[str, int], tuple[int, int]] = {}
        for p, part in enumerate(self.parts):
            for rank, hit in enumerate(part.search(query, max(k, FUSION_DEPTH)), start=1):
                key = (hit.document, hit.page)
                fused[key] = fused.get(key, 0.0) + 1.0 / (self.rrf_k + rank)
                first_seen.setdefault(key, (p, rank))
        order = sorted(fused, key=lambda key: (-fused[key], first_seen[key]))
        return [ScoredPage(doc, page, fused[(doc, page)]) for doc, page in order[:k]]

    def identity(self) -> dict[str, object]:
        return {"kind": "hybrid", "fusion": "rrf", "rrf_k": self.rrf_k, "depth": FUSION_DEPTH,
                "parts": [p.identity() for p in self.parts]}


# -- what an embedding retriever stores ----------------------------------------------------


def model_fingerprint(folder: Path) -> str:
    """sha256 over a model folder's weight and config files (names and bytes), so an index built
    with other weights under the same path is never reused, and the run records which weights."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(path.relative_to(folder).as_posix().encode())
        h.update(b"\0")
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def index_folder(corpus: PageSource, kind_name: str, fingerprint: str, options: Mapping[str, object] | None = None) -> Path:
    """Where a kind's index over `corpus` lives: corpus/retrievers/KIND-HASH/, HASH over the model's
    fingerprint and the options that change the vectors (image size, pooling, ...)."""
    h = hashlib.sha256(fingerprint.encode())
    for key, value in sorted((options or {}).items()):
        h.update(f"\0{key}={value!r}".encode())
    return corpus.root / "retrievers" / f"{kind_name}-{h.hexdigest()[:16]}"

