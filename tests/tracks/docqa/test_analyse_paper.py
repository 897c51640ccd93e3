"""The paper's analyses as the paper computes them (issue 35, item 7): the embedding of H.1 and H.6
chosen by `--embedding` (the paper's Snowflake Arctic Embed by default when it is installed, else the
fallback named), `analyse modality` (E.3, Prompt 3, Table 10, Figure 4) and `analyse gold-check`
(§2.2's oracle pass). Every expected figure is worked out in the test: from the tiny model itself
(its own vectors, cosine by hand) or by counting the constructed labels and answers."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI
from huggingface_hub import constants
from test_llm_judge import verdict

from deskbench.corpus import Corpus
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.analysis.embedding_choice import PAPER_MODEL
from deskbench.tracks.docqa.analysis.modality import META_KEY, PROMPT_3
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, Evidence

PAST = "2025-01-01T00:00:00.000+00:00"


def task(tid: str, answer: str, *pages: tuple[str, int], question: str | None = None) -> DocQATask:
    return DocQATask(id=tid, question=question or f"Question {tid}?", answer_variants=[[answer]],
                     evidence=[Evidence(document=d, page=p) for d, p in pages])


def make_run(path: Path, tasks: list[DocQATask], answers: dict[str, dict[str, str | None]],
             queries: dict[str, dict[str, list[str]]] | None = None) -> Path:
    """One episode per (system, task): an answer, or None for an episode that failed."""
    store = RunStore(path)
    store.save_tasks(tasks)
    for system, by_task in answers.items():
        for tid, answer in by_task.items():
            steps: list[Any] = [ToolCallStep(name="search_documents", arguments={"query": q})
                     for q in (queries or {}).get(system, {}).get(tid, [])]
            if answer is None:
                store.record(Episode(task_id=tid, system=system, status="error", error="model failed",
                                     started_at=PAST, finished_at=PAST))
            else:
                store.record(Episode(task_id=tid, system=system, status="ok", started_at=PAST, finished_at=PAST,
                                     submission=DocQASubmission(id=tid, answer=[answer], citations=[]),
                                     trajectory=steps))
    store.close()
    return path


def analyse(*args: str) -> tuple[dict[str, Any], str]:
    proc = run_cli("analyse", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(Path(args[args.index("--output") + 1]).read_text()), proc.stderr


# -- the embedding of H.1 and H.6 ------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer sentence-transformers model with its own query and document prompts."""
    from tiny_text_encoders import write_sentence_transformer

    folder: Path = write_sentence_transformer(tmp_path_factory.mktemp("st") / "tiny",
                                              prompts={"query": "what is ", "document": "page "})
    return folder


@pytest.fixture
def empty_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A Hugging Face cache holding nothing, offline: the paper's model is not installed."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield cache


def encode(folder: Path, texts: list[str], prompt: str) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    return np.asarray(model.encode(texts, prompt=prompt, normalize_embeddings=True, convert_to_numpy=True), dtype=np.float64)


def cos_distance(u: np.ndarray, v: np.ndarray) -> float:
    return float(1.0 - np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


DRIFT_TASKS = [task("d0", "x", ("alpha.pdf", 1)), task("d1", "y", ("alpha.pdf", 2)), task("d2", "z", ("beta.pdf", 1))]
DRIFT_QUERIES = {"agent:m": {"d0": ["harbour permit", "harbour permit fee"], "d1": ["mountain car", "river bridge", "budget"],
                             "d2": ["weather"]}}


def test_drift_embeds_the_queries_with_the_model_given(tmp_path: Path, tiny_st: Path, empty_hub: Path) -> None:
    run = make_run(tmp_path / "run", DRIFT_TASKS, {"agent:m": {"d0": "x", "d1": "wrong", "d2": "z"}}, DRIFT_QUERIES)
    rep, err = analyse("drift", str(run), "--output", str(tmp_path / "d.json"), "--embedding", str(tiny_st))
    # the queries as the model embeds a query: with its "query" prompt
    q = encode(tiny_st, ["harbour permit", "harbour permit fee", "mountain car", "river bridge", "budget"], "what is ")
    d0 = cos_distance(q[0], q[1])
    d1 = (cos_distance(q[2], q[3]) + cos_distance(q[3], q[4])) / 2
    plain = encode(tiny_st, ["harbour permit", "harbour permit fee"], "")
    assert abs(cos_distance(plain[0], plain[1]) - d0) > 1e-4  # the prompt changes the figure: it was used
    drift = {e["task_id"]: e["mean_drift"] for e in rep["systems"][0]["per_episode"]}
    assert drift["d0"] == pytest.approx(d0, abs=1e-5) and drift["d1"] == pytest.approx(d1, abs=1e-5)
    assert drift["d2"] is None  # one query: no drift
    s = rep["systems"][0]
    assert s["mean_drift_correct"] == pytest.approx(d0, abs=1e-5)  # d0 answered right, d1 wrong
    assert s["mean_drift_incorrect"] == pytest.approx(d1, abs=1e-5)
    assert rep["method"] == str(tiny_st)
    assert rep["embedding"]["embedding"] == str(tiny_st) and rep["embedding"]["fallback"] is None
    assert rep["embedding"]["prompts"] == {"query": "what is ", "document": "page "}
    assert f"embedding: {tiny_st} (sentence-transformers" in err


def test_without_the_paper_model_the_fallback_is_named(tmp_path: Path, empty_hub: Path, operator_corpus: Corpus) -> None:
    run = make_run(tmp_path / "run", DRIFT_TASKS, {"agent:m": {"d0": "x", "d1": "wrong", "d2": "z"}}, DRIFT_QUERIES)
    rep, err = analyse("drift", str(run), "--output", str(tmp_path / "d.json"))
    assert rep["method"] == "tfidf" and rep["embedding"]["embedding"] == "tfidf"
    why = rep["embedding"]["fallback"]
    assert why.startswith("tfidf (the paper's Snowflake/snowflake-arctic-embed-m-v2.0 is not installed")
    assert "huggingface-cli download Snowflake/snowflake-arctic-embed-m-v2.0" in why and "--embedding-download" in why
    assert f"embedding: {why}" in err
    # TF-IDF as before: d0's queries "harbour permit" / "harbour permit fee"; N = 6 queries in all;
    # df harbour 2, permit 2, fee 1: idf a = 1 + ln(7/3), b = 1 + ln(7/2); cos = 2a^2 / (sqrt(2a^2) sqrt(2a^2 + b^2))
    a, b = 1 + np.log(7 / 3), 1 + np.log(7 / 2)
    cos = 2 * a * a / (np.sqrt(2 * a * a) * np.sqrt(2 * a * a + b * b))
    drift = {e["task_id"]: e["mean_drift"] for e in rep["systems"][0]["per_episode"]}
    assert drift["d0"] == pytest.approx(1 - cos, abs=1e-9)

    hop = make_run(tmp_path / "hop", [task("h1", "x", ("alpha.pdf", 1), ("alpha.pdf", 3))], {"agent:m": {"h1": "x"}})
    rep, err = analyse("multihop", str(hop), "--corpus", str(operator_corpus.root), "--output", str(tmp_path / "h.json"))
    assert rep["method"] == "tfidf" and "is not installed" in rep["embedding"]["fallback"]
    assert "embedding: tfidf (the paper's Snowflake/snowflake-arctic-embed-m-v2.0 is not installed" in err


def test_the_paper_model_is_the_default_once_it_is_in_the_cache(tmp_path: Path, tiny_st: Path, empty_hub: Path,
                                                                 operator_corpus: Corpus) -> None:
    # the layout huggingface_hub writes, under the paper's name (a tiny stand-in: found, nothing fetched)
    repo = empty_hub / ("models--" + PAPER_MODEL.replace("/", "--"))
    shutil.copytree(tiny_st, repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    tasks = [task("h1", "x", ("alpha.pdf", 1), ("alpha.pdf", 3)), task("h2", "y", ("alpha.pdf", 2), ("beta.pdf", 1), ("beta.pdf", 2))]
    hop = make_run(tmp_path / "hop", tasks, {"agent:m": {"h1": "x", "h2": "no"}})
    rep, err = analyse("multihop", str(hop), "--corpus", str(operator_corpus.root), "--output", str(tmp_path / "h.json"))
    assert rep["method"] == PAPER_MODEL and rep["embedding"]["fallback"] is None
    assert rep["embedding"]["revision"] == "0123abcd"
    assert f"embedding: {PAPER_MODEL} (sentence-transformers" in err and "(the paper's)" in err
    # the pages as the model embeds a document (its "page " prompt); h2 is cross-document: the
    # largest distance of a pair from different documents (alpha 2 - beta 1, alpha 2 - beta 2)
    keys = [("alpha.pdf", 1), ("alpha.pdf", 3), ("alpha.pdf", 2), ("beta.pdf", 1), ("beta.pdf", 2)]
    v = dict(zip(keys, encode(tiny_st, operator_corpus.page_texts(keys), "page "), strict=True))
    items = {i["id"]: i for i in rep["items"]}
    assert items["h1"]["semantic_distance"] == pytest.approx(cos_distance(v[keys[0]], v[keys[1]]), abs=1e-5)
    expected = max(cos_distance(v[keys[2]], v[keys[3]]), cos_distance(v[keys[2]], v[keys[4]]))
    assert items["h2"]["semantic_distance"] == pytest.approx(expected, abs=1e-5)


def test_an_embedding_that_is_not_here_is_one_line(tmp_path: Path, empty_hub: Path) -> None:
    run = make_run(tmp_path / "run", DRIFT_TASKS, {"agent:m": {"d0": "x"}}, DRIFT_QUERIES)
    out = str(tmp_path / "d.json")
    proc = run_cli("analyse", "drift", str(run), "--output", out, "--embedding", "tiny-org/not-here")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "huggingface-cli download tiny-org/not-here" in proc.stderr and "--embedding-download" in proc.stderr
    proc = run_cli("analyse", "drift", str(run), "--output", out, "--embedding", str(tmp_path / "no-folder"))
    assert proc.returncode == 2 and "no model folder" in proc.stderr
    proc = run_cli("analyse", "drift", str(run), "--output", out, "--method", "minilm", "--embedding", "tfidf")
    assert proc.returncode == 2 and "give --embedding or --method, not both" in proc.stderr
    assert not Path(out).exists()


# -- analyse gold-check (§2.2) ---------------------------------------------------------------

GOLD_TASKS = [task("t0", "alpha", ("alpha.pdf", 1)), task("t1", "bravo", ("alpha.pdf", 2)),
              task("t2", "charlie", ("beta.pdf", 1)), task("t3", "delta", ("beta.pdf", 2)),
              task("t4", "echo", ("alpha.pdf", 3))]
#            oracle:m        agent:m      guess:m
#   t0       alpha   right   zzz          q
#   t1       wrong   WRONG   bravo right  q
#   t2       charlie right   x            charlie right
#   t3       (failed)        x            q              -> nobody right: unsolved
#   t4       nope    WRONG   x            q              -> nobody right: flagged and unsolved
GOLD_ANSWERS: dict[str, dict[str, str | None]] = {
    "oracle:m": {"t0": "alpha", "t1": "wrong", "t2": "charlie", "t3": None, "t4": "nope"},
    "agent:m": {"t0": "zzz", "t1": "bravo", "t2": "x", "t3": "x", "t4": "x"},
    "guess:m": {"t0": "q", "t1": "q", "t2": "charlie", "t3": "q", "t4": "q"},
}


def test_gold_check_flags_what_the_oracle_got_wrong(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", GOLD_TASKS, GOLD_ANSWERS)
    rep, err = analyse("gold-check", str(run), "--output", str(tmp_path / "g.json"))
    (oracle,) = rep["oracles"]
    assert oracle["system"] == "oracle:m" and oracle["checked"] == 4  # t3 had no answer
    assert [f["id"] for f in oracle["flagged"]] == ["t1", "t4"]
    t1, t4 = oracle["flagged"]
    assert t1["solved_by"] == ["agent:m"] and t4["solved_by"] == []
    assert t1["gold"] == [["bravo"]] and t1["oracle_answer"] == ["wrong"] and t1["accuracy"] == 0.0
    assert t1["evidence"] == [["alpha.pdf", 2]]
    assert oracle["not_answered"] == ["t3"] and oracle["unscored"] == []
    assert rep["unsolved"] == ["t3", "t4"]
    assert rep["scoring"]["scorer"] == "ANLS*"
    assert "oracle:m: 2 of 4 gold answers flagged for a manual check (t1, t4); 1 tasks unchecked" in err
    assert "2 tasks no system of the run answered correctly" in err

    # against another system's answers: agent:m is right only on t1
    rep, _ = analyse("gold-check", str(run), "--output", str(tmp_path / "a.json"), "--system", "agent:m")
    assert [f["id"] for f in rep["oracles"][0]["flagged"]] == ["t0", "t2", "t3", "t4"]
    assert sorted(rep["oracles"][0]["flagged"][1]["solved_by"]) == ["guess:m", "oracle:m"]


def test_gold_check_with_a_judge_and_without_an_oracle(tmp_path: Path) -> None:
    answers = {s: dict(a) for s, a in GOLD_ANSWERS.items()}
    answers["oracle:m"]["t1"] = "RIGHT: it is bravo, as page 2 says"  # far from the gold under ANLS*
    run = make_run(tmp_path / "run", GOLD_TASKS, answers)
    plain, _ = analyse("gold-check", str(run), "--output", str(tmp_path / "p.json"))
    assert [f["id"] for f in plain["oracles"][0]["flagged"]] == ["t1", "t4"]

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        answer = next(line for line in body["messages"][0]["content"].splitlines() if line.startswith("Predicted Answer"))
        return verdict("correct") if "RIGHT" in answer else verdict("incorrect", issue="wrong_content")

    with FakeOpenAI(script=script) as fake:
        judge = f"openai-compat/judge-model@{fake.base_url}"
        rep, err = analyse("gold-check", str(run), "--output", str(tmp_path / "j.json"), "--judge", judge, "--no-cache",
                           "--system", "oracle:m")
    # the judge takes t1 as correct: only t4 is flagged; its verdict is kept
    assert [f["id"] for f in rep["oracles"][0]["flagged"]] == ["t4"]
    assert rep["oracles"][0]["flagged"][0]["verdict"] == "incorrect"
    assert rep["scoring"]["scorer"] == "judge" and "scored with judge" in err
    assert rep["unsolved"] == ["t3", "t4"]

    none = make_run(tmp_path / "none", GOLD_TASKS, {"agent:m": GOLD_ANSWERS["agent:m"]})
    proc = run_cli("analyse", "gold-check", str(none), "--output", str(tmp_path / "n.json"))
    assert proc.returncode == 2 and "has no oracle system" in proc.stderr and "--agent oracle" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    proc = run_cli("analyse", "gold-check", str(none), "--output", str(tmp_path / "n.json"), "--system", "nobody")
    assert proc.returncode == 2 and "--system nobody: no such system" in proc.stderr


# -- analyse modality (E.3) ------------------------------------------------------------------

MODALITY_TASKS = [
    task("m1", "winter", ("alpha.pdf", 1), question="Which season do the rates cover?"),
    task("m2", "fee", ("alpha.pdf", 2), question="What do overnight cars pay?"),
    task("m3", "1998", ("alpha.pdf", 1), ("beta.pdf", 1), question="When was it incorporated?"),
    task("m4", "Bell", ("beta.pdf", 2), question="Whose helicopter is it?"),
    task("m5", "engine", ("alpha.pdf", 3), question="What is on file?"),
]
# the classifier's replies, by question: m5's is no JSON (left unclassified)
REPLIES = {
    "Which season": {"primary_category": "FREE_TEXT", "all_categories": ["FREE_TEXT"]},
    "overnight cars": {"primary_category": "TABLE_STRUCTURE", "all_categories": ["TABLE_STRUCTURE"]},
    "incorporated": {"primary_category": "STRUCTURED_DATA_EXTRACTION",
                     "all_categories": ["STRUCTURED_DATA_EXTRACTION", "OTHER_VISUAL"]},
    "helicopter": {"primary_category": "OTHER_VISUAL", "all_categories": ["OTHER_VISUAL"]},
}
#        category (primary)   agent:m   guess:m
#   m1   Free Text            right     wrong
#   m2   Tabular              wrong     right
#   m3   Structured (+Artif.) right     wrong
#   m4   Artifacts            wrong     wrong
#   m5   unclassified         right     right   (in no row)
MODALITY_ANSWERS: dict[str, dict[str, str | None]] = {
    "agent:m": {"m1": "winter", "m2": "x", "m3": "1998", "m4": "x", "m5": "engine"},
    "guess:m": {"m1": "x", "m2": "fee", "m3": "x", "m4": "x", "m5": "engine"},
}


def classifier(body: dict[str, Any], n: int) -> dict[str, Any]:
    text = next(p["text"] for p in body["messages"][0]["content"] if p["type"] == "text")
    for key, reply in REPLIES.items():
        if key in text:
            return {"kind": "text", "text": "```json\n" + json.dumps({**reply, "confidence": 0.9, "reasoning": "r"}) + "\n```"}
    return {"kind": "text", "text": "I cannot tell."}


def test_modality_classifies_each_question_with_its_gold_pages(tmp_path: Path, operator_corpus: Corpus) -> None:
    run = make_run(tmp_path / "run", MODALITY_TASKS, MODALITY_ANSWERS)
    with FakeOpenAI(script=classifier) as fake:
        model = f"openai-compat/flash@{fake.base_url}"
        args = ("modality", str(run), "--corpus", str(operator_corpus.root), "--model", model, "--no-cache")
        rep, err = analyse(*args, "--output", str(tmp_path / "m.json"))
        assert len(fake.requests) == 5  # one call per question
        by_question = {}
        for body in fake.requests:
            (message,) = body["messages"]
            text = next(p["text"] for p in message["content"] if p["type"] == "text")
            by_question[text.split("Question: ", 1)[1].split("\n", 1)[0]] = message["content"]
        # Prompt 3 with the question and its gold answer, then every gold page as an image
        m3 = by_question["When was it incorporated?"]
        assert m3[0]["text"] == PROMPT_3.format(question="When was it incorporated?", answer="1998")
        assert [p["type"] for p in m3[1:]] == ["image_url", "image_url"]
        assert [p["type"] for p in by_question["Whose helicopter is it?"][1:]] == ["image_url"]
        assert body["response_format"]["type"] == "json_schema"

        assert rep["classifier"] == "openai-compat/flash" and rep["asked"] == 5 and rep["reused"] == 0
        assert set(rep["labels"]) == {"m1", "m2", "m3", "m4"}
        assert rep["labels"]["m3"]["labels"] == ["STRUCTURED_DATA_EXTRACTION", "OTHER_VISUAL"]
        assert list(rep["unclassified"]) == ["m5"] and "not JSON" in rep["unclassified"]["m5"]
        # Table 10 over the 4 classified: one question in each of four categories
        assert [(c["category"], c["count"], c["share"]) for c in rep["distribution"]] == [
            ("Free Text", 1, 0.25), ("Structured", 1, 0.25), ("Tabular", 1, 0.25), ("Artifacts", 1, 0.25),
            ("Other Spatial", 0, 0.0)]
        assert rep["artifacts"] == {"charts/diagrams": 0, "handwriting/signatures": 1, "images/photos": 0,
                                    "text formatting": 0}
        assert (rep["requires_visual"]["count"], rep["requires_visual"]["share"]) == (3, 0.75)
        assert (rep["multiple"]["count"], rep["multiple"]["share"]) == (1, 0.25)  # m3: Structured + Artifacts
        assert rep["combinations"] == {"Structured + Artifacts": 1}
        systems = {s["system"]: s for s in rep["systems"]}
        agent = {c["category"]: (c["n"], c["accuracy"]) for c in systems["agent:m"]["by_category"]}
        assert agent == {"Free Text": (1, 1.0), "Structured": (1, 1.0), "Tabular": (1, 0.0), "Artifacts": (1, 0.0),
                         "Other Spatial": (0, None)}
        assert (systems["agent:m"]["n"], systems["agent:m"]["accuracy"]) == (4, 0.5)  # m5 is in no row
        guess = {c["category"]: c["accuracy"] for c in systems["guess:m"]["by_category"]}
        assert guess["Tabular"] == 1.0 and guess["Free Text"] == 0.0 and systems["guess:m"]["accuracy"] == 0.25
        assert "4 questions classified" in err and "1 questions unclassified (in no row), e.g. m5" in err
        assert "agent:m: accuracy 50.0% over 4" in err and "scored with ANLS*" in err

        # the labels are kept in the run: a second analysis asks only for the unclassified question
        again, err = analyse(*args, "--output", str(tmp_path / "m2.json"))
        assert len(fake.requests) == 6
        assert (again["reused"], again["asked"]) == (4, 1) and again["distribution"] == rep["distribution"]
    store = RunStore(run, create=False)
    kept = store.meta(META_KEY)
    store.close()
    assert isinstance(kept, dict) and set(kept["openai-compat/flash"]) == {"m1", "m2", "m3", "m4"}

    # the report's breakdowns gain the modality table: accuracy by category per system, m5 unclassified
    proc = run_cli("report", str(run), "--output", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    table = (tmp_path / "r.html").read_text().split('<table id="by-modality"')[1].split("</table>")[0]
    rows = {cells[0]: cells[1:] for row in table.split("<tr>")[2:]
            if (cells := re.findall(r"<td>(.*?)</td>", row))}
    # columns in the leaderboard's order: agent:m, guess:m
    assert list(rows) == ["Free Text", "Structured", "Tabular", "Artifacts", "(unclassified)"]
    assert rows["Free Text"] == ["100.0 <small>(n=1)</small>", "0.0 <small>(n=1)</small>"]
    assert rows["Tabular"] == ["0.0 <small>(n=1)</small>", "100.0 <small>(n=1)</small>"]
    assert rows["(unclassified)"] == ["100.0 <small>(n=1)</small>", "100.0 <small>(n=1)</small>"]
    plain = make_run(tmp_path / "plain", MODALITY_TASKS, MODALITY_ANSWERS)
    proc = run_cli("report", str(plain), "--output", str(tmp_path / "p.html"))
    assert proc.returncode == 0 and 'id="by-modality"' not in (tmp_path / "p.html").read_text()


def test_modality_needs_somewhere_to_write_and_a_model(tmp_path: Path, operator_corpus: Corpus) -> None:
    run = make_run(tmp_path / "run", MODALITY_TASKS, MODALITY_ANSWERS)
    proc = run_cli("analyse", "modality", str(run), "--corpus", str(operator_corpus.root), "--model", "openai-compat/x@http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "--output FILE.json, or --json" in proc.stderr
    proc = run_cli("analyse", "modality", str(run), "--corpus", str(operator_corpus.root), "--json")
    assert proc.returncode == 2 and "--model" in proc.stderr
