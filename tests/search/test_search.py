"""Search: every Whoosh operator on a corpus whose pages are known word for word.

Expected page sets marked "whoosh 2.7.4" were computed once with whoosh 2.7.4 (installed by hand,
not a dependency) as MADQA's official tool searches: `QueryParser("text", schema).parse(query)`
over an index with the schema of baselines/bm25-mllm-agent/utils.py (file ID, page_number and
total_pages NUMERIC, text TEXT with the default StandardAnalyzer), holding the page texts this
corpus stores for OPERATOR_DOCS (each page starts with the PDF's title, "Document"). Ranking
against real Whoosh is tests/search/test_whoosh_parity.py's.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ingest, run_cli, write_text_pdf

from deskbench.corpus import Corpus
from deskbench.errors import QuerySyntaxError, UserError
from deskbench.search.analyzer import ANALYZER_NAME, STOP_WORDS, analyze
from deskbench.search.index import PageIndex
from deskbench.search.query import (
    And,
    AndNot,
    Empty,
    Every,
    FieldTerm,
    Not,
    Null,
    Or,
    Phrase,
    Require,
    Term,
    Wildcard,
    parse_query,
)


def pages(c: Corpus, query: str, k: int = 20) -> set[tuple[str, int]]:
    return {(h.document, h.page) for h in c.search(query, k=k)}


A1, A2, A3 = ("alpha.pdf", 1), ("alpha.pdf", 2), ("alpha.pdf", 3)
B1, B2 = ("beta.pdf", 1), ("beta.pdf", 2)
ALL = {A1, A2, A3, B1, B2}


@pytest.mark.parametrize(
    ("query", "expected"),
    [  # whoosh 2.7.4, every one
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
        ("CAFÉ", {A3}),
        ("café résumé", {A3}),
        ('"Bell 407" AND accessories', {B2}),
        ("Bell*", {B2}),
        ("incorporation NOT date", set()),
        ("(harbour OR helicopter) AND fee", {A2}),
        ("(harbour OR helicopter) fee", {A2}),
        ('"annual rep*"', set()),  # a phrase holds no wildcard: the phrase "annual rep"
        ("mountain OR harbour NOT cars", {A1}),  # = (mountain OR harbour) AND NOT cars: OR binds first
        ("zeppelin", set()),
        ("the report", {A1, A2, B1}),  # "the" is a stop word
        ('"the annual report"', {A1, A2}),
        ('"report of the harbour"', {A2}),
        ("NOT fee", {A1, A3, B1, B2}),
        ("file:beta.pdf", {B1, B2}),
        ("file:beta.pdf mountain", {B1}),
        ("foo:mountain", set()),  # not a field: the words "foo" and "mountain"
        ("page_number:2", {A2, B2}),
        ("total_pages:2", {B1, B2}),
        ("Bell^2 OR report", {A1, A2, B1, B2}),
        ("'annual report'", {A1, A2, B1}),
        ("report ANDNOT harbour", {A1, B1}),
        ("report ANDMAYBE harbour", {A1, A2, B1}),
        ("report REQUIRE harbour", {A1, B1}),  # whoosh 2.7.4 matches REQUIRE as ANDNOT
        ("1998", {B1}),
        ('"Bell 407"', {B2}),
        ("Document", ALL),
    ],
)
def test_operators_match_whoosh(operator_corpus: Corpus, query: str, expected: set[tuple[str, int]]) -> None:
    assert pages(operator_corpus, query) == expected
    assert pages(operator_corpus, query) == {(h.document, h.page) for h in operator_corpus.search(query, k=20, strict=True)}


def test_accents_and_dropped_stop_words_as_whoosh(operator_corpus: Corpus) -> None:
    # Accents are kept (Whoosh's terms keep them): "cafe resume" is not "café résumé".
    assert pages(operator_corpus, "cafe resume") == set()
    # Positions skip the stop words, as Whoosh renumbers them: the phrase "report harbour"
    # matches "Annual report of the harbour authority".
    assert pages(operator_corpus, '"report harbour"') == {A2}


@pytest.mark.parametrize(
    ("query", "expected"),
    [  # whoosh 2.7.4: what the official tool returns for each malformed query class
        ('"annual report', {A1, A2, B1}),  # unbalanced quote: an ordinary character
        ('annual report"', {A1, A2, B1}),
        ("(harbour OR helicopter", {A2, B2}),  # unclosed parenthesis: runs to the end
        ("harbour OR helicopter)", {A2, B2}),  # a ')' with no '(' is dropped
        ("fee) (harbour", {A2}),
        ("fee AND", {A2}),  # an operator with nothing after it is the stop word "and"
        ("fee OR", {A2}),
        ("fee NOT", {A2}),
        ("AND fee", {A2}),  # ... or with nothing before it
        ("OR fee", {A2}),
        ("fee AND OR cars", {A2}),  # a second operator: dropped
        ("fee OR OR cars", {A2}),
        ("*", ALL),  # a lone wildcard: every page
        ("fee *", ALL),  # Whoosh's normalisation: `*` swallows the group's other words
        ("?", set()),  # one-character terms: none are indexed
        ("NOT fee", {A1, A3, B1, B2}),
        ("the", set()),  # only stop words: nothing to search, no error
        ("a of to", set()),
        ("foo:harbour", set()),  # not a field of the schema: the words "foo" and "harbour"
        ("harbour foo:", set()),
        ("file:", {A3}),  # a field with nothing after it: the word "file" ("on file")
        ("harbour^", {A2}),  # a boost with no number: dropped
        ("e-mail*", set()),  # a wildcard no term can match ('-' is in no term)
        ('harbour "', {A2}),
    ],
)
def test_malformed_queries_are_parsed_as_whoosh_parses_them(
    operator_corpus: Corpus, query: str, expected: set[tuple[str, int]]
) -> None:
    assert pages(operator_corpus, query) == expected  # the agents' tool: lenient, never an error


@pytest.mark.parametrize(
    ("query", "expected"),
    [  # whoosh 2.7.4 raises IndexError (NOT NOT) or fails an assert (ANDNOT ANDNOT); deskbench drops
       # the operator left with nothing, so the words around it are ANDed
        ("NOT NOT fee", {A2}),
        ("fee NOT NOT cars", {A2}),
        ("fee ANDNOT ANDNOT cars", {A2}),
    ],
)
def test_queries_whoosh_crashes_on_still_get_pages(
    operator_corpus: Corpus, query: str, expected: set[tuple[str, int]]
) -> None:
    assert pages(operator_corpus, query) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ('"annual report', "unbalanced quote"),
        ("car NOT", "needs a term after it"),
        ("car OR", "needs a term after it"),
        ("AND car", "needs a term before it"),
        ("car AND OR bikes", "AND at position 5 needs a term after it"),
        ("NOT NOT car", "NOT at position 5 needs a term after it"),
        ("(car", "add the closing ')'"),
        ("car)", "remove the ')'"),
        ("*", "no letters or digits"),
        ("", "empty query"),
        ("   ", "empty query"),
        ("!!! ???", "no letters or digits"),
        ("&& --", "no searchable words"),
        ("the of and", "stop words"),
        ("x y z", "single characters"),
    ],
)
def test_strict_refuses_what_whoosh_repairs(operator_corpus: Corpus, query: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        operator_corpus.search(query, strict=True)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    operator_corpus.search(query)  # the lenient parse of the same query does not raise


@pytest.mark.parametrize("query", ["NOT car", "car OR NOT bikes", "file:alpha.pdf", "Bell^2", '"ab cd"~2', "fee ANDMAYBE car"])
def test_strict_accepts_whole_whoosh_queries(operator_corpus: Corpus, query: str) -> None:
    operator_corpus.search(query, strict=True)


def test_strict_search_cli_is_one_line_exit_2(operator_corpus: Corpus) -> None:
    proc = run_cli("search", "--corpus", str(operator_corpus.root), "(harbour OR helicopter")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: unbalanced parenthesis at position 1: add the closing ')'"]


def test_parse_tree_shapes() -> None:
    assert parse_query("a b") == Null()  # one-character words are not searched
    assert parse_query("ab cd") == And((Term("ab"), Term("cd")))
    assert parse_query("ab OR cd ef") == And((Or((Term("ab"), Term("cd"))), Term("ef")))  # OR first
    assert parse_query("ab NOT cd") == And((Term("ab"), Not(Term("cd"))))
    assert parse_query("ab ANDNOT cd") == AndNot(Term("ab"), Term("cd"))
    assert parse_query("ab REQUIRE cd") == Require(Term("ab"), Term("cd"))
    assert parse_query('"xy yz"') == Phrase((Term("xy"), Term("yz")))
    assert parse_query('"xy of the yz"~3') == Phrase((Term("xy"), Term("yz")), slop=3)  # stop words dropped
    assert parse_query('"xy"^2') == Term("xy")  # Phrase.normalize: one word is that term, unboosted
    assert parse_query("Report*") == Wildcard("report*", "report(?s:.*)", literal="report", prefix=True)
    assert parse_query("e-mail") == Term("mail")  # "e" is one character: dropped, as in Whoosh
    assert parse_query("2015/16") == And((Term("2015"), Term("16")))  # a split word: the AND of its pieces
    assert parse_query("3.5") == Term("3.5")  # Whoosh's one word "3.5"
    assert parse_query("ab.c?") == Wildcard("ab.c?", fnmatch.translate("ab.c?"), literal="ab.c")
    assert parse_query("e-mail*") == Wildcard("e-mail*", re.escape("e-mail") + "(?s:.*)", literal="e-mail", prefix=True)
    assert parse_query("abc\u055e") == Term("abc\u055e")  # a question mark Whoosh's Wildcard does not know
    assert parse_query("cats and dogs") == And((Term("cats"), Term("dogs")))  # lower-case "and": a stop word
    assert parse_query("cats AND") == Term("cats")
    assert parse_query("*") == Every("text")
    assert parse_query("cats *") == Every("text")
    assert parse_query("file:a.pdf cats") == And((FieldTerm("file", "a.pdf"), Term("cats")))
    assert parse_query("page_number:x cats") == And((Empty(), Term("cats")))  # Whoosh's error query matches nothing
    assert parse_query("cats^2 dogs") == And((Term("cats", 2.0), Term("dogs")))
    assert parse_query("cats cats") == Term("cats")


def test_stop_words_and_single_characters_on_a_real_index(tmp_path: Path) -> None:
    texts = {
        ("permits.pdf", 1): "The building permit was issued by the city.",
        ("permits.pdf", 2): "Building permit fees rose 3.5 percent in the U.S. this year.",
        ("permits.pdf", 3): "A permit for the building of a shed; see e.g. section 5 and total_amount.",
        ("other.pdf", 1): "Building works stopped; the permit lapsed.",
        ("other.pdf", 2): "Nothing about it here: x y z.",
    }
    index = PageIndex(tmp_path / "idx", create=True)
    with index.writer() as w:
        for doc in ("permits.pdf", "other.pdf"):
            w.replace_document(doc, [(p, t) for (d, p), t in texts.items() if d == doc])

    def found(query: str) -> set[tuple[str, int]]:
        return {(p.document, p.page) for p in index.search(query, k=10).pages}

    building_permit = {("permits.pdf", 1), ("permits.pdf", 2), ("permits.pdf", 3), ("other.pdf", 1)}
    assert found("building permit") == building_permit
    assert found("the building permit") == building_permit  # "the" is not searched, as in Whoosh
    assert [p.score for p in index.search("the building permit", k=10).pages] == \
           [p.score for p in index.search("building permit", k=10).pages]
    assert found('"the building permit"') == {("permits.pdf", 1), ("permits.pdf", 2)}
    assert found('"building of a shed"') == {("permits.pdf", 3)}  # the dropped words keep their place
    assert found("the") == found("x y z") == found("5") == set()  # stop words, single characters
    assert found("3.5") == found("U.S.") == {("permits.pdf", 2)}  # one word each, as Whoosh's tokens
    assert found("e.g.") == found("total_amount") == {("permits.pdf", 3)}
    assert found("amount") == set()  # total_amount is one word
    assert found("3.*") == {("permits.pdf", 2)}
    assert {"the", "of", "and", "not", "or", "us", "tbd", "your"} <= STOP_WORDS and len(STOP_WORDS) == 34
    assert analyze("The café of the U.S. a b 東京") == ("café", "u.s", "東京")  # Whoosh's words, as they are


def test_an_index_built_by_another_analyzer_is_refused_then_rebuilt(tmp_path: Path) -> None:
    write_text_pdf(tmp_path / "pdfs" / "permits.pdf", ["The building permit was issued."])
    corpus, _ = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    meta = tmp_path / "corpus" / "index" / "meta.json"
    meta.write_text(meta.read_text().replace(ANALYZER_NAME, "deskbench_v2"))  # as the last version wrote it
    with pytest.raises(UserError) as info:
        Corpus.open(tmp_path / "corpus")
    assert "built by another deskbench version (analyzer deskbench_v2" in str(info.value)
    assert "run 'deskbench ingest'" in str(info.value) and "\n" not in str(info.value)
    proc = run_cli("search", "--corpus", str(tmp_path / "corpus"), "permit")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    rebuilt, summary = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])  # the same PDFs: only re-indexed
    assert summary.files_unchanged == 1 and summary.pages_reindexed == 1
    assert json.loads(meta.read_text())["analyzer"] == ANALYZER_NAME
    assert pages(rebuilt, "the building permit") == {("permits.pdf", 1)}
    shutil.rmtree(tmp_path / "corpus" / "index")  # a deleted index is rebuilt the same way
    assert pages(ingest(tmp_path / "corpus", [tmp_path / "pdfs"])[0], "permit") == {("permits.pdf", 1)}


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


def test_text_in_any_script_is_searched_as_whoosh_words(tmp_path: Path) -> None:
    """Whoosh's words are runs of Unicode word characters: a run of Chinese characters is one
    word, accents are kept, an apostrophe or a hyphen splits."""
    from deskbench.search.snippet import make_snippet

    index = PageIndex(tmp_path / "idx", create=True)
    texts = {("zh.pdf", 1): "本公司二零一五年度报告", ("zh.pdf", 2): "董事会决议公告",
             ("fr.pdf", 1): "Procès-verbal de la séance du conseil d'administration", ("mix.pdf", 1): "Report2015年度 summary"}
    with index.writer() as w:
        for doc in ("zh.pdf", "fr.pdf", "mix.pdf"):
            w.replace_document(doc, [(p, t) for (d, p), t in texts.items() if d == doc])

    def found(query: str) -> list[tuple[str, int]]:
        return [(p.document, p.page) for p in index.search(query).pages]

    assert found("本公司二零一五年度报告") == [("zh.pdf", 1)]
    assert found('"年度报告"') == found("年度报告") == []  # part of a word, as in Whoosh
    assert found("董事会决议公告") == [("zh.pdf", 2)]
    assert found("procès verbal séance administration") == [("fr.pdf", 1)]
    assert found("proces verbal seance") == []  # no accent folding, as in Whoosh
    assert found('"conseil administration"') == [("fr.pdf", 1)]  # "d" is one letter: dropped
    assert found("report2015年度") == [("mix.pdf", 1)]
    result = index.search("本公司二零一五年度报告")
    assert make_snippet(texts[("zh.pdf", 1)], result.highlights) == "**本公司二零一五年度报告**"


@pytest.mark.parametrize("query", ["car*", "c?r", "car park", '"car park"', "scar OR carriage", "park NOT x", "*park", "ca*e"])
def test_snippet_fast_path_agrees_with_the_token_path(query: str) -> None:
    from deskbench.search.query import highlights
    from deskbench.search.snippet import _match_spans

    text = "Cars and carriage, CAR-park; scar. Car_park carpark 2car"
    ascii_spans = _match_spans(text, highlights(parse_query(query)))
    unicode_spans = _match_spans(text + " é", highlights(parse_query(query)))  # forces the token path
    assert [(a, b) for a, b, _ in ascii_spans] == [(a, b) for a, b, _ in unicode_spans]
    assert ascii_spans


def test_wildcards_score_as_whoosh_scores_them(operator_corpus: Corpus) -> None:
    """whoosh.query.MultiTerm.matcher: one matching term is that term, BM25F-scored; several
    are an OR without weighting: on an index of at most 5,000 pages, 3 or more terms make an
    ArrayUnionMatcher that scores 1, 2 terms a UnionMatcher that adds their BM25F scores."""
    several = operator_corpus.search("car*", k=10)  # car, carriage, cars
    assert {h.score for h in several} == {1.0} and len(several) == 3
    one = operator_corpus.search("carr*", k=10)  # carriage only
    assert [(h.document, h.page, h.score) for h in one] == \
           [(h.document, h.page, h.score) for h in operator_corpus.search("carriage", k=10)]
    assert one[0].score != 1.0
    two = operator_corpus.search("h*", k=10)  # harbour, helicopter (never on the same page)
    alone = operator_corpus.search("harbour", k=10) + operator_corpus.search("helicopter", k=10)
    assert sorted((h.document, h.page, h.score) for h in two) == sorted((h.document, h.page, h.score) for h in alone)
    assert {h.score for h in two} != {1.0}


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
