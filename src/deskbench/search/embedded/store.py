"""The vectors of a corpus's pages for one embedding retriever, stored in the corpus folder.

    corpus/retrievers/KIND-HASH/    (search/retriever.py index_folder: HASH over the model's
      meta.json                      fingerprint and the options that change the vectors)
      keys.json                     [[document, page, the document's content hash], ...]
      vectors.npy                   float32 (rows, dims): one row per page (single-vector) or
                                    per page token (multi-vector, late interaction)
      offsets.npy                   int64 (pages + 1): page i's rows are offsets[i]:offsets[i+1]

Built once per corpus and model: opening again embeds only the pages that are new or whose
document changed (a key's content hash), and drops the pages no longer in the corpus. A write is
a whole new folder renamed into place under a lock, so a search in another process never reads
half an index and two runs starting together embed the corpus once.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from deskbench.errors import UserError

FORMAT = 1
F32 = npt.NDArray[np.float32]
Key = tuple[str, int, str]  # (document, page, the document's content hash)
Embed = Callable[[Sequence[Key]], list[F32]]
"""Embeds a batch of pages: one (rows, dims) float32 array per page (rows 1 for single-vector)."""


@dataclass(frozen=True)
class PageVectors:
    """A loaded index: the pages, their vectors and where each page's rows are."""

    keys: list[Key]
    vectors: F32
    offsets: npt.NDArray[np.int64]

    @property
    def single(self) -> bool:
        return len(self.vectors) == len(self.keys)

    def top_k_dot(self, query: F32, k: int) -> list[tuple[int, float]]:
        """Single-vector: the k pages of highest dot product with `query` (dims,), ties by page
        order. (For unit vectors the dot product is the cosine similarity.)"""
        if not self.single:
            raise ValueError("top_k_dot needs one vector per page")
        return _top(self.vectors @ query.astype(np.float32), k)

    def top_k_maxsim(self, query: F32, k: int) -> list[tuple[int, float]]:
        """Multi-vector late interaction (ColBERT's MaxSim): a page's score is the sum over the
        query's token vectors (tokens, dims) of the highest dot product with any of its rows."""
        if not len(self.keys):
            return []
        sims = query.astype(np.float32) @ self.vectors.T  # (query tokens, page rows)
        best = np.maximum.reduceat(sims, self.offsets[:-1], axis=1)  # (query tokens, pages)
        return _top(best.sum(axis=0), k)


def _top(scores: npt.NDArray[np.floating], k: int) -> list[tuple[int, float]]:
    if k < 1 or not len(scores):
        return []
    order = np.argsort(-scores, kind="stable")[:k]
    return [(int(i), float(scores[i])) for i in order]


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read(folder: Path, identity: dict[str, object]) -> PageVectors | None:
    """The index at `folder`, or None when there is none (or it was made for something else)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("identity") != identity:
            return None
        keys = [(str(d), int(p), str(h)) for d, p, h in json.loads((folder / "keys.json").read_text(encoding="utf-8"))]
        vectors = np.load(folder / "vectors.npy", allow_pickle=False)
        offsets = np.load(folder / "offsets.npy", allow_pickle=False)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UserError(f"the retriever index at {folder} is unreadable ({exc}); delete that folder and run "
                        "again to rebuild it") from None
    if len(offsets) != len(keys) + 1 or int(offsets[-1]) != len(vectors):
        raise UserError(f"the retriever index at {folder} is inconsistent (keys, offsets and vectors disagree); "
                        "delete that folder and run again to rebuild it")
    return PageVectors(keys, vectors.astype(np.float32, copy=False), offsets.astype(np.int64, copy=False))


def _write(folder: Path, index: PageVectors, identity: dict[str, object]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        np.save(tmp / "vectors.npy", index.vectors, allow_pickle=False)
        np.save(tmp / "offsets.npy", index.offsets, allow_pickle=False)
        (tmp / "keys.json").write_text(json.dumps([list(k) for k in index.keys]), encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps({"format": FORMAT, "identity": identity,
                                                   "pages": len(index.keys), "rows": len(index.vectors)},
                                                  indent=1), encoding="utf-8")
        old = folder.with_name(f".{folder.name}.old")
        if folder.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build(folder: Path, keys: Sequence[Key], embed: Embed, identity: dict[str, object], *,
          batch_size: int = 8, progress: Callable[[int, int], None] | None = None) -> PageVectors:
    """The index over `keys` (the corpus's pages, in order): read from `folder` when it holds them
    all, else the missing pages embedded (in batches) and the whole written back."""
    with _locked(folder):
        have = read(folder, identity)
        rows: dict[Key, F32] = {}
        if have is not None:
            if have.keys == list(keys):
                return have
            wanted = set(keys)
            for i, key in enumerate(have.keys):
                if key in wanted:
                    rows[key] = have.vectors[have.offsets[i]:have.offsets[i + 1]]
        missing = [key for key in keys if key not in rows]
        for start in range(0, len(missing), batch_size):
            chunk = missing[start:start + batch_size]
            for key, vec in zip(chunk, embed(chunk), strict=True):
                vec = np.asarray(vec, dtype=np.float32)
                if vec.ndim != 2 or not len(vec):
                    raise ValueError(f"an embedding of page {key[1]} of {key[0]} is not (rows >= 1, dims)")
                rows[key] = vec
            if progress is not None:
                progress(min(start + batch_size, len(missing)), len(missing))
        ordered = [rows[key] for key in keys]
        dims = {v.shape[1] for v in ordered}
        if len(dims) > 1:
            raise ValueError(f"pages embedded with different dimensions {sorted(dims)}")
        sizes = np.array([len(v) for v in ordered], dtype=np.int64)
        index = PageVectors(list(keys),
                            np.concatenate(ordered).astype(np.float32) if ordered else np.zeros((0, 0), np.float32),
                            np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
        _write(folder, index, identity)
        return index
