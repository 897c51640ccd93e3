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
from deskbench.models.anthropic_chat import AnthropicChat, to_anthropic
from deskbench.models.capabilities import capabilities
from deskbench.models.types import ChatRequest, Message, ToolCall
from deskbench.tasks.docqa import DocQATask
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent

CLAUDE = "claude-sonnet-4-5-20250929"  # the script's default model
PROTOCOL = "anthropic_agent.py"
LIMIT = 5 * 1024 * 1024  # the script's max_base64_size


def _run(corpus: Corpus, question: str, replies: list[dict[str, Any]], *, max_steps: int = 5, top_k: int = 4,
         model: str = CLAUDE) -> tuple[Any, SimAnthropic]:
    """One episode of bm25-agent (the anthropic_agent.py protocol) against the simulator."""
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
