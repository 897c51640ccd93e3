"""Retriever kinds written outside deskbench, as a plugin writes them (search/retriever.py's
protocols only): found by module path (`retriever_plugins:PINNED`) or by an entry point of
`deskbench.retrievers` (tests/search/test_retriever_cli.py), with no model to download.

`pinned=DOC:PAGE[,DOC:PAGE...]`: every search returns those pages, in that order, whatever the
query; a page not in the corpus is refused when opened, as a missing model would be. So a run
searching through it is told from one searching with BM25 by the pages its searches returned."""

from __future__ import annotations

from deskbench.errors import UserError
from deskbench.search.index import ScoredPage
from deskbench.search.retriever import PageSource, Retriever


class PinnedRetriever:
    def __init__(self, pages: list[tuple[str, int]], model: str) -> None:
        self.pages, self.model = pages, model

    def search(self, query: str, k: int) -> list[ScoredPage]:
        return [ScoredPage(doc, page, float(len(self.pages) - i)) for i, (doc, page) in enumerate(self.pages)][:k]

    def identity(self) -> dict[str, object]:
        return {"kind": "pinned", "model": self.model, "pages": [list(p) for p in self.pages]}


class PinnedKind:
    name = "pinned"
    needs_model = True
    summary = "the pages named as its model, in that order, for every query (a test plugin)"

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        assert model is not None
        known = {(doc, page) for doc, page, _ in corpus.page_keys()}
        pages = []
        for item in model.split(","):
            doc, _, page = item.rpartition(":")
            if not page.isdigit() or (doc, int(page)) not in known:
                raise UserError(f"--retriever pinned={model}: {item!r} is not a page of the corpus at {corpus.root}")
            pages.append((doc, int(page)))
        return PinnedRetriever(pages, model)


PINNED = PinnedKind()
