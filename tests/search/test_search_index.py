"""The page index's files: segments per commit, the compiled index, replacement, deletion,
merging, a writer that stopped half-way, two writers."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbench.errors import UserError
from deskbench.search.index import MERGE_SEGMENTS, PageIndex
from deskbench.search.postings import Manifest

DOCS = {
    "a.pdf": [(1, "The harbour authority approved the annual budget."), (2, "Harbour fees rose in 2019.")],
    "b.pdf": [(1, "Annual report of the board: budget and fees."), (2, "")],
    "c.pdf": [(1, "Le conseil d'administration de l'entreprise a approuvé le budget.")],
}
QUERIES = ["budget", "harbour OR fees", "annual NOT harbour", '"annual budget"', "fe*", "approuvé", "*", "file:b.pdf"]


def results(index: PageIndex) -> dict[str, list[tuple[str, int, float]]]:
    return {q: [(p.document, p.page, p.score) for p in index.search(q, 10).pages] for q in QUERIES}


def built_at_once(root: Path, docs: dict[str, list[tuple[int, str]]]) -> PageIndex:
    index = PageIndex(root, create=True)
    with index.writer() as w:
        for doc, pages in docs.items():
            w.replace_document(doc, pages)
    return index


def test_commits_replacements_and_deletions_search_as_one_build(tmp_path: Path) -> None:
    index = PageIndex(tmp_path / "idx", create=True)
    with index.writer() as w:
        w.replace_document("a.pdf", [(1, "old text about harbours")])
        w.replace_document("b.pdf", DOCS["b.pdf"])
        w.commit()
        w.replace_document("a.pdf", DOCS["a.pdf"])  # replaced in the next segment
        w.replace_document("gone.pdf", [(1, "budget budget budget")])
    with index.writer() as w:
        w.replace_document("c.pdf", DOCS["c.pdf"])
        w.delete_document("gone.pdf")
    assert index.num_pages() == 5
    assert results(index) == results(built_at_once(tmp_path / "fresh", DOCS))  # same pages, same idf, same scores
    assert index.search("harbours").pages == []


def test_segments_stay_few_and_files_stay_only_the_live_ones(tmp_path: Path) -> None:
    """Each writer adds a segment; more than MERGE_SEGMENTS, or more dead pages than live ones,
    are merged into one at the writer's close, and what the manifest no longer names is deleted."""
    index = PageIndex(tmp_path / "idx", create=True)
    sessions = 3 * MERGE_SEGMENTS
    for i in range(sessions):
        with index.writer() as w:
            w.replace_document(f"d{i}.pdf", [(1, f"budget report number {i}")])
            w.replace_document("a.pdf", DOCS["a.pdf"])  # replaced every time: dead pages pile up
    manifest = Manifest.read(tmp_path / "idx")
    assert 1 <= len(manifest.segments or []) <= MERGE_SEGMENTS
    on_disk = sorted(p.name for p in (tmp_path / "idx").iterdir() if p.name.startswith(("seg-", "compiled-")))
    assert on_disk == sorted([f"compiled-{manifest.generation:06d}", *(f"{s}.npz" for s in manifest.segments or [])])
    assert index.num_pages() == sessions + 2
    fresh = built_at_once(tmp_path / "fresh", {**{f"d{i}.pdf": [(1, f"budget report number {i}")] for i in range(sessions)},
                                               "a.pdf": DOCS["a.pdf"]})
    assert results(index) == results(fresh)


def test_a_writer_that_stopped_after_a_commit_leaves_a_searchable_index(tmp_path: Path) -> None:
    built_at_once(tmp_path / "idx", {"a.pdf": DOCS["a.pdf"]})
    index = PageIndex(tmp_path / "idx")
    with pytest.raises(KeyboardInterrupt), index.writer() as w:
        w.replace_document("b.pdf", DOCS["b.pdf"])
        w.commit()  # durable: the next reader compiles it
        w.replace_document("c.pdf", DOCS["c.pdf"])  # not committed: lost
        raise KeyboardInterrupt
    reopened = PageIndex(tmp_path / "idx")
    assert reopened.num_pages() == 4
    assert results(reopened) == results(built_at_once(tmp_path / "fresh", {"a.pdf": DOCS["a.pdf"], "b.pdf": DOCS["b.pdf"]}))
    generation = Manifest.read(tmp_path / "idx").generation
    assert (tmp_path / "idx" / f"compiled-{generation:06d}").is_dir()  # the reader saved what it compiled


def test_a_second_writer_is_refused_in_one_line(tmp_path: Path) -> None:
    index = built_at_once(tmp_path / "idx", DOCS)
    with index.writer(), pytest.raises(UserError) as info, PageIndex(tmp_path / "idx").writer():
        pass
    assert "another process is writing the index" in str(info.value) and "\n" not in str(info.value)
    assert index.num_pages() == 5


def test_an_empty_index_searches_to_nothing(tmp_path: Path) -> None:
    index = PageIndex(tmp_path / "idx", create=True)
    assert index.num_pages() == 0
    assert all(v == [] for v in results(index).values())
