"""deskbench's bm25-agent on a `google/` model sends what the official gemini_agent.py sends.

gemini_agent.py (github OxRML/MADQA baselines/bm25-mllm-agent) drives Gemini through
google.generativeai's ChatSession on the native API. Its requests were recorded by running it,
unmodified, against a local server that answers and refuses as the strict simulator does
(scripts/official_requests/record_gemini.py; tests/data/official_requests/gemini.json says which
commit and SDK), over the shared scenario and gemini_questions.json. Here deskbench runs the same
questions through its protocol (bm25_protocols/gemini_script.py) and the real native adapter
(models/gemini_native.py) against the simulator (tests/sim_gemini_native.py), answering from the
same replies; both sides are normalised alike (images as mime/width/height) and compared element
by element: path, protocol headers, body, and the status each request got; then what each
episode ends with. The other tests take the script's paths one by one on a corpus of their own.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ingest
from PIL import Image
from sim_gemini_native import SimGeminiNative, abstract_reply

from deskbench.agents.base import AgentContext, AgentSettings
from deskbench.corpus import Corpus
from deskbench.corpus.page_text import apply_page_text, read_page_text
from deskbench.models.gemini_native import GeminiNative
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent
from deskbench.tracks.docqa.agents.bm25_protocols.gemini_script import (
    CONTINUE,
    INSTRUCTION,
    parse_final_answer,
)
from deskbench.tracks.docqa.tasks import DocQATask

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "official_requests"))
import common  # noqa: E402  (the recorder's normalise and comparison: standard library and Pillow)

DATA = Path(__file__).parents[2] / "data" / "official_requests"
MODEL = "gemini-2.0-flash-exp"  # the script's default model
PROTOCOL = "gemini_agent.py"
QUESTION = "Which engine powers the Bell 407?"
PAGES = {("manual.pdf", 1): "Bell 407 engine specifications Rolls-Royce 250-C47B turboshaft",
         ("manual.pdf", 2): "Bell 407 accessories and cabin options",
         ("report.pdf", 1): "Annual report of the harbour authority"}
SEARCH_DECL = {"name": "search_documents", "description": (
    "Search document collection and return images of matching pages. Supports: terms and phrases (use quotes "
    "for exact match), boolean operators (AND, OR, NOT - AND is default), wildcards (* for multiple chars, ? "
    "for single char). Examples: 'engine specifications', '\"Bell 407\" AND accessories', 'Bell*', "
    "'incorporation NOT date'."), "parameters": {"type": 6, "properties": {"query": {
        "type": 1, "description": "Search query using keywords, phrases in quotes, and boolean operators"}},
        "required": ["query"]}}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """Two PDFs of blank 2 x 1.5 inch pages (400 x 300 px at 200 DPI) with supplied page text."""
    root = tmp_path_factory.mktemp("gemini")
    (root / "pdfs").mkdir()
    for name, n in (("manual.pdf", 2), ("report.pdf", 1)):
        pages = [Image.new("RGB", (144, 108), (255, 255 - 40 * i, 255)) for i in range(n)]
        pages[0].save(root / "pdfs" / name, resolution=72.0, save_all=True, append_images=pages[1:])
    corpus, summary = ingest(root / "corpus", [root / "pdfs"], ocr="never")
    assert summary.files_ok == 2
    text = root / "text.jsonl"
    text.write_text("".join(json.dumps({"document": d, "page": p, "text": t}) + "\n" for (d, p), t in PAGES.items()))
    apply_page_text(corpus, read_page_text(text))
    return Corpus.open(root / "corpus")


def run(corpus: Corpus, replies: list[dict[str, Any]], *, max_steps: int = 5, top_k: int = 4) -> tuple[Any, SimGeminiNative]:
    """One episode of bm25-agent (the gemini_agent.py protocol) against the simulator; the
    simulator answers the n-th request it accepts with replies[n - 1]."""
    with SimGeminiNative(script=lambda body, n: replies[n - 1]) as sim:
        model = GeminiNative(MODEL, base_url=sim.base_url, api_key=sim.api_key)
        ctx = AgentContext(model=model, corpus=corpus,
                           settings=AgentSettings(protocol=PROTOCOL, max_steps=max_steps, top_k=top_k))

        async def go() -> Any:
            try:
                return await Bm25Agent().run(DocQATask(id="q", question=QUESTION, answer_variants=["x"]), ctx)
            finally:
                await model.aclose()

        result = asyncio.run(go())
    assert sim.script_errors == []
    return result, sim


def search(*queries: Any, text: str | None = None) -> dict[str, Any]:
    behaviour: dict[str, Any] = {"kind": "calls", "calls": [{"name": "search_documents", "args": {"query": q}}
                                                           for q in queries]}
    if text:
        behaviour["text"] = text
    return behaviour


def say(text: str) -> dict[str, Any]:
    return {"kind": "text", "text": text}


ANSWER = json.dumps({"answer": ["Rolls-Royce 250-C47B"], "citations": [{"file": "manual.pdf", "page": 1}]})


def user_texts(body: dict[str, Any]) -> list[str]:
    return [p["text"] for c in body["contents"] if c["role"] == "user" for p in c["parts"] if "text" in p]


def test_search_then_an_answer_after_the_pages(corpus: Corpus) -> None:
    result, sim = run(corpus, [search("Bell 407", text="I will search."), say(f"Found it: {ANSWER}")])
    assert sim.refused == [] and len(sim.requests) == 2
    first, second = sim.requests
    assert first == {"contents": [{"role": "user", "parts": [{"text": f"{INSTRUCTION}\n\nQuestion: {QUESTION}"}]}],
                     "generationConfig": {}, "tools": [{"functionDeclarations": [SEARCH_DECL]}]}
    assert second["contents"][1] == {"role": "model", "parts": [
        {"text": "I will search."},
        {"functionCall": {"name": "search_documents", "args": {"query": "Bell 407"}}}]}
    turn = second["contents"][2]["parts"]
    assert turn[0] == {"functionResponse": {"name": "search_documents", "response": {
        "result": "Found 2 matching pages. Images attached below."}}}
    assert sorted(p.get("text") for p in turn[1::2]) == ["\nFile: manual.pdf, Page: 1", "\nFile: manual.pdf, Page: 2"]
    for part in turn[2::2]:
        blob = part["inlineData"]
        assert blob["mimeType"] == "image/webp"
        image_bytes = base64.b64decode(blob["data"])
        assert image_bytes[12:16] == b"VP8L"  # lossless WebP, as the SDK encodes a PIL page
        assert Image.open(io.BytesIO(image_bytes)).size == (400, 300)  # 200 DPI
    assert result.status == "ok" and result.submission.answer == ["Rolls-Royce 250-C47B"]
    assert [(c.document, c.page) for c in result.submission.citations] == [("manual.pdf", 1)]
    assert result.submission.iterations == 1
    assert result.submission.search_history == [{"iteration": 1, "query": "Bell 407", "num_results": 2}]


def test_a_reply_to_the_pages_without_citations_goes_on_and_a_long_text_answer_ends(corpus: Corpus) -> None:
    result, sim = run(corpus, [search("harbour"), say("Not there yet."), say("short"),
                               say("The answer is a turboshaft engine")])
    assert sim.refused == [] and len(sim.requests) == 4
    assert user_texts(sim.requests[2])[-1] == CONTINUE and user_texts(sim.requests[3])[-1] == CONTINUE
    assert [c["role"] for c in sim.requests[3]["contents"]] == ["user", "model", "user", "model", "user", "model", "user"]
    # a text reply of 10 characters or fewer without citations is not an answer; a longer one is
    assert result.status == "ok" and result.submission.answer == ["The answer is a turboshaft engine"]
    assert result.submission.citations == [] and result.submission.iterations == 3


def test_a_search_without_hits_still_gets_its_function_response(corpus: Corpus) -> None:
    result, sim = run(corpus, [search("zeppelin"), say(ANSWER)])
    assert sim.refused == []
    assert sim.requests[1]["contents"][2]["parts"] == [{"functionResponse": {"name": "search_documents", "response": {
        "result": "Found 0 matching pages. Images attached below."}}}]
    assert result.status == "ok"


def test_two_calls_in_one_reply_are_answered_together_before_the_pages(corpus: Corpus) -> None:
    result, sim = run(corpus, [search("harbour", "cabin options"), say(ANSWER)])
    assert sim.refused == []
    parts = sim.requests[1]["contents"][2]["parts"]
    assert [("functionResponse" in p, p.get("text")) for p in parts[:2]] == [(True, None), (True, None)]
    assert [p["text"] for p in parts[2::2]] == ["\nFile: report.pdf, Page: 1", "\nFile: manual.pdf, Page: 2"]
    assert result.submission.search_history == [{"iteration": 1, "query": "harbour", "num_results": 1},
                                                {"iteration": 1, "query": "cabin options", "num_results": 1}]


def test_a_function_call_in_reply_to_the_pages_is_left_unanswered_and_the_api_refuses_what_follows(corpus: Corpus) -> None:
    # the script reads only text after the pages: the call stays in the chat without a response;
    # every later request is refused by the API, the forced last one too: the script's error row
    result, sim = run(corpus, [search("engine"), search("Rolls-Royce")], max_steps=4)
    assert len(sim.accepted) == 2 and len(sim.requests) == 5
    assert [r["rule"] for r in sim.refused] == ["function_responses_match_calls"] * 3
    assert user_texts(sim.requests[2])[-1] == CONTINUE and "tools" not in sim.requests[4]
    assert result.status == "error" and "Error: Unable to generate answer" in (result.error or "")


def test_a_malformed_function_call_is_not_kept_and_the_question_is_lost_with_it(corpus: Corpus) -> None:
    # the SDK raises on MALFORMED_FUNCTION_CALL before it keeps the turn: the next request holds
    # only "Please continue..." (the question went with the lost turn), as the script's chat does
    result, sim = run(corpus, [{"kind": "finish", "reason": "MALFORMED_FUNCTION_CALL"}, say(ANSWER)])
    assert sim.refused == []
    assert sim.requests[1]["contents"] == [{"role": "user", "parts": [{"text": CONTINUE}]}]
    assert result.status == "ok" and result.submission.iterations == 2


def test_the_last_iteration_has_no_tools_and_its_text_is_the_answer(corpus: Corpus) -> None:
    result, sim = run(corpus, [say("short"), say("Rolls-Royce")], max_steps=2)
    assert "tools" in sim.requests[0] and "tools" not in sim.requests[1]
    assert result.status == "ok" and result.submission.answer == ["Rolls-Royce"]  # the whole text, no JSON in it
    result, sim = run(corpus, [say("short"), search("engine")], max_steps=2)
    # a call with no tools offered: finishReason UNEXPECTED_TOOL_CALL, which the SDK raises on
    assert result.status == "error" and "Error: Unable to generate answer" in (result.error or "")


def test_a_call_without_query_gets_no_response(corpus: Corpus) -> None:
    result, sim = run(corpus, [{"kind": "calls", "calls": [{"name": "search_documents", "args": {"q": "x"}}]},
                               say(ANSWER)], max_steps=3)
    # nothing was searched, nothing sent: the next request leaves the call unanswered and is refused
    assert len(sim.accepted) == 1 and [r["rule"] for r in sim.refused] == ["function_responses_match_calls"] * 2
    assert result.status == "error"


def test_the_answer_parser_is_the_scripts() -> None:
    assert parse_final_answer('Here: {"answer": ["a"], "citations": [{"file": "x.pdf", "page": 2}]} done') == {
        "answer": ["a"], "citations": [{"file": "x.pdf", "page": 2}]}
    assert parse_final_answer('  {"answer": ["a"] "citations": []}  ') == {
        "answer": ['{"answer": ["a"] "citations": []}'], "citations": []}  # not JSON: the whole text
    assert parse_final_answer("no json") == {"answer": ["no json"], "citations": []}


# --- the recorded official requests ----------------------------------------------------------------

FIXTURE = json.loads((DATA / "gemini.json").read_text(encoding="utf-8"))
SCENARIO = json.loads((DATA / "scenario.json").read_text(encoding="utf-8"))
QUESTIONS = {q["id"]: q for q in [*SCENARIO["questions"],
                                 *json.loads((DATA / "gemini_questions.json").read_text(encoding="utf-8"))["questions"]]}
KEY = "official-recording-key"  # the recording's (fake) key: the header is compared too


@pytest.fixture(scope="module")
def scenario_corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The scenario's PDFs with its page text in the official Textract shape, as --page-text takes it."""
    root = tmp_path_factory.mktemp("scenario")
    corpus, summary = ingest(root / "corpus", [DATA / "pdfs"], ocr="never")
    assert summary.files_ok == len(SCENARIO["documents"])
    apply_page_text(corpus, read_page_text(DATA / "page_text.jsonl"))
    return Corpus.open(root / "corpus")


def deskbench_episode(corpus: Corpus, qid: str) -> tuple[Any, list[dict[str, Any]]]:
    """One scenario question through deskbench, with its requests as the fixture keeps them."""
    q = QUESTIONS[qid]
    replies = [abstract_reply(r) for r in q["replies"]]
    settings = FIXTURE["settings"]
    with SimGeminiNative(script=lambda body, n: replies[n - 1], api_key=KEY) as sim:
        model = GeminiNative(MODEL, base_url=sim.base_url, api_key=KEY)
        ctx = AgentContext(model=model, corpus=corpus, settings=AgentSettings(
            protocol=PROTOCOL, max_steps=settings["max_iterations"], top_k=settings["top_k"]))

        async def go() -> Any:
            try:
                return await Bm25Agent().run(DocQATask(id=qid, question=q["question"], answer_variants=["x"]), ctx)
            finally:
                await model.aclose()

        result = asyncio.run(go())
    assert sim.script_errors == []
    ids: dict[str, str] = {}
    wanted = ("content-type", "x-goog-api-key", "x-goog-request-params")
    requests = [{"method": "POST", "path": path, "headers": {k: v for k, v in headers.items() if k in wanted},
                 "body": common.normalise(body, ids), "status": status}
                for path, headers, body, status in zip(sim.paths, sim.headers, sim.requests, sim.statuses, strict=True)]
    return result, requests


def test_the_fixture_is_the_official_scripts() -> None:
    source = FIXTURE["source"]
    assert source["file"] == "baselines/bm25-mllm-agent/gemini_agent.py"
    assert source["commit"] == "978fa76de16acf983363557823f4f2d1ed74ba47"
    assert source["sdk"].startswith("google-generativeai==") and source["model"] == MODEL
    assert [q["id"] for q in FIXTURE["questions"]] == list(QUESTIONS)


def test_every_request_element_equals_the_official_scripts(scenario_corpus: Corpus) -> None:
    total = equal = 0
    problems: list[str] = []
    for recorded in FIXTURE["questions"]:
        _result, sent = deskbench_episode(scenario_corpus, recorded["id"])
        want = recorded["requests"]
        total += common.elements(want)
        equal += common.equal_elements(want, sent)
        problems += [f"{recorded['id']}{d}" for d in common.differences(want, sent)]
    assert problems == [], f"{equal} of {total} request elements equal; differing:\n" + "\n".join(problems[:40])
    assert equal == total
    print(f"gemini_agent.py: {equal} of {total} request elements equal")  # shown with pytest -s


@pytest.mark.parametrize("qid", list(QUESTIONS))
def test_each_episode_ends_as_the_official_one(scenario_corpus: Corpus, qid: str) -> None:
    recorded = next(q for q in FIXTURE["questions"] if q["id"] == qid)
    result, _sent = deskbench_episode(scenario_corpus, qid)
    official = recorded["result"]
    if official["answer"] == ["Error: Unable to generate answer"]:  # the script's error row: an error here
        assert result.status == "error" and "Error: Unable to generate answer" in (result.error or "")
        return
    assert result.status == "ok", result.error
    got = result.submission
    assert got.answer == official["answer"]
    assert [{"file": c.document, "page": c.page} for c in got.citations] == official["citations"]
    assert got.iterations == official["iterations"] and got.search_history == official["search_history"]
