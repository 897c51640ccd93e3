"""The managed-RAG baselines (MADQA G.2; agents/managed_rag/) end to end against their strict
simulators: `deskbench run --agent openai-file-search` (and gemini-file-search) uploads the
corpus's PDFs once, asks each question with the official script's request, reads the reply as the
script does, and its run scores as the script's own predictions file would; a rerun uploads
nothing; a failed indexing is an episode error naming the file; `deskbench stores delete` removes
what deskbench made."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import ingest, run_cli
from PIL import Image
from sim_openai_file_search import SimFileSearch

from deskbench.tracks.docqa.agents.managed_rag.prompts import (
    GEMINI_PROMPT,
    OPENAI_INSTRUCTIONS,
    official_parse,
)

# the openai SDK marks every Assistants call deprecated; the official script (and so the agent) uses them
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning:deskbench.tracks.docqa.agents.managed_rag.openai_fs")

TASKS = [
    {"id": "q1", "question": "Which engine powers the Bell 407?", "answer_variants": [["Rolls-Royce 250-C47B"]],
     "evidence": [{"document": "manual.pdf", "page": 1}]},
    {"id": "q2", "question": "Who publishes the annual report?", "answer_variants": [["the harbour authority"]],
     "evidence": [{"document": "report.pdf", "page": 1}]},
    {"id": "q3", "question": "What colour is the cabin?", "answer_variants": [["blue"]],
     "evidence": [{"document": "manual.pdf", "page": 2}]},
]
# what the service's model says to each question (the official scripts' replies are free text)
REPLIES = {
    "Which engine powers the Bell 407?": ('Found it.\n{"answer": ["Rolls-Royce 250-C47B"], "citations": '
                                          '[{"file": "manual.pdf", "page": 1}]}', ["manual.pdf"]),
    "Who publishes the annual report?": ("The harbour authority publishes it.", ["report.pdf"]),  # no JSON
    "What colour is the cabin?": ('{"answer": "red", "citations": [{"file": "manual.pdf", "page": "two"}]}', []),
}


def make_corpus(root: Path, docs: dict[str, int]) -> Path:
    """PDFs of blank pages (`docs`: name -> pages) ingested without OCR: the corpus folder."""
    (root / "pdfs").mkdir(parents=True)
    for i, (name, n) in enumerate(docs.items()):
        pages = [Image.new("RGB", (144, 108), (255, 255 - 40 * k, 200 - 30 * i)) for k in range(n)]
        pages[0].save(root / "pdfs" / name, resolution=72.0, save_all=True, append_images=pages[1:])
    _, summary = ingest(root / "corpus", [root / "pdfs"], ocr="never")
    assert summary.files_ok == len(docs)
    return root / "corpus"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "c", {"manual.pdf": 2, "report.pdf": 1})


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return path


def openai_answer(question: str, files: dict[str, bytes]) -> dict[str, Any]:
    text, cite = REPLIES[question]
    assert set(files) == {"manual.pdf", "report.pdf"} and all(b.startswith(b"%PDF") for b in files.values())
    return {"text": text, "cite": cite, "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}


def episodes(run: Path) -> dict[str, tuple[str, dict[str, Any] | None, str | None, list[Any]]]:
    rows = sqlite3.connect(run / "run.sqlite").execute(
        "SELECT task_id, status, submission, error, trajectory FROM episodes").fetchall()
    return {r[0]: (r[1], json.loads(r[2]) if r[2] else None, r[3], json.loads(r[4] or "[]")) for r in rows}


def scored(*args: str) -> dict[str, Any]:
    proc = run_cli("score", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


METRICS = ("n", "accuracy", "mean_anls", "doc_f1", "page_f1")


# --- the official reading of a reply ------------------------------------------------------------------
def test_replies_are_read_as_the_scripts_read_them() -> None:
    assert official_parse('x {"answer": ["a"], "citations": [{"file": "f.pdf", "page": 2}]} y') == (
        {"answer": ["a"], "citations": [{"file": "f.pdf", "page": 2}]}, True)
    assert official_parse("  just text \n") == ({"answer": ["just text"], "citations": []}, False)
    assert official_parse('{"answer": ["a"]}') == ({"answer": ['{"answer": ["a"]}'], "citations": []}, False)
    assert official_parse('{"answer": "a", "citations": [] broken') [1] is False
    # the two scripts' prompts: Gemini's is the paper's Prompt 6; OpenAI's IMPORTANT line is shorter
    assert "Search carefully using different terms if needed." in GEMINI_PROMPT
    assert "Search carefully.\n" in OPENAI_INSTRUCTIONS and "different terms" not in OPENAI_INSTRUCTIONS


# --- OpenAI File Search -------------------------------------------------------------------------------
def run_openai(tasks: Path, corpus: Path, out: Path, sim: SimFileSearch, monkeypatch: pytest.MonkeyPatch,
               model: str = "openai/gpt-4o") -> Any:
    for k, v in sim.env().items():
        monkeypatch.setenv(k, v)
    return run_cli("run", "--tasks", str(tasks), "--corpus", str(corpus), "--agent", "openai-file-search",
                   "--model", model, "--out", str(out), "--json", "--quiet")


def test_openai_file_search_end_to_end(tasks: Path, corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        proc = run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch)
        assert proc.returncode == 0, proc.stderr
        assert sim.refused == [] and sim.early_runs == []
        # the store: one, named by the corpus's content; both PDFs uploaded as files for assistants
        (store,) = sim.stores.values()
        assert store["name"].startswith("deskbench-") and store["file_counts"]["completed"] == 2
        assert sorted(f["filename"] for f in sim.files.values()) == ["manual.pdf", "report.pdf"]
        assert all(f["purpose"] == "assistants" for f in sim.files.values())
        # the assistant: the script's request
        (assistant,) = sim.assistants.values()
        assert assistant["name"] == f"DocQA-{store['name']}" and assistant["model"] == "gpt-4o"
        assert assistant["instructions"] == OPENAI_INSTRUCTIONS and assistant["tools"] == [{"type": "file_search"}]
        assert assistant["tool_resources"] == {"file_search": {"vector_store_ids": [store["id"]]}}
        # each question: a thread, the question alone as the user message, a run, the thread deleted
        assert sorted(b["content"] for b in sim.calls("POST", "/threads/") if b and "content" in b) == \
            sorted(t["question"] for t in TASKS)
        assert all(b == {"role": "user", "content": b["content"]} for b in sim.calls("POST", "/threads/") if b and "content" in b)
        assert sim.threads == {} and len(sim.runs) == 3
    eps = episodes(tmp_path / "run")
    assert {k: v[0] for k, v in eps.items()} == {"q1": "ok", "q2": "ok", "q3": "ok"}
    assert eps["q1"][1]["answer"] == ["Rolls-Royce 250-C47B"] and eps["q1"][1]["citations"] == [
        {"document": "manual.pdf", "page": 1}]
    # no JSON: the text is the answer, the annotation's file the citation (no page: dropped, as an import drops it)
    assert eps["q2"][1]["answer"] == ["The harbour authority publishes it."] and eps["q2"][1]["citations"] == []
    assert eps["q2"][3][0]["result"]["annotations"][0]["file"] == "report.pdf"
    # a string answer stays one item; a page that is no number is dropped
    assert eps["q3"][1]["answer"] == ["red"] and eps["q3"][1]["citations"] == []
    # usage and cost: the run's tokens at gpt-4o's price ($2.50 / $10 per million)
    usage = json.loads(sqlite3.connect(tmp_path / "run" / "run.sqlite").execute(
        "SELECT usage FROM episodes WHERE task_id='q1'").fetchone()[0])
    assert usage["input_tokens"] == 1000 and usage["output_tokens"] == 100
    assert usage["cost_usd"] == pytest.approx((1000 * 2.5 + 100 * 10.0) / 1e6)
    # the store is recorded in the corpus folder
    records = json.loads((corpus / "managed_rag" / "stores.json").read_text())["stores"]
    assert [(r["service"], r["id"], sorted(r["files"])) for r in records] == [
        ("openai-file-search", store["id"], ["manual.pdf", "report.pdf"])]


def test_openai_run_scores_as_the_official_predictions_file(tasks: Path, corpus: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        assert run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch).returncode == 0
    # what openai_file_search_agent.py writes for the same replies (run_evaluation's lines): the JSON's
    # answer and citations, else the text and the annotations' files (no page)
    official = [
        {"id": "q1", "question": TASKS[0]["question"], "answer": ["Rolls-Royce 250-C47B"],
         "citations": [{"file": "manual.pdf", "page": 1}], "iterations": 1, "model": "gpt-4o"},
        {"id": "q2", "question": TASKS[1]["question"], "answer": ["The harbour authority publishes it."],
         "citations": [{"file": "report.pdf", "file_id": "file-x"}], "iterations": 1, "model": "gpt-4o"},
        {"id": "q3", "question": TASKS[2]["question"], "answer": "red",
         "citations": [{"file": "manual.pdf", "page": "two"}], "iterations": 1, "model": "gpt-4o"},
    ]
    preds = tmp_path / "official.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in official))
    from_file = scored(str(preds), "--tasks", str(tasks))
    (from_run,) = scored(str(tmp_path / "run")).values()
    assert {k: from_run[k] for k in METRICS} == {k: from_file[k] for k in METRICS}
    # q1 exact; q2's whole sentence against "the harbour authority": ANLS 1 - 14/35 = 0.6 (>= 0.5, correct); q3 wrong
    assert from_run["n"] == 3 and from_run["accuracy"] == pytest.approx(2 / 3)


def test_openai_rerun_reuses_the_store(tasks: Path, corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        assert run_openai(tasks, corpus, tmp_path / "run1", sim, monkeypatch).returncode == 0
        uploads = len(sim.calls("POST", "/files"))
        assert uploads == 2
        assert run_openai(tasks, corpus, tmp_path / "run2", sim, monkeypatch).returncode == 0
        assert len(sim.calls("POST", "/files")) == uploads  # nothing uploaded again
        assert [p for m, p, _ in sim.requests if m == "POST" and p == "/v1/vector_stores"] == ["/v1/vector_stores"]
        assert len(sim.stores) == 1  # no second store
        assert len(sim.assistants) == 1 and sim.refused == []
    # another corpus (other content) gets a store of its own
    other = make_corpus(tmp_path / "other", {"memo.pdf": 1})
    with SimFileSearch(answer=lambda q, files: {"text": "none", "cite": []}) as sim:
        proc = run_openai(tasks, other, tmp_path / "run3", sim, monkeypatch)
        assert proc.returncode == 0, proc.stderr
        names = {s["name"] for s in sim.stores.values()}
    first = json.loads((corpus / "managed_rag" / "stores.json").read_text())["stores"][0]["name"]
    assert names and first not in names


def test_openai_failed_indexing_is_an_episode_error_naming_the_file(tasks: Path, corpus: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer, fail_indexing={"report.pdf"}) as sim:
        proc = run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch)
        assert sim.runs == {}  # no question was asked of a store missing a file
    assert proc.returncode == 0, proc.stderr
    eps = episodes(tmp_path / "run")
    assert {v[0] for v in eps.values()} == {"error"}
    assert all("indexing failed for report.pdf (failed: The file type is not supported.)" in v[2]
               for v in eps.values()), eps


def test_openai_refuses_another_providers_model(tasks: Path, corpus: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    with SimFileSearch(answer=openai_answer) as sim:
        run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch, model="anthropic/claude-sonnet-4-5")
        assert sim.requests == []
    eps = episodes(tmp_path / "run")
    assert all(v[0] == "error" and "give e.g. --model openai/gpt-4o" in v[2] for v in eps.values())


def test_stores_list_and_delete(tasks: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        assert run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch).returncode == 0
        listed = run_cli("stores", "list", "--corpus", str(corpus), "--json")
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)
        assert row["service"] == "openai-file-search" and row["size_bytes"] == sum(f["bytes"] for f in sim.files.values())
        assert row["storage_usd_per_day"] == pytest.approx(row["size_bytes"] / 1e9 * 0.10)
        deleted = run_cli("stores", "delete", "--corpus", str(corpus))
        assert deleted.returncode == 0, deleted.stderr
        assert sim.stores == {} and sim.assistants == {} and sim.files == {}
        assert json.loads((corpus / "managed_rag" / "stores.json").read_text())["stores"] == []
        again = run_cli("stores", "delete", "--corpus", str(corpus))
        assert again.returncode == 0 and "no managed-RAG store" in again.stdout
