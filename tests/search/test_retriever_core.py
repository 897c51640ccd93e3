"""The retriever interface (search/retriever.py, search/retriever_use.py): the spec grammar, the
kinds found by name or module path, hybrid fusion by reciprocal rank computed by hand, a
retriever's identity in one line, and a resume under another retriever told apart from one
under the same (runs/identity.py IMPLIED_SETTINGS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.runs.identity import SystemConfig
from deskbench.search.index import ScoredPage
from deskbench.search.retriever import (
    FUSION_DEPTH,
    RRF_K,
    Bm25Retriever,
    Hybrid,
    Part,
    kind,
    names,
    open_retriever,
    parse_spec,
)
from deskbench.search.retriever_use import check_spec, describe, identity_setting, listing, open_on

PINNED = "retriever_plugins:PINNED"  # tests/retriever_plugins.py, by module path (tests/ is on sys.path)


class Ranked:
    """A retriever whose ranking is given: what a hybrid's part returns, and the k it was asked for."""

    def __init__(self, name: str, pages: list[tuple[str, int]]) -> None:
        self.name, self.pages = name, pages
        self.asked: list[int] = []

    def search(self, query: str, k: int) -> list[ScoredPage]:
        self.asked.append(k)
        return [ScoredPage(d, p, 10.0 - i) for i, (d, p) in enumerate(self.pages)][:k]

    def identity(self) -> dict[str, object]:
        return {"kind": self.name}


# -- the spec -------------------------------------------------------------------------------


def test_specs_parse_into_parts() -> None:
    assert parse_spec("bm25").is_default
    spec = parse_spec("bm25+dense=/models/arctic embed")
    assert spec.parts == (Part("bm25"), Part("dense", "/models/arctic embed")) and not spec.is_default
    assert str(spec) == "bm25+dense=/models/arctic embed"
    assert parse_spec(f"{PINNED}=a.pdf:1,b.pdf:2").parts == (Part(PINNED, "a.pdf:1,b.pdf:2"),)


@pytest.mark.parametrize(("text", "says"), [
    ("", "is not KIND or KIND=MODEL"),
    ("dense=", "is not KIND or KIND=MODEL"),
    ("bm25+", "is not KIND or KIND=MODEL"),
    ("bm25+bm25", "names a part twice"),
    ("9dense=x", "is not KIND or KIND=MODEL"),
])
def test_a_malformed_spec_is_one_line(text: str, says: str) -> None:
    with pytest.raises(UserError) as exc:
        parse_spec(text)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_kinds_by_name_and_module_path() -> None:
    assert kind("bm25").name == "bm25" and not kind("bm25").needs_model
    assert kind(PINNED).needs_model  # a module path is a kind without an install
    assert "bm25" in names()
    with pytest.raises(UserError, match="'nosuch' is not a retriever kind; choose one of bm25"):
        kind("nosuch")
    with pytest.raises(UserError, match="is not a retriever kind: it needs name, needs_model"):
        kind("retriever_plugins:__doc__")  # a module's object that is no kind
    with pytest.raises(UserError, match="could not be built with no arguments"):
        kind("retriever_plugins:PinnedRetriever")  # a class is built with no arguments
    with pytest.raises(UserError, match="no module named 'no_such_module'"):
        kind("no_such_module:Kind")


def test_a_kind_is_given_a_model_only_when_it_takes_one() -> None:
    with pytest.raises(UserError, match=f"--retriever {PINNED} needs a model: give {PINNED}=MODEL"):
        check_spec(PINNED)
    with pytest.raises(UserError, match="--retriever bm25=x: bm25 takes no model; give bm25 alone"):
        check_spec("bm25=x")
    assert check_spec(f"bm25+{PINNED}=a.pdf:1").parts[1].model == "a.pdf:1"


# -- hybrid: reciprocal-rank fusion, by hand ------------------------------------------------


def test_hybrid_fuses_by_reciprocal_rank() -> None:
    a = Ranked("a", [("x.pdf", 1), ("x.pdf", 2), ("y.pdf", 1)])
    b = Ranked("b", [("y.pdf", 1), ("x.pdf", 1), ("z.pdf", 4)])
    hits = Hybrid([a, b]).search("q", 3)
    # x1: 1/61 (a's 1st) + 1/62 (b's 2nd); y1: 1/63 + 1/61; x2: 1/62; z4: 1/63 (cut at k=3)
    assert [(h.document, h.page) for h in hits] == [("x.pdf", 1), ("y.pdf", 1), ("x.pdf", 2)]
    assert [h.score for h in hits] == pytest.approx([1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62])
    assert RRF_K == 60
    assert a.asked == b.asked == [FUSION_DEPTH]  # each part is read deeper than k before fusing


def test_hybrid_ties_go_to_the_first_parts_order() -> None:
    a = Ranked("a", [("p.pdf", 2), ("p.pdf", 1)])
    b = Ranked("b", [("p.pdf", 1), ("p.pdf", 2)])
    hits = Hybrid([a, b]).search("q", 5)
    assert [(h.document, h.page) for h in hits] == [("p.pdf", 2), ("p.pdf", 1)]  # both 1/61 + 1/62
    assert hits[0].score == hits[1].score == pytest.approx(1 / 61 + 1 / 62)
    assert Hybrid([a, b]).search("q", 0) == []
    assert Hybrid([a, b]).identity() == {"kind": "hybrid", "fusion": "rrf", "rrf_k": 60, "depth": FUSION_DEPTH,
                                         "parts": [{"kind": "a"}, {"kind": "b"}]}


# -- over a corpus --------------------------------------------------------------------------


def test_bm25_is_the_page_index_and_leaves_the_corpus_as_it_was(operator_corpus: Corpus) -> None:
    corpus = Corpus.open(operator_corpus.root)
    before = corpus.search("winter season", 3)
    assert open_on(corpus, "bm25") is None and corpus.retriever is None  # bm25: nothing changes
    assert corpus.search("winter season", 3) == before and before[0].document == "alpha.pdf"
    bm25 = open_retriever("bm25", corpus)
    assert isinstance(bm25, Bm25Retriever)
    assert [(p.document, p.page) for p in bm25.search("winter season", 3)] == [(h.document, h.page) for h in before]
    assert identity_setting(None) == {}


def test_a_plugin_and_a_hybrid_search_the_corpus(operator_corpus: Corpus, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = Corpus.open(operator_corpus.root)
    opened = open_on(corpus, f"{PINNED}=beta.pdf:2,alpha.pdf:3")
    assert opened is corpus.retriever
    assert "retriever ready: pinned=beta.pdf:2,alpha.pdf:3" in capsys.readouterr().err  # the progress line
    hits = corpus.search("helicopter", 5)
    assert [(h.document, h.page) for h in hits] == [("beta.pdf", 2), ("alpha.pdf", 3)]
    assert "**helicopter**" in hits[0].snippet  # the query's terms marked, whatever ranked
    assert identity_setting(opened) == {"retriever": {"kind": "pinned", "model": "beta.pdf:2,alpha.pdf:3",
                                                      "pages": [["beta.pdf", 2], ["alpha.pdf", 3]]}}

    # bm25 ranks alpha 1 first for "winter" (the only page with the word); the pin ranks beta 2 first
    bm25_order = [(p.document, p.page) for p in Bm25Retriever(corpus.index).search("winter", 100)]
    assert bm25_order == [("alpha.pdf", 1)]
    hybrid = open_on(corpus, f"bm25+{PINNED}=beta.pdf:2", quiet=True)
    assert hybrid is not None
    hits = corpus.search("winter", 5)
    # alpha 1: bm25's 1st (1/61); beta 2: the pin's 1st (1/61): a tie, bm25 (the first part) first
    assert [(h.document, h.page) for h in hits] == [("alpha.pdf", 1), ("beta.pdf", 2)]
    assert [h.score for h in hits] == pytest.approx([1 / 61, 1 / 61])
    assert describe(hybrid.identity()) == "bm25 + pinned=beta.pdf:2 (RRF k=60)"


def test_a_kind_that_cannot_open_is_one_line(operator_corpus: Corpus) -> None:
    corpus = Corpus.open(operator_corpus.root)
    with pytest.raises(UserError, match="'gamma.pdf:1' is not a page of the corpus"):
        open_on(corpus, f"{PINNED}=gamma.pdf:1", quiet=True)
    assert corpus.retriever is None


# -- identity -------------------------------------------------------------------------------


def test_describe_names_kind_model_and_weights() -> None:
    assert describe(None) == "bm25" and describe({}) == "bm25"
    assert describe({"kind": "bm25", "analyzer": "whoosh"}) == "bm25"
    assert describe({"kind": "dense", "model": "/m/arctic", "fingerprint": "0123456789abcdef"}) == \
        "dense=/m/arctic (weights 0123456789ab)"


def _config(settings: dict[str, object]) -> SystemConfig:
    return SystemConfig(track="docqa", agent="lexical", settings={"top_k": 5, **settings})


def test_a_resume_under_another_retriever_differs() -> None:
    bm25 = _config({})  # as every run stored before retrievers: no "retriever" key
    dense = _config({"retriever": {"kind": "dense", "model": "/m/a", "fingerprint": "aaaaaaaaaaaaaaaa"}})
    other_weights = _config({"retriever": {"kind": "dense", "model": "/m/a", "fingerprint": "bbbbbbbbbbbbbbbb"}})
    assert bm25.differences(_config({})) == []
    assert dense.differences(dense) == []
    assert bm25.differences(dense) == ["retriever: bm25 -> dense=/m/a (weights aaaaaaaaaaaa)"]
    assert dense.differences(bm25) == ["retriever: dense=/m/a (weights aaaaaaaaaaaa) -> bm25"]
    assert dense.differences(other_weights) == ["retriever: dense=/m/a (weights aaaaaaaaaaaa) -> "
                                                "dense=/m/a (weights bbbbbbbbbbbb)"]
    # another setting only one side has (kept by an older or newer deskbench) is still no difference
    assert bm25.differences(_config({"new_setting": 1})) == []


def test_list_retrievers_has_the_builtins_with_their_summary() -> None:
    rows = dict(listing())
    assert rows["bm25"] == f"built-in: {kind('bm25').summary}"
    assert all(origin.startswith("built-in") for origin in rows.values())  # no plugin installed here


def test_module_path_kind_is_found_from_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind in a module beside the user (no install, no PYTHONPATH), as a plugin agent is found."""
    (tmp_path / "my_retriever.py").write_text(
        "from retriever_plugins import PinnedKind\n\nclass Mine(PinnedKind):\n    name = 'mine'\n")
    monkeypatch.chdir(tmp_path)
    assert kind("my_retriever:Mine").name == "mine"
