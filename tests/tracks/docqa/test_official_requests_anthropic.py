"""deskbench's bm25-agent on an `anthropic/` model sends what the official anthropic_agent.py sends.

The official requests were recorded by running github OxRML/MADQA's baselines/bm25-mllm-agent/
anthropic_agent.py, unmodified, against a scripted local server over the shared scenario
(scripts/official_requests/record_anthropic.py; tests/data/official_requests/anthropic.json says
which commit and SDK). Here deskbench runs the same scenario through its real Anthropic adapter
against the strict simulator (tests/sim_anthropic.py), which answers from the same reply script;
both sides are normalised alike (images as mime/width/height, tool_use ids by order of
appearance) and compared element by element. The 5 MB image loop is checked apart, on a page of
noise whose PNG is over the limit, against the loop's rule computed here on the same image.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ingest
from PIL import Image
from sim_anthropic import SimAnthropic

from deskbench.agents.base import AgentContext, AgentSettings
from deskbench.corpus import Corpus
from deskbench.corpus.images import ImageSpec
from deskbench.corpus.page_text import apply_page_text, read_page_text
from deskbench.models.capabilities import capabilities
from deskbench.models.types import ChatRequest, Message, ToolCall
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent
from deskbench.tracks.docqa.tasks import DocQATask

sys.path.insert(0, str(Path(__file__).parents[3] / "scripts" / "official_requests"))
from common import differences, elements, equal_elements, normalise  # noqa: E402  (the recorder's, stdlib + Pillow)

CLAUDE = "claude-sonnet-4-5-20250929"  # the script's default model
PROTOCOL = "anthropic_agent.py"
LIMIT = 5 * 1024 * 1024  # the script's max_base64_size


def _run(corpus: Corpus, question: str, replies: list[dict[str, Any]], *, max_steps: int = 5, top_k: int = 4,
         model: str = CLAUDE) -> tuple[Any, SimAnthropic]:
    """One episode of bm25-agent (the anthropic_agent.py protocol) against the simulator."""
    from deskbench.models.anthropic_chat import AnthropicChat
    script = lambda body, n: replies[n - 1]  # noqa: E731
    with SimAnthropic(script=script) as sim:
        chat = AnthropicChat(model, base_url=sim.base_url, api_key="sk-ant-test")
        ctx = AgentContext(model=chat, corpus=corpus,
                           settings=AgentSettings(protocol=PROTOCOL, max_steps=max_steps, top_k=top_k))

        async def go() -> Any:
            try:
                return await Bm25Agent().run(DocQATask(id="q", question=question, answer_variants=["x"]), ctx)
            finally:
                await chat.aclose()

        result = asyncio.run(go())
    assert sim.refused == [], sim.refused[:1]
    assert sim.script_errors == []
    return result, sim


def _search(query: str) -> dict[str, Any]:
    return {"type": "tool_use", "name": "search_documents", "input": {"query": query}}


def _answer(answer: Any, citations: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": "provide_answer", "input": {"answer": answer, "citations": citations}}


def _images(body: dict[str, Any]) -> list[str]:
    return [b["source"]["data"] for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "image"]


# --- the recorded requests --------------------------------------------------------------------------

DATA = Path(__file__).parents[2] / "data" / "official_requests"
HEADERS = ("anthropic-version", "content-type")  # the protocol's; the SDK's own (user-agent, ...) left out


def behaviour(reply: dict[str, Any]) -> dict[str, Any]:
    """An abstract reply (scenario.json: text, search, answer; anthropic.json's own questions add
    tools [{name, input}] and stop_reason) as the Anthropic reply the recorder's server gave:
    text first, then one search_documents call per query, the provide_answer call, other tools."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply["text"]}] if "text" in reply else []
    content += [_search(q) for q in reply.get("search", [])]
    if "answer" in reply:
        content.append(_answer(reply["answer"]["answer"], reply["answer"]["citations"]))
    content += [{"type": "tool_use", "name": t["name"], "input": t["input"]} for t in reply.get("tools", [])]
    out: dict[str, Any] = {"kind": "blocks", "content": content}
    if "stop_reason" in reply:
        out["stop_reason"] = reply["stop_reason"]
    return out


@pytest.fixture(scope="module")
def scenario_corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The scenario's PDFs, with its page text (the official Textract shape) in place of ours."""
    root = tmp_path_factory.mktemp("scenario")
    corpus, summary = ingest(root / "corpus", [DATA / "pdfs"], ocr="never")
    assert summary.files_ok == 3
    apply_page_text(corpus, read_page_text(DATA / "page_text.jsonl"))
    return Corpus.open(root / "corpus")


def _questions() -> dict[str, dict[str, Any]]:
    """The recorded questions with their reply scripts: the shared scenario's, then Anthropic's own."""
    shared = json.loads((DATA / "scenario.json").read_text(encoding="utf-8"))["questions"]
    own = json.loads((DATA / "anthropic_questions.json").read_text(encoding="utf-8"))["questions"]
    return {q["id"]: q for q in shared + own}


def test_the_requests_equal_the_official_scripts_element_for_element(scenario_corpus: Corpus) -> None:
    fixture = json.loads((DATA / "anthropic.json").read_text(encoding="utf-8"))
    settings, questions = fixture["settings"], _questions()
    assert [q["id"] for q in fixture["questions"]] == list(questions)  # recorded from these scripts
    want: list[Any] = []
    got: list[Any] = []
    for recorded in fixture["questions"]:
        question = questions[recorded["id"]]
        result, sim = _run(scenario_corpus, question["question"], [behaviour(r) for r in question["replies"]],
                           max_steps=settings["max_iterations"], top_k=settings["top_k"])
        ids: dict[str, str] = {}
        ours = [{"method": "POST", "path": "/v1/messages",
                 "headers": {k: v for k, v in ((h, {n.lower(): x for n, x in head.items()}.get(h)) for h in HEADERS)
                             if v is not None},
                 "body": normalise(body, ids)}
                for body, head in zip(sim.accepted, sim.headers, strict=True)]
        want.append(recorded["requests"])
        got.append(ours)
        _same_outcome(recorded, result)
    total, equal = elements(want), equal_elements(want, got)
    assert differences(want, got) == [], f"{equal} of {total} request elements equal"
    assert total >= 1348  # all of the 30 requests: prompt, tools, turns, blocks, headers (1348 when recorded)


def _same_outcome(recorded: dict[str, Any], result: Any) -> None:
    """The episode ends as the script's question did: its answer, citations, iterations and
    searches, or (where the script raised) an error naming why."""
    if "error" in recorded:
        assert result.status == "error" and "official anthropic_agent.py raises" in result.error, result.error
        return
    official, sub = recorded["result"], result.submission
    assert sub is not None, result.error
    assert sub.answer == official["answer"] and sub.iterations == official["iterations"]
    assert [{"file": c.document, "page": c.page} for c in sub.citations] == official["citations"]
    assert sub.search_history == official["search_history"]


def test_the_simulator_accepts_every_official_request() -> None:
    """The official requests worked against the real API: the strict simulator accepts each one
    (its images made again at their recorded sizes), so its rules are not stricter than the API."""
    fixture = json.loads((DATA / "anthropic.json").read_text(encoding="utf-8"))

    made: dict[tuple[int, int], str] = {}

    def png(width: int, height: int) -> str:
        if (width, height) not in made:
            buffer = io.BytesIO()
            Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
            made[width, height] = base64.b64encode(buffer.getvalue()).decode()
        return made[width, height]

    def materialise(value: Any) -> Any:
        if isinstance(value, dict):
            image = value.get("data", {}).get("image") if isinstance(value.get("data"), dict) else None
            if image is not None:
                return {**value, "data": png(image["width"], image["height"])}
            return {k: materialise(v) for k, v in value.items()}
        if isinstance(value, list):
            return [materialise(v) for v in value]
        return value

    with SimAnthropic() as sim:
        for question in fixture["questions"]:
            for request in question["requests"]:
                verdict = sim.check(materialise(request["body"]), request["headers"] | {"x-api-key": sim.api_key})
                assert verdict is None, (question["id"], verdict)


# --- the 5 MB loop ------------------------------------------------------------------------------

def _noise_corpus(root: Path) -> Corpus:
    """One 7 x 7 inch page of colour noise (1400 x 1400 px at 200 DPI: its PNG is ~5.9 MB, ~7.8 MB
    of base64), with supplied page text so that a search finds it."""
    px = 1400
    pixels = np.random.default_rng(7).integers(0, 256, (px, px, 3), dtype=np.uint8)
    (root / "pdfs").mkdir(parents=True)
    Image.fromarray(pixels).save(root / "pdfs" / "plate.pdf", resolution=200.0)
    corpus, summary = ingest(root / "corpus", [root / "pdfs"], ocr="never")
    assert summary.files_ok == 1
    text = root / "text.jsonl"
    text.write_text(json.dumps({"document": "plate.pdf", "page": 1, "text": "static noise photograph plate"}) + "\n")
    apply_page_text(corpus, read_page_text(text))
    return Corpus.open(root / "corpus")


def _official_loop(page: Image.Image) -> tuple[tuple[int, int], str, int]:
    """anthropic_agent.py's _load_page_image on `page`, by its rule: the PNG as Pillow writes it;
    while its base64 is over 5 MiB, scale_factor *= 0.9 and the ORIGINAL is resized (Lanczos) to
    int(width * scale_factor) x int(height * scale_factor). Returns (size, base64, steps)."""
    def b64(image: Image.Image) -> str:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return base64.b64encode(buffer.getvalue()).decode()

    data, size, scale, steps = b64(page), page.size, 1.0, 0
    while len(data) > LIMIT:
        scale *= 0.9
        steps += 1
        size = (int(page.width * scale), int(page.height * scale))
        data = b64(page.resize(size, Image.Resampling.LANCZOS))
    return size, data, steps


def test_a_page_over_5_mb_is_shrunk_as_the_official_loop_shrinks_it(tmp_path: Path) -> None:
    corpus = _noise_corpus(tmp_path)
    rendered = corpus.page_image("plate.pdf", 1, ImageSpec(dpi=200, format="png", max_bytes=None))
    page = Image.open(io.BytesIO(rendered)).convert("RGB")
    assert page.size == (1400, 1400)
    size, data, steps = _official_loop(page)
    assert steps >= 2  # the loop ran more than once: each step scales the original, not the last result
    result, sim = _run(corpus, "What does the plate show?",
                       [{"kind": "blocks", "content": [_search("static")]},
                        {"kind": "blocks", "content": [_answer(["noise"], [{"file": "plate.pdf", "page": 1}])]}])
    assert result.status == "ok" and result.submission.answer == ["noise"]
    (sent,) = _images(sim.accepted[1])
    assert Image.open(io.BytesIO(base64.b64decode(sent))).size == size
    assert sent == data  # the very PNG the script's loop ends with (Pillow's, from the same pixels)
    assert len(sent) <= LIMIT


# --- the adapter: what the script's requests need -------------------------------------------------

def test_tool_results_carry_is_error_and_a_plain_question_goes_as_a_string() -> None:
    from deskbench.models.anthropic_chat import to_anthropic
    calls = [ToolCall(id="toolu_a", name="search_documents", arguments='{"query": "x"}'),
             ToolCall(id="toolu_b", name="provide_answer", arguments='{"answer": [], "citations": []}')]
    body = to_anthropic(ChatRequest(messages=[
        Message(role="system", content="s"), Message(role="user", content="Question?"),
        Message(role="assistant", content="", tool_calls=calls),
        Message(role="tool", tool_call_id="toolu_a", content="Found 0 matching pages."),
        Message(role="tool", tool_call_id="toolu_b", content="wait", is_error=True),
        Message(role="user", content="more"),
    ]), capabilities(f"anthropic/{CLAUDE}"))
    assert body["messages"][0] == {"role": "user", "content": "Question?"}
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "Found 0 matching pages."},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "wait", "is_error": True},
        {"type": "text", "text": "more"}]  # merged into the results' turn: blocks, not a string
    # is_error is left out of the cache key unless set
    assert "is_error" not in Message(role="tool", tool_call_id="t", content="r").model_dump()
