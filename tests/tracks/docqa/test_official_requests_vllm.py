"""deskbench's bm25-agent on an OpenAI-compatible server (`vllm/NAME@URL`) sends what the official
vllm_agent.py sends; on Mistral's API (`mistral/MODEL`, "vllm_agent.py@mistral") it sends the same
except for the documented Mistral differences.

The official requests were recorded by running github OxRML/MADQA's baselines/bm25-mllm-agent/
vllm_agent.py, unmodified, against a scripted local server with vLLM's rules over the shared
scenario and its own questions (scripts/official_requests/record_vllm.py; tests/data/
official_requests/vllm.json says which commit and SDK). Here `deskbench run`, with its defaults
(the official preset: vllm_agent.py for the vllm provider, 5 iterations, top 4), runs the same
questions through the real OpenAI-compatible adapter against the strict simulator
(tests/sim_openai.py, profile "vllm": vLLM's own rules, auto tool choice on), which answers from
the same replies (tests/vllm_replies.py); both sides are normalised alike (scripts/
official_requests/common.py: images as mime/width/height, tool-call ids by order of appearance)
and compared element by element, status by status.

The simulator runs with schema_strict off: vllm_agent.py sends a tool result, then the pages as a
user message, then the next tool result, and leaves a call of a tool it does not offer without a
result; OpenAI's API refuses both, vLLM checks neither (its ChatCompletionRequest validates no
message order), and the leaderboard's vLLM rows were made this way.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run_cli
from PIL import Image
from sim_mistral import SimMistral
from sim_openai import SimOpenAI
from vllm_replies import MODEL, vllm_behaviour

from deskbench.models.image_limits import OMITTED
from deskbench.models.message_order import BRIDGE
from deskbench.tracks.docqa.agents.bm25_protocols.vllm_script import MAX_BASE64, shrink

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "official_requests"
sys.path.insert(0, str(ROOT / "scripts" / "official_requests"))
from common import as_data_urls, differences, elements, equal_elements, normalise  # noqa: E402

FIXTURE = json.loads((DATA / "vllm.json").read_text(encoding="utf-8"))
QUESTIONS = {q["id"]: q for path in ("scenario.json", "vllm_questions.json")
             for q in json.loads((DATA / path).read_text(encoding="utf-8"))["questions"]}
BY_TEXT = {q["question"]: q for q in QUESTIONS.values()}
CONTEXT = 10**9  # record_vllm.py's --max-model-len (the simulator counts image base64 as text)
PIXTRAL = "pixtral-large-latest"


class Replies:
    """Each question's replies in order, by the question the request asks (the second message),
    one per request that passes the server's rules; the status each request was answered with."""

    def __init__(self, to_behaviour: Any) -> None:
        self.to_behaviour = to_behaviour
        self.count: dict[str, int] = {}
        self.status: dict[int, int] = {}  # id(body) -> status

    def __call__(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        question = BY_TEXT[body["messages"][1]["content"]]
        k = self.count[question["id"]] = self.count.get(question["id"], 0) + 1
        behaviour = self.to_behaviour(question["replies"][k - 1], question["id"], k)
        self.status[id(body)] = behaviour["status"] if behaviour["kind"] == "status" else 200
        return behaviour


def _tasks(tmp: Path) -> Path:
    tasks = tmp / "tasks.jsonl"
    asked = [QUESTIONS[official["id"]] for official in FIXTURE["questions"]]
    tasks.write_text("".join(json.dumps({"id": q["id"], "question": q["question"], "answer_variants": [["x"]]}) + "\n"
                             for q in asked), encoding="utf-8")
    return tasks


def _sent(sim: Any, replies: Replies, refused: dict[int, int]) -> dict[str, list[dict[str, Any]]]:
    """The requests the simulator got, by question, in the fixture's form (status included)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for body, headers in zip(sim.requests, sim.headers, strict=True):
        status = replies.status.get(id(body), refused.get(id(body)))
        grouped.setdefault(BY_TEXT[body["messages"][1]["content"]]["id"], []).append(
            {"method": "POST", "path": "/v1/chat/completions",
             "headers": {"content-type": headers.get("content-type")}, "body": body, "status": status})
    return grouped


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`deskbench ingest` of the scenario's PDFs with its page text (the official Textract shape)."""
    tmp = tmp_path_factory.mktemp("official_vllm")
    proc = run_cli("ingest", str(DATA / "pdfs"), "--corpus", str(tmp / "corpus"),
                   "--page-text", str(DATA / "page_text.jsonl"))
    assert proc.returncode == 0, proc.stderr
    return tmp / "corpus"


@pytest.fixture(scope="module")
def vllm_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict[str, Any]]]]:
    """`deskbench run --model vllm/default@<simulator>` with the defaults; the run and what it sent."""
    tmp = tmp_path_factory.mktemp("vllm_run")
    replies = Replies(vllm_behaviour)
    with SimOpenAI(profile="vllm", schema_strict=False, auto_tool_choice=True, models={MODEL}, api_key=None,
                   context_length=CONTEXT, script=replies) as sim:
        proc = run_cli("run", "--tasks", str(_tasks(tmp)), "--corpus", str(corpus), "--model",
                       f"vllm/{MODEL}@{sim.base_url}", "--out", str(tmp / "run"), "--concurrency", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert sim.refused == [], sim.refused[:1]
    return tmp / "run", _sent(sim, replies, {})


def _compare(fixture_questions: list[dict[str, Any]], mine: dict[str, list[dict[str, Any]]],
             expected: Any = lambda q, requests: requests) -> tuple[int, int, list[str]]:
    total = same = 0
    problems: list[str] = []
    for official in fixture_questions:
        want = expected(official["id"], official["requests"])
        ids: dict[str, str] = {}
        got = [{**r, "body": normalise(r["body"], ids)} for r in mine.get(official["id"], [])]
        total += elements(want)
        same += equal_elements(want, got)
        problems += [f"{official['id']}{d}" for d in differences(want, got)]
    return same, total, problems


def test_every_request_element_equals_the_official_scripts(vllm_run: Any) -> None:
    _, mine = vllm_run
    same, total, problems = _compare(FIXTURE["questions"], mine)
    print(f"vllm_agent.py: {same} of {total} request elements equal over {len(FIXTURE['questions'])} questions")
    assert problems == [], "\n".join(problems[:20])
    assert same == total and total > 1000


def _rows(run_dir: Path) -> dict[str, tuple[str, Any, str | None]]:
    db = sqlite3.connect(run_dir / "run.sqlite")
    return {task: (status, json.loads(sub) if sub else None, error) for task, status, sub, error in
            db.execute("SELECT task_id, status, submission, error FROM episodes")}


def test_the_outcomes_are_the_official_scripts(vllm_run: Any) -> None:
    """What each question ends with: the official result (answer as the script returns it, citations,
    iterations, search history), "limit" where it ran out of iterations, an error where it raised."""
    rows = _rows(vllm_run[0])
    for official in FIXTURE["questions"]:
        status, submission, error = rows[official["id"]]
        if "error" in official:
            assert status == "error" and "raises here" in (error or ""), (official["id"], status, error)
            continue
        want = official["result"]
        if want["answer"] == ["Maximum iterations reached without answer"]:
            assert status == "limit" and "Maximum iterations reached without answer" in (error or "")
            continue
        assert status == "ok", (official["id"], error)
        answer = submission["answer"] if submission["answer_form"] == "list" else submission["answer"][0]
        assert answer == want["answer"], official["id"]
        assert [{"file": c.get("file", c.get("document")), "page": c["page"]} for c in submission["citations"]] \
            == want["citations"]
        assert submission["iterations"] == want["iterations"]
        assert submission["search_history"] == want["search_history"]


def test_the_run_records_the_protocol(vllm_run: Any) -> None:
    info = run_cli("info", str(vllm_run[0]), "--json")
    assert info.returncode == 0, info.stderr
    (system,) = json.loads(info.stdout)["systems"].values()
    settings = system["config"]["settings"]
    assert settings["protocol"] == "vllm_agent.py" and settings["max_steps"] == 5 and settings["top_k"] == 4
    assert settings["protocol_source"].endswith("978fa76de16acf983363557823f4f2d1ed74ba47 "
                                                "baselines/bm25-mllm-agent/vllm_agent.py")


def test_the_simulator_accepts_the_official_requests() -> None:
    """The recorded requests are what a vLLM server takes: the simulator's vLLM rules accept each
    (the one refused in the recording was a scripted refusal, not a rule)."""
    with SimOpenAI(profile="vllm", schema_strict=False, auto_tool_choice=True, models={MODEL}, api_key=None,
                   context_length=CONTEXT) as sim:
        for official in FIXTURE["questions"]:
            for r in official["requests"]:
                assert sim.check(as_data_urls(r["body"]), {"content-type": "application/json"}) is None, official["id"]


# --- the 4 MB image loop ----------------------------------------------------------------------

def test_a_page_over_4_mb_is_redrawn_as_the_script_redraws_it(tmp_path: Path) -> None:
    """A 7 x 7 inch page of colour noise (1400 x 1400 px at 200 DPI, ~7.8 MB of base64): deskbench sends
    the page the script's loop makes from the same rendering (0.9 steps from the original, Lanczos,
    until the base64 text is within 4 MiB), detail "high"."""
    from conftest import ingest

    from deskbench.agents.base import AgentContext, AgentSettings
    from deskbench.corpus import Corpus
    from deskbench.corpus.images import ImageSpec
    from deskbench.corpus.page_text import apply_page_text, read_page_text
    from deskbench.models.openai_chat import OpenAIChat
    from deskbench.tracks.docqa.agents.bm25 import Bm25Agent
    from deskbench.tracks.docqa.tasks import DocQATask

    px = 1400
    pixels = np.random.default_rng(11).integers(0, 256, (px, px, 3), dtype=np.uint8)
    (tmp_path / "pdfs").mkdir()
    Image.fromarray(pixels).save(tmp_path / "pdfs" / "noise.pdf", resolution=200.0)
    corpus, summary = ingest(tmp_path / "corpus", [tmp_path / "pdfs"], ocr="never")
    assert summary.files_ok == 1
    text = tmp_path / "text.jsonl"
    text.write_text(json.dumps({"document": "noise.pdf", "page": 1, "text": "static noise"}) + "\n")
    apply_page_text(corpus, read_page_text(text))
    corpus = Corpus.open(tmp_path / "corpus")
    rendered = corpus.page_image("noise.pdf", 1, ImageSpec(dpi=200, format="png", max_bytes=None))
    with Image.open(io.BytesIO(rendered)) as page:
        steps, want = shrink(page.convert("RGB"))
    assert steps >= 2 and len(base64.b64encode(rendered)) > MAX_BASE64  # each step scales the original

    answer = {"answer": {"answer": ["noise"], "citations": [{"file": "noise.pdf", "page": 1}]}}
    replies = [{"search": ["noise"]}, answer]
    with SimOpenAI(profile="vllm", schema_strict=False, auto_tool_choice=True, models={MODEL}, api_key=None,
                   context_length=CONTEXT, script=lambda body, n: vllm_behaviour(replies[n - 1], "n", n)) as sim:
        chat = OpenAIChat(MODEL, base_url=sim.base_url, api_key="none", id=f"vllm/{MODEL}")
        ctx = AgentContext(model=chat, corpus=corpus, settings=AgentSettings(protocol="vllm_agent.py", max_steps=5,
                                                                             top_k=4))
        import asyncio

        async def go() -> Any:
            try:
                return await Bm25Agent().run(DocQATask(id="n", question="What is on the page?", answer_variants=["x"]),
                                             ctx)
            finally:
                await chat.aclose()

        result = asyncio.run(go())
    assert result.status == "ok" and sim.refused == []
    (image,) = [p for m in sim.requests[1]["messages"] if isinstance(m["content"], list) for p in m["content"]
                if p["type"] == "image_url"]
    assert image["image_url"]["detail"] == "high"
    assert base64.b64decode(image["image_url"]["url"].split(",", 1)[1]) == want


# --- the same protocol on Mistral's API --------------------------------------------------------------

def mistral_behaviour(abstract: dict[str, Any], question: str, n: int) -> dict[str, Any]:
    """An abstract reply as Mistral answers it (tests/sim_mistral.py): the same calls in the same order."""
    if "status" in abstract:
        return {"kind": "status", "status": abstract["status"], "message": abstract.get("message")}
    calls = [{"name": "search_documents", "arguments": json.dumps({"query": q}, ensure_ascii=False)}
             for q in abstract.get("search", [])]
    if "answer" in abstract:
        calls.append({"name": "provide_answer", "arguments": json.dumps(abstract["answer"], ensure_ascii=False)})
    calls += abstract.get("calls", [])
    if not calls:
        return {"kind": "text", "text": abstract.get("text", "")}
    return {"kind": "tools", "calls": calls, "text": abstract.get("text", "")}


def _mistral_order(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Difference 1: each assistant turn's tool results right after it, then an assistant BRIDGE turn
    before the turn's other messages."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        out.append(message)
        i += 1
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        end = i
        while end < len(messages) and messages[end]["role"] != "assistant":
            end += 1
        results = [m for m in messages[i:end] if m["role"] == "tool"]
        others = [m for m in messages[i:end] if m["role"] != "tool"]
        out += results + ([{"role": "assistant", "content": BRIDGE}] if results and others else []) + others
        i = end
    return out


def _at_most_8_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Difference 2: the oldest page images past Mistral's 8 become a line of text."""
    images = [(i, j) for i, m in enumerate(messages) if isinstance(m["content"], list)
              for j, p in enumerate(m["content"]) if p["type"] == "image_url"]
    for i, j in images[:max(0, len(images) - 8)]:
        messages[i]["content"][j] = {"type": "text", "text": OMITTED.format(n=8)}
    return messages


def mistral_expected(question: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixture's requests with the documented Mistral differences (vllm_script.py, MISTRAL):
    1. the role order (results together, then "OK."), 2. at most 8 images, 3. the model's own name;
    4. the assistant turn's content as Mistral sent it ("" beside tool calls, where vLLM sends null);
    5. a call of a tool the protocol does not offer gets no result (as on vLLM), which Mistral refuses
    on the next request ("Not the same number of function calls and responses"): that request, then
    the script's retry without tool_choice, are refused, and the episode ends as an error."""
    out = []
    for r in requests:
        body = copy.deepcopy(r["body"])
        body["model"] = PIXTRAL
        for m in body["messages"]:
            if m["role"] == "assistant" and m.get("tool_calls") and m["content"] is None:
                m["content"] = ""
        body["messages"] = _at_most_8_images(_mistral_order(body["messages"]))
        out.append({**r, "body": body})
    if question == "v3":
        refused = {**out[1], "status": 400}
        retry = copy.deepcopy(refused)
        del retry["body"]["tool_choice"]
        out[1:] = [refused, retry]
    return out


def test_vllm_agent_py_on_mistral_differs_only_as_documented(corpus: Path, tmp_path: Path) -> None:
    replies = Replies(mistral_behaviour)
    with SimMistral(script=replies) as sim:
        proc = run_cli("run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(corpus), "--model", f"mistral/{PIXTRAL}",
                       "--out", str(tmp_path / "run"), "--concurrency", "1", "--quiet",
                       env={"MISTRAL_BASE_URL": sim.base_url, "MISTRAL_API_KEY": sim.api_key})
    assert proc.returncode == 0, proc.stderr
    assert [(r["rule"], r["body"]["message"]) for r in sim.refused] == [
        ("message_structure", "Not the same number of function calls and responses")] * 2  # v3 only
    refused = {id(r["request"]): r["status"] for r in sim.refused}
    same, total, problems = _compare(FIXTURE["questions"], _sent(sim, replies, refused), mistral_expected)
    print(f"vllm_agent.py@mistral: {same} of {total} request elements equal to the official vLLM requests "
          "with the documented Mistral differences applied")
    assert problems == [], "\n".join(problems[:20])
    assert same == total and total > 1000
    rows = _rows(tmp_path / "run")
    assert rows["v3"][0] == "error" and "Not the same number of function calls and responses" in rows["v3"][2]
    assert rows["q1"][0] == "ok" and rows["q1"][1]["answer"] == ["41 kilonewtons"]
    info = run_cli("info", str(tmp_path / "run"), "--json")
    (system,) = json.loads(info.stdout)["systems"].values()
    assert system["config"]["settings"]["protocol"] == "vllm_agent.py@mistral"
    assert "no official mistral_agent.py exists" in system["config"]["settings"]["protocol_source"]
