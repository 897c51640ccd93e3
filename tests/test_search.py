"""Search: every Whoosh operator on a corpus whose pages are known word for word."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from deskbench.corpus import Corpus
from deskbench.errors import QuerySyntaxError, UserError
from deskbench.search.index import PageIndex
from deskbench.search.query import And, Or, Phrase, Term, Wildcard, parse_query


def pages(c: Corpus, query: str, k: int = 20) -> set[tuple[str, int]]:
    return {(h.document, h.page) for h in c.search(query, k=k)}


A1, A2, A3 = ("alpha.pdf", 1), ("alpha.pdf", 2), ("alpha.pdf", 3)
B1, B2 = ("beta.pdf", 1), ("beta.pdf", 2)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("mountain car", {A1}),  # implicit AND; beta p1 has "cars", not "car"
        ("mountain AND car", {A1}),
        ("mountain OR helicopter", {A1, B1, B2}),
        ("annual NOT harbour", {A1, B1}),
        ("annual AND NOT harbour", {A1, B1}),
        ('"annual report"', {A1, A2}),  # beta p1 says "Report annual": not the phrase
        ("annual report", {A1, A2, B1}),
        ("car*", {A1, A2, B1}),  # car, carriage, cars
        ("car?", {A2, B1}),  # exactly one more character: cars
        ("c?r", {A1}),
        ("*riage", {A1}),
        ("CAR", {A1}),
        ("MoUnTaIn", {A1, B1}),
        ("cafe resume", {A3}),  # accents folded
        ("CAFÉ", {A3}),
        ('"Bell 407" AND accessories', {B2}),
        ("Bell*", {B2}),
        ("incorporation NOT date", set()),
        ("(harbour OR helicopter) AND fee", {A2}),
        ("(harbour OR helicopter) fee", {A2}),
        ('"annual rep*"', {A1, A2}),
        ("mountain OR harbour NOT cars", {A1, B1}),  # = mountain OR (harbour AND NOT cars)
        ("zeppelin", set()),
    ],
)
def test_operators(operator_corpus: Corpus, query: str, expected: set[tuple[str, int]]) -> None:
    assert pages(operator_corpus, query) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ('"annual report', "unbalanced quote"),
        ("NOT car", "nothing to exclude"),
        ("car NOT", "needs a term after it"),
        ("car OR", "needs a term after it"),
        ("AND car", "needs a term before it"),
        ("(car", "add the closing ')'"),
        ("car)", "remove the ')'"),
        ("*", "no letters or digits"),
        ("", "empty query"),
        ("   ", "empty query"),
        ("!!! ???", "no letters or digits"),
        ("&& --", "no searchable words"),
        ("car OR NOT bikes", "nothing to exclude"),
    ],
)
def test_malformed_queries_give_a_message(operator_corpus: Corpus, query: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        operator_corpus.search(query)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_parse_tree_shapes() -> None:
    assert parse_query("a b") == And((Term("a"), Term("b")))
    assert parse_query("a OR b c") == Or((Term("a"), And((Term("b"), Term("c")))))
    assert parse_query("a NOT b") == And((Term("a"),), (Term("b"),))
    assert parse_query('"x y"') == Phrase((Term("x"), Term("y")))
    assert parse_query("Report*") == Wildcard("Report*", "report.*")
    assert parse_query("e-mail") == Phrase((Term("e"), Term("mail")))  # split words stay adjacent
    assert parse_query("a.b?") == Wildcard("a.b?", "ab.")
    # lower-case operators are words, as in Whoosh
    assert parse_query("cats and dogs") == And((Term("cats"), Term("and"), Term("dogs")))


def test_results_are_ranked_limited_and_highlighted(operator_corpus: Corpus) -> None:
    hits = operator_corpus.search("annual OR fee OR report", k=2)
    assert len(hits) == 2
    all_hits = operator_corpus.search("annual OR fee OR report", k=10)
    assert [h.score for h in all_hits] == sorted((h.score for h in all_hits), reverse=True)
    assert hits == all_hits[:2]
    # the page that matches all three terms ranks first
    assert (all_hits[0].document, all_hits[0].page) == A2 or all_hits[0].score >= all_hits[1].score
    wild = operator_corpus.search("car*", k=5)
    a1 = next(h for h in wild if (h.document, h.page) == A1)
    assert "**car**" in a1.snippet and "**carriage**" in a1.snippet
    assert "**Mountain**" not in a1.snippet
    phrase = operator_corpus.search('"annual report" NOT harbour', k=5)
    assert [(h.document, h.page) for h in phrase] == [A1]
    assert "**annual** **report**" in phrase[0].snippet
    assert "harbour" not in phrase[0].snippet.lower()


def test_k_of_zero_or_negative_returns_nothing(operator_corpus: Corpus) -> None:
    assert operator_corpus.search("car", k=0) == []


def test_concurrent_searches_from_threads_and_tasks(operator_corpus: Corpus) -> None:
    queries = ["mountain car", "annual NOT harbour", "car*", '"annual report"', "Bell*", "fee OR bikes"] * 40
    serial = [operator_corpus.search(q, k=5) for q in queries]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda q: operator_corpus.search(q, k=5), queries))
    assert threaded == serial

    async def gather() -> list:
        return await asyncio.gather(*(asyncio.to_thread(operator_corpus.search, q, 5) for q in queries))

    assert asyncio.run(gather()) == serial


def test_cjk_text_is_searchable_by_characters_and_phrases(tmp_path: Path) -> None:
    from deskbench.search.snippet import make_snippet

    index = PageIndex(tmp_path / "idx", create=True)
    texts = {("zh.pdf", 1): "本公司二零一五年度报告", ("zh.pdf", 2): "董事会决议公告",
             ("fr.pdf", 1): "Procès-verbal de la séance du conseil", ("mix.pdf", 1): "Report2015年度 summary"}
    with index.writer() as w:
        for doc in ("zh.pdf", "fr.pdf", "mix.pdf"):
            w.replace_document(doc, [(p, t) for (d, p), t in texts.items() if d == doc])

    def found(query: str) -> list[tuple[str, int]]:
        return [(p.document, p.page) for p in index.search(query).pages]

    assert found('"年度报告"') == [("zh.pdf", 1)]
    assert found("公告") == [("zh.pdf", 2)]
    assert found("proces verbal seance") == [("fr.pdf", 1)]
    assert found("report2015 年") == [("mix.pdf", 1)]  # a Latin word touching CJK still splits
    result = index.search('"年度报告"')
    assert "**年****度****报****告**" in make_snippet(texts[("zh.pdf", 1)], result.highlights)


@pytest.mark.parametrize("query", ["car*", "c?r", "car park", '"car park"', "scar OR carriage", "park NOT x", "*park", "ca*e"])
def test_snippet_fast_path_agrees_with_the_token_path(query: str) -> None:
    from deskbench.search.query import highlights
    from deskbench.search.snippet import _match_spans

    text = "Cars and carriage, CAR-park; scar. Car_park carpark 2car"
    ascii_spans = _match_spans(text, highlights(parse_query(query)))
    unicode_spans = _match_spans(text + " é", highlights(parse_query(query)))  # forces the token path
    assert [(a, b) for a, b, _ in ascii_spans] == [(a, b) for a, b, _ in unicode_spans]
    assert ascii_spans


def test_wildcards_are_bm25_scored_and_fall_back_past_the_cap(
    operator_corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deskbench.search.index as index_module

    expanded = operator_corpus.search("car*", k=10)
    assert len({h.score for h in expanded}) > 1  # expanded into BM25-scored terms, as Whoosh does
    monkeypatch.setattr(index_module, "MAX_WILDCARD_TERMS", 1)  # car* matches 3 terms: too many
    constant = operator_corpus.search("car*", k=10)
    assert {h.score for h in constant} == {1.0}  # tantivy's regex query: same pages, flat score
    assert {(h.document, h.page) for h in constant} == {(h.document, h.page) for h in expanded}


def test_snippet_window_is_where_the_distinct_terms_cluster() -> None:
    from deskbench.search.query import highlights
    from deskbench.search.snippet import make_snippet

    filler = "lorem ipsum dolor sit amet " * 30
    text = f"budget mentioned once here. {filler} the budget for the harbour was cut. {filler} budget budget budget"
    snippet = make_snippet(text, highlights(parse_query("budget harbour")))
    assert "**budget** for the **harbour**" in snippet
    assert snippet.startswith("… ") and snippet.endswith(" …")
    assert len(snippet) < 300
    assert make_snippet("no match at all", highlights(parse_query("zebra"))) == "no match at all"


def test_page_texts_in_one_query_match_page_text_and_name_a_missing_page(operator_corpus: Corpus) -> None:
    hits = operator_corpus.search("mountain OR car", k=5, snippets=False)
    assert hits and all(h.snippet == "" for h in hits)
    keys = [(h.document, h.page) for h in hits]
    assert operator_corpus.page_texts(keys) == [operator_corpus.page_text(d, p).text for d, p in keys]
    with pytest.raises(UserError, match="out of range"):
        operator_corpus.page_texts([keys[0], (keys[0][0], 999)])
