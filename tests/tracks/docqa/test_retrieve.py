"""`deskbench retrieve`: retrieval alone, figures computed by hand on a corpus whose pages are known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deskbench.corpus import Corpus
from deskbench.search import retriever as registry
from deskbench.search.index import ScoredPage
from deskbench.search.retriever import PageSource, Retriever
from deskbench.tracks.docqa.retrieval_eval import evaluate
from deskbench.tracks.docqa.tasks import DocQATask
from tests.conftest import ingest, run_cli, write_text_pdf

PAGES = {
    "a.pdf": ["Harbour tolls rose sharply.", "The zebra crossing budget was doubled.", "Lighthouse keepers retired."],
    "b.pdf": ["Orchard irrigation plans.", "The quarry closed in spring."],
}
ORDER = [("a.pdf", 3), ("a.pdf", 2), ("b.pdf", 1), ("b.pdf", 2), ("a.pdf", 1)]


class FixedRetriever:
    """Returns ORDER for every query: the figures below follow from it by hand."""

    def search(self, query: str, k: int) -> list[ScoredPage]:
        return [ScoredPage(d, p, float(len(ORDER) - i)) for i, (d, p) in enumerate(ORDER[:k])]

    def identity(self) -> dict[str, object]:
        return {"kind": "fixed"}


class FixedKind:
    name = "fixed"
    needs_model = False
    summary = "the same five pages for every query"

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        return FixedRetriever()


FIXED = FixedKind()


def task(id: str, question: str, *evidence: tuple[str, int]) -> DocQATask:
    return DocQATask.model_validate({"id": id, "question": question, "answer_variants": [["x"]],
                                     "evidence": [{"document": d, "page": p} for d, p in evidence]})


TASKS = [
    task("t1", "What happened to the zebra crossing budget?", ("a.pdf", 2)),
    task("t2", "Harbour tolls and the quarry?", ("a.pdf", 1), ("b.pdf", 2)),
    task("t3", "No gold pages here"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("retrieve")
    for name, pages in PAGES.items():
        write_text_pdf(root / "pdfs" / name, pages)
    c, summary = ingest(root / "corpus", [root / "pdfs"], ocr="never")
    assert summary.files_ok == 2
    return c


def test_figures_by_hand(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BUILTIN, "fixed", f"{__name__}:FIXED")
    result = evaluate(TASKS, corpus, ["fixed"])
    assert (result.tasks, result.tasks_without_evidence) == (2, 1)
    assert result.results[0].no_pages == 0
    [fixed] = result.results
    g = fixed.overall
    # t1: gold a2 at rank 2 -> R@1 0, R@5 1, RR 1/2. t2: gold a1 (rank 5), b2 (rank 4) -> R@1 0, R@5 1, RR 1/4.
    assert g.recall_at == {1: 0.0, 5: 1.0, 10: 1.0}
    assert g.mrr == pytest.approx(0.375)
    assert g.evidence_reached == 1.0
    assert fixed.by_hop_type["cross_doc"].mrr == pytest.approx(0.25)
    assert fixed.tasks[0].returned[:2] == [("a.pdf", 3), ("a.pdf", 2)]


def test_hybrid_of_bm25_and_a_fixed_ranking_is_fused_by_rrf(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BUILTIN, "fixed", f"{__name__}:FIXED")
    [hybrid] = evaluate(TASKS[:1], corpus, ["bm25+fixed"], query_form="keywords").results
    # bm25 finds only a2 (the one page with "zebra"): 1/61 + (fixed rank 2) 1/62 beats a3's 1/61 alone.
    assert hybrid.tasks[0].returned[:2] == [("a.pdf", 2), ("a.pdf", 3)]
    assert hybrid.identity["parts"] == [{"kind": "bm25", "analyzer": hybrid.identity["parts"][0]["analyzer"]},  # type: ignore[index]
                                        {"kind": "fixed"}]


def test_cli_compares_retrievers_and_writes_every_task(corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    out = tmp_path / "r.json"
    proc = run_cli("retrieve", str(tasks), "-c", str(corpus.root), "-r", "bm25", "--query", "keywords",
                   "--output", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    [bm25] = shown["results"]
    assert "tasks" not in bm25 and bm25["overall"]["recall_at"]["1"] == 0.75  # t1: 1; t2: 1 of its 2 gold pages first
    assert [t["id"] for t in json.loads(out.read_text())["results"][0]["tasks"]] == ["t1", "t2"]


def test_bad_query_form_and_retriever_are_one_line(corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASKS[0].model_dump_json() + "\n")
    for args, words in ((("--query", "words"), "--query"), (("-r", "nosuch"), "not a retriever kind"),
                        (("-r", "bm25=x"), "takes no model")):
        proc = run_cli("retrieve", str(tasks), "-c", str(corpus.root), *args)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_bm25_on_whole_questions_says_why_nothing_came_back(corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASKS[0].model_dump_json() + "\n")  # "What happened to ...": no page holds every word
    proc = run_cli("retrieve", str(tasks), "-c", str(corpus.root))
    assert proc.returncode == 0, proc.stderr
    assert "returned no page for 1 of 1 questions" in proc.stdout and "--query keywords" in proc.stdout
