"""`--agent heaven`: one HEAVEN retrieval, then MADQA's official HEAVEN request (baselines/heaven/
heaven.py _call_vlm, stored with its source in tests/data/heaven_official.json) to a scripted
model over the OpenAI wire, the reply parsed as _parse_answer parses it; and `deskbench run` end to
end with tiny random DSE and ColQwen2 models built offline (tests/tiny_vision_encoders.py)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, ingest, run_cli, write_text_pdf
from fake_openai import FakeOpenAI

from deskbench.agents.base import AgentContext
from deskbench.corpus import Corpus
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.runs.identity import stored_identities
from deskbench.runs.store import RunStore
from deskbench.search.retriever import Bm25Retriever
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.docqa.agents.heaven import identity as heaven_identity
from deskbench.tracks.docqa.agents.heaven import page_jpeg, parse_reply, render_dpi
from deskbench.tracks.docqa.agents.registry import make_agent
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

OFFICIAL = json.loads((REPO / "tests" / "data" / "heaven_official.json").read_text())
TASK = DocQATask(id="q1", question="What was the harbour revenue in 2021?", answer_variants=[["12 million"]],
                 evidence=[{"document": "a.pdf", "page": 1}])
FAST = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02, timeout=300.0)
REPLY = ('Here it is:\n```json\n{"answer": ["12 million"], "citations": [{"file": "a.pdf", "page": 1}, '
         '{"page": 2}]}\n```')


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tiny_vision_encoders import MAX_PIXELS, MIN_PIXELS, write_tiny_colqwen2, write_tiny_dse

    root = tmp_path_factory.mktemp("heaven-agent")
    write_text_pdf(root / "pdfs" / "a.pdf", ["Harbour revenue 2021: 12 million", "Minutes of the board"])
    write_text_pdf(root / "pdfs" / "b.pdf", ["School budget", "Weather: rain", "Annual report"])
    corpus, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    return {"corpus": corpus, "root": root, "dse": write_tiny_dse(root / "dse", seed=5),
            "colqwen": write_tiny_colqwen2(root / "cq", seed=6), "pixels": (MIN_PIXELS, MAX_PIXELS)}


def _retriever(world: dict[str, Any], corpus: Corpus, **options: Any) -> Any:
    from deskbench.search.embedded.heaven import ClosedClassTagger, HeavenOptions, HeavenRetriever
    from deskbench.search.embedded.late_visual import COLQWEN2, LateOptions, LateVisualRetriever
    from deskbench.search.embedded.visual import DseOptions, DseRetriever, PageRender, find_model

    render = PageRender(dpi=36, max_pixels=200_000)
    low, high = world["pixels"]
    dse = DseRetriever(corpus, find_model("dse", str(world["dse"]), allow_download=False),
                       DseOptions(render=render, min_pixels=low, max_pixels=high))
    cq = LateVisualRetriever(corpus, find_model("colqwen", str(world["colqwen"]), allow_download=False), COLQWEN2,
                             LateOptions(render=render))
    return HeavenRetriever(corpus, dse, cq, HeavenOptions(layout="grid", **options), None, ClosedClassTagger())


def _run(fake: FakeOpenAI, corpus: Corpus) -> Any:
    from deskbench.models.openai_chat import OpenAIChat

    model = OpenAIChat("fake", base_url=fake.base_url, api_key="k", id="openai-compat/fake")
    ctx = AgentContext(model=ResilientModel(model, policy=FAST), corpus=corpus)
    return asyncio.run(make_agent("heaven").run(TASK, ctx))


def test_heaven_agent_sends_the_official_request_and_parses_the_reply(world: dict[str, Any]) -> None:
    corpus = Corpus.open(world["corpus"].root)
    corpus.retriever = heaven = _retriever(world, corpus, k2=3, reduction_factor=2)
    expected_pages = [(p.document, p.page) for p in heaven.search(TASK.question, 3)]
    with FakeOpenAI(script=lambda body, n: {"kind": "text", "text": REPLY}) as fake:
        result = _run(fake, corpus)
        (body,) = fake.requests
    assert result.status == "ok", result.error
    assert result.submission.answer == ["12 million"]
    # the citation without a file is dropped; the other is kept as written (1-based page)
    assert [(c.document, c.page) for c in result.submission.citations] == [("a.pdf", 1)]
    search, call = result.trajectory
    assert isinstance(search, ToolCallStep) and isinstance(call, ModelCallStep)
    assert search.arguments == {"query": TASK.question}  # the question as written, retrieved once
    assert search.result == {"pages": [list(p) for p in expected_pages]}
    # the request: one user message, the official text then the pages as JPEG data URLs, detail high
    (message,) = body["messages"]
    assert message["role"] == "user" and body["max_tokens"] == OFFICIAL["max_tokens"]
    assert not {"response_format", "tools", "temperature"} & set(body)
    text, *images = message["content"]
    context = "\n".join(f"Image {i + 1}: {d}, Page {p}" for i, (d, p) in enumerate(expected_pages))
    assert text == {"type": "text", "text": OFFICIAL["prompt_template"].replace("{context}", context)
                    .replace("{question}", TASK.question).replace("{{", "{").replace("}}", "}")}
    assert len(images) == 3 and all(i["image_url"]["detail"] == "high" for i in images)
    from PIL import Image

    for image, (doc, page) in zip(images, expected_pages, strict=True):
        url = image["image_url"]["url"]
        assert url.startswith("data:image/jpeg;base64,")
        data = base64.b64decode(url.split(",", 1)[1])
        assert data == page_jpeg(corpus, doc, page)
        assert Image.open(io.BytesIO(data)).size == (1224, 1584)  # US letter at 144 dpi


def test_heaven_agent_without_the_heaven_retriever_is_an_error(world: dict[str, Any]) -> None:
    corpus = Corpus.open(world["corpus"].root)
    corpus.retriever = Bm25Retriever(corpus.index)
    with FakeOpenAI(script=lambda body, n: {"kind": "text", "text": REPLY}) as fake:
        result = _run(fake, corpus)
        assert fake.requests == []
    assert result.status == "error" and "--retriever heaven=DSE_MODEL,COLQWEN_MODEL" in (result.error or "")


def test_parse_reply_as_the_official_parser() -> None:
    pattern = re.compile(OFFICIAL["answer_pattern"])
    assert pattern.search(REPLY) is not None
    assert parse_reply(REPLY) == (["12 million"], [{"file": "a.pdf", "page": 1}, {"page": 2}])
    assert parse_reply("  The revenue was 12 million.\n") == (["The revenue was 12 million."], [])
    assert parse_reply('{"answer": "one", "citations": []}') == (["one"], [])  # a string answer, one item
    bad = '{"answer": ["x"], "citations": [}'
    assert parse_reply(bad) == ([bad], [])  # invalid JSON: the whole reply is the answer
    assert parse_reply('{"answer": ["x"]} and "citations"') == (['{"answer": ["x"]} and "citations"'], [])


def test_render_dpi_follows_the_file_size() -> None:
    mb = 1024 * 1024
    assert [render_dpi(n) for n in (5 * mb, 21 * mb, 51 * mb)] == [144, 100, 72]


def test_deskbench_run_heaven_end_to_end(world: dict[str, Any], tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    spec = f"heaven={world['dse']},{world['colqwen']},k2=2,layout=grid,reduction_factor=2"
    out = tmp_path / "run"
    with FakeOpenAI(script=lambda body, n: {"kind": "text", "text": REPLY}) as fake:
        proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(world["corpus"].root), "--agent", "heaven",
                       "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(out), "--json", "--quiet",
                       "--retriever", spec, timeout=900)
        assert proc.returncode == 0, proc.stderr
        (body,) = fake.requests
    assert len(body["messages"][0]["content"]) == 1 + 2  # the text, then k2 = 2 pages
    store = RunStore(out, create=False)
    (system,) = store.systems()
    (episode,) = store.episodes(system)
    assert episode.status == "ok" and isinstance(episode.submission, DocQASubmission)
    assert episode.submission.answer == ["12 million"]
    settings = stored_identities(store)[system].config.settings
    assert settings["heaven"] == heaven_identity() and not {"dpi", "view", "top_k"} & set(settings)
    identity = settings["retriever"]
    assert identity["kind"] == "heaven" and identity["options"]["k2"] == 2
    assert identity["options"]["alpha"] == 0.1 and identity["options"]["k1"] == 200
    assert "grid" in identity["dla"] and "fallback" in identity["pos_tagger"]


def test_deskbench_run_heaven_refuses_another_retriever(world: dict[str, Any], tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(world["corpus"].root), "--agent", "heaven",
                   "--model", "openai-compat/x@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: --retriever bm25: --agent heaven retrieves with HEAVEN; give --retriever "
                                   "heaven=DSE_MODEL,COLQWEN_MODEL (docs/retrievers.md)")
