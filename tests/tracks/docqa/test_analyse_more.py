"""`analyse drift | guessability | multihop | lexical`: every number worked out by hand.

TF-IDF throughout: weight = count x idf, idf = ln((1 + N) / (1 + df)) + 1, N = texts fitted on,
df = texts holding the word; stopwords ("the", "and", "is", ...) are dropped first.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.analysis.drift import drift_report, episode_queries, load_drift
from deskbench.tracks.docqa.analysis.guessability import (
    classify_question,
    guessability,
    load_guessability,
)
from deskbench.tracks.docqa.analysis.lexical import lexical_analysis, load_lexical, ngrams
from deskbench.tracks.docqa.analysis.multihop import (
    POOLED,
    distance_bin,
    gap_bin,
    load_multihop,
    multihop_items,
    multihop_report,
    page_gap,
)
from deskbench.tracks.docqa.analysis.textsim import cosine_distance, pearson_r, tfidf_matrix
from deskbench.tracks.docqa.cli.analyse_more import register
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, Evidence

ln = math.log


def write_run(run_dir: Path, tasks: list[DocQATask], system: str,
              episodes: dict[str, tuple[str, list[str]]]) -> RunStore:
    """One episode per task id: (answer, search queries as tool calls)."""
    store = RunStore(run_dir)
    store.save_tasks(tasks)
    for tid, (answer, queries) in episodes.items():
        store.record(Episode(
            task_id=tid, system=system, status="ok",
            submission=DocQASubmission(id=tid, answer=[answer]),
            trajectory=[ToolCallStep(name="search_documents", arguments={"query": q}) for q in queries],
        ))
    return store


# -- TF-IDF and drift ---------------------------------------------------------------------


def test_tfidf_and_drift_of_three_queries_by_hand() -> None:
    queries = ["permit fee", "permit deadline", "harbour"]
    # N = 3; df: permit 2, fee 1, deadline 1, harbour 1; columns sorted: deadline fee harbour permit.
    a, b = 1 + ln(4 / 3), 1 + ln(4 / 2)  # idf(permit) = 1.287682, idf(others) = 1.693147
    m = tfidf_matrix(queries)
    np.testing.assert_allclose(m, [[0, b, 0, a], [b, 0, 0, a], [0, 0, b, 0]])
    # cos(q1, q2) = a^2 / (a^2 + b^2) = 1.658125 / 4.524872 = 0.366446; q2 and q3 share nothing.
    step1 = 1 - a * a / (a * a + b * b)
    assert step1 == pytest.approx(0.633554, abs=1e-6)
    rep = drift_report([("s", "run", [("t0", queries)], {"t0": 1.0})])
    ep = rep.systems[0].per_episode[0]
    assert ep.steps == pytest.approx([step1, 1.0])
    assert ep.mean_drift == pytest.approx((step1 + 1) / 2) == pytest.approx(0.816777, abs=1e-6)
    # Query operators and stopwords are not words: the same query, no drift.
    same = drift_report([("s", "r", [("t", ["permit AND fee", "the permit fee"])], {})])
    assert same.systems[0].per_episode[0].steps == pytest.approx([0.0], abs=1e-12)
    assert cosine_distance(np.zeros(2), np.zeros(2)) == 0.0 and cosine_distance(np.zeros(2), np.ones(2)) == 1.0


TASKS = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[[f"answer {i}"]]) for i in range(4)]


def test_drift_of_a_run_against_accuracy(tmp_path: Path) -> None:
    write_run(tmp_path / "run", TASKS, "bm25-agent:m", {
        "t0": ("answer 0", ["permit fee", "permit deadline", "harbour"]),  # correct
        "t1": ("wrong", ["harbour", "harbour"]),  # incorrect, drift 0
        "t2": ("wrong", []),  # incorrect, never reformulated
        "t3": ("answer 3", ["fee", "harbour"]),  # correct, drift 1 (nothing shared)
    }).close()
    rep = load_drift([tmp_path / "run"])
    s = rep.systems[0]
    # Fitted on all 7 queries: df permit 2, fee 2, deadline 1, harbour 4.
    a, b = 1 + ln(8 / 3), 1 + ln(8 / 2)  # permit and fee: a = 1.980829; deadline: b = 2.386294
    # q1 = (permit a, fee a), q2 = (permit a, deadline b): cos = a^2 / (sqrt(2) a * sqrt(a^2 + b^2))
    step1 = 1 - a / (math.sqrt(2) * math.sqrt(a * a + b * b))
    assert step1 == pytest.approx(0.548365, abs=1e-6)
    d0 = (step1 + 1) / 2  # 0.774182
    drifts = {e.task_id: e.mean_drift for e in s.per_episode}
    assert drifts == pytest.approx({"t0": d0, "t1": 0.0, "t2": None, "t3": 1.0})
    assert (s.episodes, s.reformulated) == (4, 3)
    assert s.mean_drift == pytest.approx((d0 + 0 + 1) / 3)
    assert s.median_drift == pytest.approx(d0)
    assert s.mean_drift_correct == pytest.approx((d0 + 1) / 2) and s.mean_drift_incorrect == 0.0
    assert s.accuracy_reformulated == pytest.approx(2 / 3) and s.accuracy_single_query == 0.0
    # Point-biserial: (M1 - M0) / s_n * sqrt(p q), s_n the population standard deviation.
    xs = [d0, 0.0, 1.0]
    r = ((d0 + 1) / 2 - 0.0) / float(np.std(xs)) * math.sqrt(2 / 3 * 1 / 3)
    assert s.point_biserial_r == pytest.approx(r) == pytest.approx(0.976543, abs=1e-5)
    assert s.point_biserial_p is not None and 0 < s.point_biserial_p < 1
    assert rep.system_level_r is None  # one system: no correlation across systems


def test_queries_fall_back_to_search_history_and_bad_runs_are_refused(tmp_path: Path) -> None:
    ep = Episode(task_id="t", system="s", status="ok",
                 submission=DocQASubmission(id="t", answer=["x"], search_history=["a b", "c"]))
    assert episode_queries(ep) == ["a b", "c"]
    with pytest.raises(UserError, match="nothing does not exist"):
        load_drift([tmp_path / "nothing"])
    RunStore(tmp_path / "empty").save_tasks(TASKS)
    with pytest.raises(UserError, match="has no episodes yet"):
        load_drift([tmp_path / "empty"])


def test_pearson_r_by_hand() -> None:
    # x = [0, 7, 0, 7], y = [1, 0, 1, 1]: sum dx dy = -3.5, sum dx^2 = 49, sum dy^2 = 0.75
    assert pearson_r([0, 7, 0, 7], [1, 0, 1, 1]) == pytest.approx(-3.5 / math.sqrt(49 * 0.75))
    assert pearson_r([1, 1, 1], [0, 1, 0]) is None and pearson_r([1, 2], [1, 2]) is None


# -- guessability -------------------------------------------------------------------------

GUESS_TASKS = [
    DocQATask(id="g1", question="Does the permit allow night work?", answer_variants=[["No"]]),
    DocQATask(id="g2", question="Is the fee paid monthly or yearly?", answer_variants=[["yearly"]]),
    DocQATask(id="g3", question="Which is larger: the harbour budget or the parks budget?",
              answer_variants=[["the parks budget"]]),
    DocQATask(id="g4", question="Who signed the lease?", answer_variants=[["Ann Lee"]]),
    DocQATask(id="g5", question="How many permits were issued, 5 or more?", answer_variants=[["7"]]),
    DocQATask(id="g6", question="Was the plan approved in 2019, 2020, or 2021?", answer_variants=[["2020"]]),
    DocQATask(id="g7", question="Is the fee 5 or more dollars?", answer_variants=[["yes"]]),
    DocQATask(id="g8", question="In what year was the harbour built?", answer_variants=[["1934"]]),
]
EXPECTED_CLASSES = {"g1": "yes_no", "g2": "binary_choice", "g3": "binary_choice", "g4": "other",
                    "g5": "other", "g6": "other", "g7": "yes_no", "g8": "other"}


def test_question_classes_follow_the_e2_rules() -> None:
    assert {t.id: classify_question(t.question, t.answer_variants) for t in GUESS_TASKS} == EXPECTED_CLASSES
    # Without a gold answer, an auxiliary verb opening means yes/no unless two options are listed.
    assert classify_question("Did it rain?") == "yes_no"
    assert classify_question("Did it rain or snow?") == "binary_choice"
    assert classify_question("Revenue 2019 vs. 2020: which was higher?") == "binary_choice"
    assert classify_question("Was it approved (or rejected) in 2020?") == "yes_no"
    assert classify_question("Which came first, the merger or the IPO?", [["the IPO"]]) == "binary_choice"
    assert classify_question("Is it X or Y?", [["Yes"]]) == "yes_no"  # the gold answer decides
    assert classify_question("What share is greater than or equal to 5%?") == "other"


def test_guessability_of_a_guess_run(tmp_path: Path) -> None:
    right = {"g1": "No", "g2": "yearly", "g4": "Ann Lee", "g8": "1934"}
    store = write_run(tmp_path / "run", GUESS_TASKS, "guess:m",
                      {t.id: (right.get(t.id, "zzzz"), []) for t in GUESS_TASKS})
    store.record(Episode(task_id="g3", system="bm25-agent:m", status="ok",
                         submission=DocQASubmission(id="g3", answer=["the parks budget"])))
    store.close()
    rep = load_guessability(tmp_path / "run")
    assert [s.system for s in rep.systems] == ["guess:m"]  # other agents are not guessing
    assert rep.classes == EXPECTED_CLASSES
    s = rep.systems[0]
    # yes/no: g1 right, g7 wrong; binary: g2 right, g3 wrong; other: g4, g8 right of g4, g5, g6, g8.
    assert (s.questions, s.correct, s.guessability) == (8, 4.0, 0.5)
    assert {c: (v.questions, v.correct, v.accuracy, v.share_of_correct) for c, v in s.by_class.items()} == {
        "yes_no": (2, 1.0, 0.5, 0.25), "binary_choice": (2, 1.0, 0.5, 0.25), "other": (4, 2.0, 0.5, 0.5)}
    assert s.random == 0.5 * (1 + 1) / 8  # Table 9: half the correct constrained guesses
    assert s.contamination == 2 / 8 and s.knowledge == 0.5 - 0.125
    assert s.chance_baseline == 0.5 * 4 / 8
    assert guessability(GUESS_TASKS, {}).guessability == 0.0  # missing guesses are wrong
    write_run(tmp_path / "other", GUESS_TASKS, "bm25-agent:m", {"g1": ("No", [])}).close()
    with pytest.raises(UserError, match="no guess-agent episodes"):
        load_guessability(tmp_path / "other")


# -- multi-hop ----------------------------------------------------------------------------


def test_page_gap_is_the_page_difference() -> None:
    """MADQA H.1: "the page index difference between evidence locations" (not the pages between)."""
    assert page_gap([("a", 3), ("a", 4)]) == 1  # adjacent pages differ by 1
    assert page_gap([("a", 5), ("a", 3)]) == 2
    assert page_gap([("a", 1), ("a", 4), ("a", 12)]) == 11  # the largest difference of a pair
    assert page_gap([("a", 4), ("a", 4), ("a", 6)]) == 2  # a page listed twice is one page
    assert page_gap([("a", 1), ("b", 2)]) is None and page_gap([("a", 1)]) is None
    assert [gap_bin(g) for g in (1, 2, 3, 5, 6, 40)] == ["1", "2", "3-5", "3-5", "6+", "6+"]
    with pytest.raises(ValueError, match="below 1"):
        gap_bin(0)
    assert [distance_bin(d) for d in (0.0, 0.1499, 0.15, 0.45, 0.5999, 0.6, 1.0)] == [
        "0-0.15", "0-0.15", "0.15-0.3", "0.45-0.6", "0.45-0.6", "0.6+", "0.6+"]


PAGES = {("a.pdf", 1): "harbour fee", ("a.pdf", 2): "harbour fee", ("a.pdf", 9): "parks budget",
         ("b.pdf", 1): "harbour budget"}


def _task(tid: str, *pages: tuple[str, int]) -> DocQATask:
    return DocQATask(id=tid, question="?", answer_variants=[["x"]],
                     evidence=[Evidence(document=d, page=p) for d, p in pages])


HOP_TASKS = [
    _task("m1", ("a.pdf", 1), ("a.pdf", 2)),
    _task("m2", ("a.pdf", 1), ("a.pdf", 9)),
    _task("m3", ("a.pdf", 2), ("b.pdf", 1)),
    _task("m4", ("a.pdf", 9), ("b.pdf", 1)),
    _task("s1", ("a.pdf", 1)),
]


def test_multihop_items_and_accuracy_by_bin() -> None:
    items = {i.id: i for i in multihop_items(HOP_TASKS, lambda keys: [PAGES[k] for k in keys])}
    assert sorted(items) == ["m1", "m2", "m3", "m4"]  # single-page items are not multi-hop
    # Fitted on the 4 distinct pages: df harbour 3, fee 2, budget 2, parks 1.
    h, f, p = 1 + ln(5 / 4), 1 + ln(5 / 3), 1 + ln(5 / 2)  # budget has f's idf too
    m3 = 1 - h * h / (h * h + f * f)  # "harbour fee" vs "harbour budget": 0.604073
    m4 = 1 - f * f / (math.sqrt(p * p + f * f) * math.sqrt(h * h + f * f))  # 0.518799
    assert [(items[k].hop_type, items[k].page_gap) for k in ("m1", "m2", "m3", "m4")] == [
        ("cross_page", 1), ("cross_page", 8), ("cross_doc", None), ("cross_doc", None)]
    assert [items[k].semantic_distance for k in ("m1", "m2", "m3", "m4")] == pytest.approx([0.0, 1.0, m3, m4])
    assert (m3, m4) == pytest.approx((0.604073, 0.518799), abs=1e-6)

    rep = multihop_report(list(items.values()), {
        "A": {"m1": 1.0, "m2": 0.0, "m3": 1.0, "m4": 0.0},
        "B": {"m1": 1.0, "m2": 1.0, "m3": 0.0, "m4": None},
    })
    assert [s.system for s in rep.systems] == ["A", "B", POOLED]
    a = rep.systems[0].same_document
    assert [(b.bin, b.n, b.accuracy) for b in a.by_page_gap] == [("1", 1, 1.0), ("2", 0, None), ("3-5", 0, None), ("6+", 1, 0.0)]
    pooled = rep.systems[2]
    assert [(b.bin, b.n, b.items, b.accuracy) for b in pooled.same_document.by_page_gap if b.n] == [
        ("1", 2, 1, 1.0), ("6+", 2, 1, 0.5)]
    assert [(b.bin, b.accuracy) for b in pooled.same_document.by_semantic_distance if b.n] == [
        ("0-0.15", 1.0), ("0.6+", 0.5)]
    cross = pooled.cross_document
    assert [(b.bin, b.n, b.accuracy) for b in cross.by_semantic_distance if b.n] == [("0.45-0.6", 1, 0.0), ("0.6+", 2, 0.5)]
    assert (cross.n, cross.accuracy, cross.by_page_gap) == (3, pytest.approx(1 / 3), [])
    # gap vs accuracy over the four same-document pairs: x = [1, 8, 1, 8], y = [1, 0, 1, 1]
    assert pooled.same_document.r_page_gap == pytest.approx(-3.5 / math.sqrt(49 * 0.75))


def test_multihop_over_a_real_run_and_corpus(tmp_path: Path, operator_corpus: Corpus) -> None:
    tasks = [_task("x1", ("alpha.pdf", 1), ("alpha.pdf", 3)), _task("x2", ("alpha.pdf", 2), ("beta.pdf", 1)),
             _task("x3", ("beta.pdf", 2))]
    write_run(tmp_path / "run", tasks, "oracle:m", {"x1": ("x", []), "x2": ("no", [])}).close()
    rep = load_multihop(tmp_path / "run", operator_corpus.root)
    items = {i.id: i for i in rep.items}
    assert sorted(items) == ["x1", "x2"] and items["x1"].page_gap == 2  # pages 1 and 3
    assert all(0.0 < i.semantic_distance < 1.0 for i in items.values())  # real pages share some words
    s = rep.systems[0]
    assert (s.same_document.n, s.same_document.accuracy, s.cross_document.accuracy) == (1, 1.0, 0.0)
    write_run(tmp_path / "single", tasks[2:], "oracle:m", {"x3": ("x", [])}).close()
    with pytest.raises(UserError, match="no multi-hop task"):
        load_multihop(tmp_path / "single", operator_corpus.root)
    with pytest.raises(UserError, match="nocorpus does not exist"):
        load_multihop(tmp_path / "run", tmp_path / "nocorpus")


# -- lexical ------------------------------------------------------------------------------

LEX_TASKS = [
    DocQATask(id="q1", question="What is the harbour permit fee?", answer_variants=[["40"]],
              evidence=[Evidence(document="a.pdf", page=1)]),
    DocQATask(id="q2", question="Describe the parks budget.", answer_variants=[["-"]],
              evidence=[Evidence(document="b.pdf", page=1)]),
]
LEX_PAGES = [
    ("a.pdf", 1, "The permit fee for the harbour is 40 dollars."),  # gold of q1
    ("a.pdf", 2, "Harbour permit fee schedule."),
    ("b.pdf", 1, "Parks budget."),  # gold of q2
    ("b.pdf", 2, "Fee waived."),
]


def test_ngram_overlap_precision_and_recall_by_hand() -> None:
    # q1 -> harbour permit fee ("what", "is", "the" are dropped); q2 -> parks budget ("describe").
    assert ngrams(LEX_TASKS[0].question, 2) == {("harbour", "permit"), ("permit", "fee")}
    assert ngrams(LEX_TASKS[1].question, 3) == set()
    rep = lexical_analysis(LEX_TASKS, LEX_PAGES)
    assert rep.pages == 4
    rows = {(r.id, r.n): (r.ngrams, r.overlap, r.pages_matched, r.precision, r.recall) for r in rep.questions}
    # Gold page of q1, content words: permit fee harbour 40 dollars -> all 3 unigrams, bigram
    # "permit fee" but not "harbour permit" (1/2), not the trigram. Matching pages:
    # n=1 a1 a2 b2 (b2 has "fee"); n=2 a1 a2; n=3 a2 only ("harbour permit fee schedule").
    assert rows[("q1", 1)] == (3, 1.0, 3, pytest.approx(1 / 3), 1.0)
    assert rows[("q1", 2)] == (2, 0.5, 2, 0.5, 1.0)
    assert rows[("q1", 3)] == (1, 0.0, 1, 0.0, 0.0)
    assert rows[("q2", 1)] == (2, 1.0, 1, 1.0, 1.0)
    assert rows[("q2", 2)] == (1, 1.0, 1, 1.0, 1.0)
    assert rows[("q2", 3)] == (0, None, 0, None, 0.0)  # no trigram: nothing to find
    summary = {s.n: (s.mean_overlap, s.median_pages, s.precision, s.recall) for s in rep.summary}
    assert summary[1] == (1.0, 2.0, pytest.approx(2 / 3), 1.0)
    assert summary[2] == (0.75, 1.5, 0.75, 1.0)
    assert summary[3] == (0.0, 0.5, 0.0, 0.0)


# -- CLI ----------------------------------------------------------------------------------


def test_cli_commands_write_reports_and_plots(tmp_path: Path, operator_corpus: Corpus) -> None:
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    write_run(tmp_path / "run", TASKS, "bm25-agent:m", {
        "t0": ("answer 0", ["permit fee", "permit deadline", "harbour"]), "t1": ("wrong", ["harbour", "fee"])}).close()
    res = runner.invoke(app, ["drift", str(tmp_path / "run"), "--output", str(tmp_path / "d.json"),
                              "--plot", str(tmp_path / "d.png")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "d.json").read_text())["systems"][0]["reformulated"] == 2
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"

    write_run(tmp_path / "guess", GUESS_TASKS, "guess:m", {"g1": ("No", [])}).close()
    res = runner.invoke(app, ["guessability", str(tmp_path / "guess"), "--output", str(tmp_path / "g.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "g.json").read_text())["systems"][0]["guessability"] == 1 / 8

    hop = [_task("x1", ("alpha.pdf", 1), ("alpha.pdf", 3)), _task("x2", ("alpha.pdf", 2), ("beta.pdf", 1))]
    write_run(tmp_path / "hop", hop, "oracle:m", {"x1": ("x", [])}).close()
    res = runner.invoke(app, ["multihop", str(tmp_path / "hop"), "--corpus", str(operator_corpus.root),
                              "--output", str(tmp_path / "m.json"), "--plot", str(tmp_path / "m.png")])
    assert res.exit_code == 0, res.output
    assert len(json.loads((tmp_path / "m.json").read_text())["items"]) == 2
    assert (tmp_path / "m.png").stat().st_size > 1000

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps({"id": "l1", "question": "What is the annual report fee?",
                                      "answer_variants": [["x"]], "evidence": [{"document": "alpha.pdf", "page": 2}]}) + "\n")
    res = runner.invoke(app, ["lexical", "--tasks", str(tasks_file), "--corpus", str(operator_corpus.root),
                              "--output", str(tmp_path / "l.json")])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "l.json").read_text())
    assert rep["pages"] == 5
    # "annual report fee": alpha p2 reads "Annual report of the harbour authority ... pay a fee."
    uni = next(q for q in rep["questions"] if q["n"] == 1)
    assert uni["overlap"] == 1.0 and uni["recall"] == 1.0
    with pytest.raises(UserError, match="is not a file"):
        load_lexical(tmp_path / "none.jsonl", operator_corpus.root)


def test_guessability_classes_from_a_model_on_the_wire(tmp_path: Path) -> None:
    """Prompt 2 through a model (a local OpenAI-compatible server that answers per question): the
    model's classes are used; a question it answers with garbage falls back to the patterns and is
    listed. The model here calls every question "other" except g4, which it calls "yes_no"."""
    from fake_openai import FakeOpenAI

    from deskbench.models.openai_chat import OpenAIChat
    from deskbench.models.resilient import ResilientModel, RetryPolicy

    def script(body: dict, n: int) -> dict:
        prompt = body["messages"][0]["content"]
        assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_class"}}
        assert "Gold answer:" in prompt and "Classify this question:" in prompt
        if "night work" in prompt:  # g1: an invalid category, twice
            return {"kind": "tool", "name": "submit_class", "arguments": '{"category": "maybe"}'}
        category = "yes_no" if "signed the lease" in prompt else "other"
        return {"kind": "tool", "name": "submit_class", "arguments": json.dumps({"category": category})}

    write_run(tmp_path / "run", GUESS_TASKS, "guess:m", {"g4": ("Ann Lee", [])}).close()
    with FakeOpenAI(script=script) as fake:
        model = ResilientModel(OpenAIChat("m", base_url=fake.base_url, api_key="k", id="openai-compat/m"),
                               policy=RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.01))
        rep = load_guessability(tmp_path / "run", model)
        assert len(fake.requests) == len(GUESS_TASKS)
    assert rep.classifier == "openai-compat/m" and rep.pattern_fallbacks == ["g1"]
    assert rep.classes["g1"] == "yes_no"  # the patterns' verdict
    assert rep.classes["g4"] == "yes_no" and rep.classes["g2"] == "other"
    assert rep.systems[0].by_class["yes_no"].correct == 1.0  # g4's right guess now counts as yes/no
