"""The corpus: PDFs ingested into a page store, a search index and a page-image cache."""

from deskbench.corpus.corpus import Corpus, SearchHit

__all__ = ["Corpus", "SearchHit"]
