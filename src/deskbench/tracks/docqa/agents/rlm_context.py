"""The corpus as the RLM's `context` string, with the paper's page markers, written once a run."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deskbench.corpus import Corpus
from deskbench.sandbox.stale import tagged_prefix


@dataclass(frozen=True)
class ContextStats:
    chars: int
    documents: int
    pages: int


def document_block(doc: str, texts: list[str]) -> str:
    """One document with the paper's markers; pages count from 1."""
    pages = "".join(f"[PAGE {n}]\n{text}\n[END PAGE {n}]\n" for n, text in enumerate(texts, start=1))
    return f"[FILE: {doc}]\n{pages}"


def write_context(corpus: Corpus, path: Path) -> ContextStats:
    """Every page of the corpus, document after document (blank line between), into `path`."""
    chars = pages = docs = 0
    with path.open("w", encoding="utf-8") as f:
        for record in corpus.documents():
            texts = corpus.page_texts([(record.doc_id, p) for p in range(1, record.page_count + 1)])
            block = ("\n" if docs else "") + document_block(record.doc_id, texts)
            f.write(block)
            chars += len(block)
            pages += len(texts)
            docs += 1
    path.chmod(0o644)  # read inside the jail by an unprivileged uid
    return ContextStats(chars=chars, documents=docs, pages=pages)


class CorpusContext:
    """The corpus written once as context.txt (a temp dir the agent owns) and shared by every
    episode of a run; rebuilt only for another corpus."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._root: Path | None = None
        self._stats: ContextStats | None = None

    async def get(self, corpus: Corpus) -> tuple[Path, ContextStats]:
        async with self._lock:
            if self._dir is None or self._root != corpus.root or self._stats is None:
                if self._dir is not None:
                    self._dir.cleanup()
                self._dir = tempfile.TemporaryDirectory(prefix=tagged_prefix("rlm-context"))
                path = Path(self._dir.name) / "context.txt"
                self._stats = await asyncio.to_thread(write_context, corpus, path)
                self._root = corpus.root
            return Path(self._dir.name) / "context.txt", self._stats
