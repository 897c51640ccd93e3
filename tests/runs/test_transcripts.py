"""Every episode's transcript in the run store: the exact question the model was sent, the exact
text it returned, the search hits with their scores, pages by reference, failed calls included."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import write_operator_corpus
from fake_openai import FakeOpenAI

from deskbench.corpus import Corpus
from deskbench.runs.store import RunStore
from deskbench.runs.track import execute_run
from deskbench.runs.transcript import ModelCallEvent, ToolEvent, expand, open_recorded_corpus, texts
from deskbench.tracks.docqa.run import RunSpec, prepare
from deskbench.tracks.docqa.tasks import DocQATask

QUESTION = "Which vehicle rental rates are given for the winter season (quetzal-7)?"
TASK = DocQATask(id="q1", question=QUESTION, answer_variants=[["Mountain car"]],
                 evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]


def _tool(name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}


def _run(fake: FakeOpenAI, corpus: Corpus, out: Path, monkeypatch: pytest.MonkeyPatch, view: str = "image") -> RunStore:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    spec = RunSpec(agent="bm25-agent", model="openai/gpt-4.1", out=out, corpus=corpus.root, concurrency=1, view=view,
                   preset="paper")  # the Prompt 5 loop (provide_answer) the fake's replies are for
    execute_run(prepare(spec, [TASK]))
    return RunStore(out, create=False)


def test_the_store_keeps_what_was_sent_and_what_came_back(operator_corpus: Corpus, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    answer = {"answer": ["Mountain car (winter tariff ñ✓)"], "citations": [{"file": "alpha.pdf", "page": 1}]}
    script = lambda b, n: _tool("search_documents", {"query": "mountain car winter"}) if n == 1 else _tool("provide_answer", answer)  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        store = _run(fake, operator_corpus, tmp_path / "run", monkeypatch)
        sent = list(fake.requests)
    doc = store.transcript("q1", "bm25-agent:openai/gpt-4.1")
    assert doc is not None
    calls = [e for e in doc.events if isinstance(e, ModelCallEvent)]
    tools = [e for e in doc.events if isinstance(e, ToolEvent)]
    assert len(calls) == 2 == len(sent)
    # the exact question, as the server received it
    wire_user = next(m["content"] for m in sent[0]["messages"] if m["role"] == "user")
    wire_text = wire_user if isinstance(wire_user, str) else " ".join(p.get("text", "") for p in wire_user)
    assert QUESTION in wire_text and any(QUESTION in t for t in texts(doc))
    # the exact replies, tool-call arguments byte for byte
    assert calls[0].reply is not None and calls[0].reply["message"]["tool_calls"][0]["arguments"] == \
        json.dumps({"query": "mountain car winter"})
    assert calls[1].reply is not None and calls[1].reply["message"]["tool_calls"][0]["arguments"] == json.dumps(answer)
    # the second request rebuilt from the deltas is the one on the wire, message for message
    rebuilt = doc.conversation(1)
    assert [m["role"] for m in rebuilt] == [m["role"] for m in sent[1]["messages"]]
    assert calls[1].prefix == len(calls[0].messages) and calls[1].messages[0]["role"] == "assistant"
    # the search: its query, and the hits with their scores; the page image by reference, not bytes
    (search,) = tools
    assert search.arguments == {"query": "mountain car winter"}
    assert search.result["hits"] and search.result["hits"][0]["file"] == "alpha.pdf"
    assert isinstance(search.result["hits"][0]["score"], float)
    images = [p for m in rebuilt if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"]
    assert images and images[0]["ref"] == "page:alpha.pdf#1@200" and "data" not in images[0]
    assert calls[0].options["tools"] == ["search_documents", "provide_answer"]
    assert calls[1].reply["usage"]["input_tokens"] >= 0 and calls[1].seconds >= 0


def test_a_failed_episode_keeps_the_reply_that_broke_it(operator_corpus: Corpus, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The case that motivated transcripts: `unparseable answer` and no way to see the reply."""
    broken = '{"answer": ["line\x01break"], "citations": ['
    with FakeOpenAI(script=lambda b, n: _tool("provide_answer", broken)) as fake:
        store = _run(fake, operator_corpus, tmp_path / "run", monkeypatch, view="text")
    (episode,) = store.episodes()
    assert episode.status != "ok"
    doc = store.transcript("q1", episode.system)
    assert doc is not None
    replies = [e.reply["message"]["tool_calls"][0]["arguments"] for e in doc.events
               if isinstance(e, ModelCallEvent) and e.reply and e.reply["message"].get("tool_calls")]
    assert broken in replies


def _page_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of the page-result user messages (label, page text, label, page text, ...)."""
    return [p["text"] for m in messages if m["role"] == "user" and isinstance(m["content"], list)
            for p in m["content"] if p["type"] == "text" and not p["text"].startswith(("Results for:", "file: "))]


def test_page_texts_are_stored_by_reference_and_expand_to_what_was_sent(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Text view: a page's text is the corpus's, so the transcript keeps a reference and its sha256;
    expand() gives back the exact text the server received, or a marker when the page changed."""
    corpus = write_operator_corpus(tmp_path / "operators")
    answer = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}
    script = lambda b, n: _tool("search_documents", {"query": "mountain car winter"}) if n == 1 else _tool("provide_answer", answer)  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        store = _run(fake, corpus, tmp_path / "run", monkeypatch, view="text")
        sent = list(fake.requests)
    system = "bm25-agent:openai/gpt-4.1"
    doc = store.transcript("q1", system)
    assert doc is not None
    wire = _page_texts(sent[1]["messages"])
    assert wire and all(len(t) > 20 for t in wire)
    stored = [p for m in doc.conversation(1) if isinstance(m["content"], list) for p in m["content"]
              if p.get("ref", "").startswith("pagetext:")]
    assert len(stored) == len(wire) and all("text" not in p and len(p["sha256"]) == 64 for p in stored)
    assert stored[0]["ref"] == "pagetext:alpha.pdf#1"
    assert not any(w in t for w in wire for t in texts(doc))  # not stored in the transcript itself
    # the run recorded its corpus; expanded, the texts are the ones on the wire byte for byte
    opened = open_recorded_corpus(store, system)
    assert opened is not None and opened.root == corpus.root.resolve()
    expanded = expand(doc, opened)
    assert _page_texts(expanded.conversation(1)) == wire
    assert doc.conversation(1) != expanded.conversation(1)  # a copy: the stored document is unchanged
    # the page changed since the run: a visible marker, never the new text
    with sqlite3.connect(corpus.root / "pages.sqlite") as con:
        con.execute("UPDATE pages SET text = text || ' (edited)' WHERE doc_id = 'alpha.pdf' AND page = 1")
    changed = [p for m in expand(doc, opened).conversation(1) if isinstance(m["content"], list)
               for p in m["content"] if p.get("ref") == "pagetext:alpha.pdf#1"]
    assert changed and all(p["missing"] == "changed" and "page 1 of alpha.pdf" in p["text"]
                           and "changed" in p["text"] and "(edited)" not in p["text"] for p in changed)
    # no corpus at all: the marker says so
    gone = _page_texts(expand(doc, None).conversation(1))
    assert gone and all("corpus the run used is not available" in t for t in gone)


def test_an_episode_without_a_transcript_reads_none(tmp_path: Path) -> None:
    from deskbench.runs.store import Episode

    store = RunStore(tmp_path / "run")
    store.save_tasks([TASK])
    store.record(Episode(task_id="q1", system="imported", status="ok"))
    assert store.transcript("q1", "imported") is None


def test_items_out_has_question_gold_prediction_and_metrics(operator_corpus: Corpus, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from deskbench.cli import app

    answer = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}
    with FakeOpenAI(script=lambda b, n: _tool("provide_answer", answer)) as fake:
        store = _run(fake, operator_corpus, tmp_path / "run", monkeypatch, view="text")
    store.close()
    items = tmp_path / "items.jsonl"
    result = CliRunner().invoke(app, ["score", str(tmp_path / "run"), "--items-out", str(items)])
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in items.read_text().splitlines()]
    assert row["system"] == "bm25-agent:openai/gpt-4.1" and row["id"] == "q1"
    assert row["question"] == QUESTION
    assert row["gold"] == {"answers": [["Mountain car"]], "evidence": [["alpha.pdf", 1]]}
    assert row["prediction"] == {"answer": ["Mountain car"], "citations": [["alpha.pdf", 1]]}
    assert row["accuracy"] == 1.0 and row["page_f1"] == 1.0 and row["doc_f1"] == 1.0 and "anls" in row
