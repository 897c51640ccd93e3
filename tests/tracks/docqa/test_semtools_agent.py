"""The semtools-agent (MADQA G.4, Prompt 8): semtools' search on a tiny static model built offline
(ranking and options checked against distances computed here from the model's own table), parse
and workspace, the Bash / Read / Glob / Grep tool server, and the agent end to end in the sandbox
with a scripted model that runs `parse | search` and answers with a citation, scored by `deskbench run`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ingest, run_cli, write_text_pdf
from fake_openai import FakeOpenAI
from tiny_static_embeddings import build_static_model, vocab_of, words_of

from deskbench.corpus import Corpus
from deskbench.runs.identity import prompt_hash, stored_identities
from deskbench.runs.store import RunStore
from deskbench.search.retriever import model_fingerprint
from deskbench.tracks.docqa.agents.registry import NEEDS_SANDBOX, make_agent
from deskbench.tracks.docqa.agents.semtools import cli
from deskbench.tracks.docqa.agents.semtools.agent import (
    LOOP,
    StaticModelNeed,
    cited_document,
    read_final,
    resolve_model,
)
from deskbench.tracks.docqa.agents.semtools.prompts import CLAUDE_MD, USER_PROMPT
from deskbench.tracks.docqa.agents.semtools.shell import Shell
from deskbench.tracks.docqa.tasks import DocQATask

LINES = ["the bus timetable", "summer rates for the bus", "winter season rates", "Mountain car",
         "", "Harbour notes and the ferry", "Winter Season Rates"]
QUERY = "winter season rates"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, np.ndarray]:
    folder = tmp_path / "potion-tiny"
    table = build_static_model(folder, words_of(*LINES, QUERY, "winter", "season", "rates"))
    monkeypatch.setenv("SEMTOOLS_MODEL_DIR", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEMTOOLS_WORKSPACE", raising=False)
    return folder, table


def embed(folder: Path, table: np.ndarray, text: str) -> np.ndarray:
    """model2vec by hand: known words' rows averaged, L2-normalised; no known word: zeros."""
    vocab = vocab_of(folder)
    ids = [vocab[w] for w in re.findall(r"\w+|[^\w\s]+", text) if w in vocab]
    if not ids:
        return np.zeros(table.shape[1])
    v = table[ids].astype(np.float64).mean(axis=0)
    return v / np.linalg.norm(v)


def distance(q: np.ndarray, v: np.ndarray) -> float:
    if not q.any() and not v.any():
        return 0.0
    if float(q @ v) == 0.0:
        return 1.0
    return max(0.0, 1.0 - float(q @ v) / float(np.linalg.norm(q) * np.linalg.norm(v)))


def run(*argv: str, stdin: str | None = None) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(list(argv), stdin=io.StringIO(stdin) if stdin is not None else Tty(), out=out)
    return code, out.getvalue()


def headers(output: str) -> list[tuple[str, int, int, float]]:
    return [(m[1], int(m[2]), int(m[3]), float(m[4]))
            for m in re.finditer(r"^(.+?):(\d+)::(\d+) \(([0-9.]+)\)$", output, re.M)]


# -- search ------------------------------------------------------------------------------------


def test_the_loader_encodes_as_model2vec(model: tuple[Path, np.ndarray]) -> None:
    folder, table = model
    m = cli.StaticModel.load(folder)
    got = m.encode(["winter season rates Mountain car", "", "unknown zzz words"], cli.LINE_MAX_TOKENS)
    assert np.allclose(got[0], embed(folder, table, "winter season rates Mountain car"), atol=1e-6)
    assert not got[1].any() and not got[2].any()  # no token, or only [UNK] (dropped): the zero vector
    assert m.unk_token_id == 0 and m.dims == 16


def test_search_ranks_lines_by_cosine_distance_with_context(model: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    folder, table = model
    f = tmp_path / "fleet.md"
    f.write_text("\n".join(LINES) + "\n")
    q = embed(folder, table, QUERY)
    expected = sorted(range(len(LINES)), key=lambda i: distance(q, embed(folder, table, LINES[i])))
    code, out = run("search", QUERY, str(f), "--n-lines", "1")
    assert code == 0
    found = headers(out)
    assert [h[0] for h in found] == [str(f)] * 3  # --top-k 3 by default
    assert [(s, e) for _, s, e, _ in found] == [(max(0, i - 1), min(len(LINES), i + 2)) for i in expected[:3]]
    for (_, _, _, d), i in zip(found, expected, strict=False):
        assert d == pytest.approx(distance(q, embed(folder, table, LINES[i])), abs=1e-6)
    assert expected[0] == 2 and found[0][3] == pytest.approx(0.0, abs=1e-6)  # the exact line first
    block = out.split("\n\n")[0].splitlines()
    assert block[1:] == ["   2: summer rates for the bus", "   3: winter season rates", "   4: Mountain car"]


def test_search_options_top_k_max_distance_ignore_case_and_stdin(model: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    folder, table = model
    f = tmp_path / "fleet.md"
    f.write_text("\n".join(LINES) + "\n")
    q = embed(folder, table, QUERY)
    d = {i: distance(q, embed(folder, table, line)) for i, line in enumerate(LINES)}
    assert d[4] == 1.0  # an empty line: the zero vector, distance 1
    _, out = run("search", QUERY, str(f), "--top-k", "5", "-n", "0")
    assert [s for _, s, _, _ in headers(out)] == sorted(d, key=lambda i: d[i])[:5]
    ranked = sorted(d.values())
    threshold = (ranked[3] + ranked[4]) / 2  # four lines under it; --top-k ignored
    _, out = run("search", QUERY, str(f), "--max-distance", repr(threshold), "--top-k", "1", "-n", "0")
    assert sorted(s for _, s, _, _ in headers(out)) == sorted(i for i in d if d[i] < threshold)
    # -i lowercases the lines and the query: "Winter Season Rates" (unknown capitals here) becomes the exact match too
    _, out = run("search", "WINTER SEASON RATES", str(f), "-i", "-n", "0", "--top-k", "2")
    assert sorted(s for _, s, _, dist in headers(out) if dist < 1e-6) == [2, 6]
    _, out = run("search", QUERY, "-n", "0", "--top-k", "1", stdin="\n".join(LINES))
    assert headers(out)[0][:3] == ("<stdin>", 2, 3)
    code, out = run("search", QUERY)
    assert code == 1 and out == ""


def test_workspace_caches_and_ranks_like_semtools(model: tuple[Path, np.ndarray], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "fleet.md"
    f.write_text("\n".join(LINES) + "\n")
    code, out = run("workspace", "use", "madqa")
    assert code == 0 and "export SEMTOOLS_WORKSPACE=madqa" in out
    assert json.loads((tmp_path / "home/.semtools/workspaces/madqa/config.json").read_text())["name"] == "madqa"
    monkeypatch.setenv("SEMTOOLS_WORKSPACE", "madqa")
    plain = headers(run("search", QUERY, str(f), "-n", "1", "--top-k", "2")[1])
    monkeypatch.delenv("SEMTOOLS_WORKSPACE")
    assert plain == headers(run("search", QUERY, str(f), "-n", "1", "--top-k", "2")[1])
    monkeypatch.setenv("SEMTOOLS_WORKSPACE", "madqa")
    # the workspace's header keeps END unclipped (match + n + 1), as semtools' workspace mode prints it
    _, out = run("search", "Winter Season Rates", str(f), "-n", "2", "--top-k", "1")
    assert headers(out)[0][:3] == (str(f), 4, 9)
    assert "Documents: 1" in run("workspace", "status")[1]
    f.unlink()
    code, out = run("workspace", "prune")
    assert code == 0 and f"  - {f}" in out and "Removed 1 stale documents" in out


def test_parse_gives_the_corpus_markdown_by_content(model: tuple[Path, np.ndarray], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(b"%PDF-1.4 fake")
    md = tmp_path / "a.pdf.md"
    md.write_text(cli.page_markdown(["one", "two"]))
    import hashlib
    (tmp_path / "manifest.json").write_text(json.dumps({hashlib.sha256(pdf.read_bytes()).hexdigest(): str(md)}))
    monkeypatch.setenv("SEMTOOLS_PARSED", str(tmp_path / "manifest.json"))
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    code, out = run("parse", str(pdf), str(notes))
    target = tmp_path / "home/.parse/a.pdf.md"
    assert code == 0 and out.splitlines() == [str(target), str(notes)]
    assert target.read_text() == "<!-- page 1 -->\none\n\n<!-- page 2 -->\ntwo\n\n"
    assert run("parse", "-b", "docling", str(pdf))[0] == 1
    other = tmp_path / "b.pdf"
    other.write_bytes(b"%PDF-1.4 not in the corpus")
    assert run("parse", str(other))[0] == 1


# -- the tool server -------------------------------------------------------------------------------


def test_shell_tools(tmp_path: Path) -> None:
    import os

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("alpha\nWinter rates\nomega\n")
    (tmp_path / "d" / "b.txt").write_text("nothing here\n")
    sh = Shell(str(tmp_path), dict(os.environ))
    assert sh.bash("cd d && export FOO=bar") == ("(no output)", False)
    assert sh.bash("pwd; echo $FOO") == (f"{tmp_path / 'd'}\nbar", False)  # cwd and exports persist
    out, err = sh.bash("echo oops >&2; exit 3")
    assert err and out == "oops\nExit code 3"
    assert sh.bash("sleep 5", timeout=200)[1] is True
    assert sh.read(str(tmp_path / "d" / "a.md"), offset=2, limit=1) == "     2\tWinter rates"
    assert sh.call("Read", {"file_path": "d/a.md"})[1] is True  # relative: refused
    assert sh.glob("*.md") == str(tmp_path / "d" / "a.md")
    assert sh.grep({"pattern": "winter", "-i": True}) == f"Found 1 file\n{tmp_path / 'd' / 'a.md'}"
    assert sh.grep({"pattern": "Winter", "output_mode": "content", "-C": 1}) == "\n".join(
        [f"{tmp_path / 'd' / 'a.md'}-1-alpha", f"{tmp_path / 'd' / 'a.md'}:2:Winter rates", f"{tmp_path / 'd' / 'a.md'}-3-omega"])
    assert sh.grep({"pattern": "e", "output_mode": "count", "glob": "*.txt"}) == f"{tmp_path / 'd' / 'b.txt'}:1"


# -- the agent ---------------------------------------------------------------------------------------


def test_final_answer_and_citation_names() -> None:
    docs = {"fleet.pdf"}
    final = read_final('Done.\n{"id": "test/0", "answer": "Mountain car", "citations": '
                       '[{"document": "/mnt/corpus/markdown/fleet.pdf.md", "page": 2}, {"file": "fleet", "page": "1"}],'
                       ' "search_history": ["winter rates"]}', docs)
    assert final.answer == ["Mountain car"] and final.search_history == ["winter rates"]
    assert [(c.document, c.page) for c in final.citations] == [("fleet.pdf", 2), ("fleet.pdf", 1)]
    assert cited_document("other.pdf", docs) == "other.pdf"
    with pytest.raises(ValueError):
        read_final("no json", docs)


def test_a_missing_static_model_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("DESKBENCH_SEMTOOLS_MODEL", raising=False)
    line = StaticModelNeed().problem("--agent semtools-agent")
    assert line is not None and "\n" not in line
    assert "minishlab/potion-multilingual-128M" in line and "huggingface-cli download" in line
    snap = tmp_path / "hub/models--minishlab--potion-multilingual-128M/snapshots/abc"
    build_static_model(snap, ["x"])
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs/main").write_text("abc")
    assert resolve_model("minishlab/potion-multilingual-128M") == snap and StaticModelNeed().problem("x") is None


QUESTION = "Which vehicle has winter season rates?"
TASK = DocQATask(id="q1", question=QUESTION, answer_variants=[["Mountain car"]],
                 evidence=[{"document": "fleet.pdf", "page": 2}])  # type: ignore[list-item]
COMMAND = "parse /mnt/corpus/pdfs/fleet.pdf | xargs cat | search 'Winter season rates' --n-lines 2 --top-k 1"


def script(body: dict[str, Any], n: int) -> dict[str, Any]:
    """Turn 1: parse | search in Bash. Turn 2: the page marker above the hit, cited."""
    messages = body["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return {"kind": "tool", "name": "Bash", "arguments": json.dumps({"command": COMMAND})}
    output = results[-1]["content"]
    page = re.findall(r"<!-- page (\d+) -->", output)[-1]
    hit = re.search(r"Mountain car", output)
    answer = {"answer": ["Mountain car" if hit else "not found"],
              "citations": [{"document": "fleet.pdf", "page": int(page)}],
              "search_history": ["winter season rates"]}
    return {"kind": "text", "text": json.dumps(answer)}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("fleet")
    write_text_pdf(root / "pdfs" / "fleet.pdf", ["Introduction to the fleet.", "Winter season rates: Mountain car."])
    write_text_pdf(root / "pdfs" / "harbour.pdf", ["Harbour notes."])
    c, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    return c


def test_semtools_agent_end_to_end_in_the_sandbox(bwrap: str, fleet: Corpus, tmp_path: Path) -> None:
    assert "semtools-agent" in NEEDS_SANDBOX and make_agent("semtools-agent").name == "semtools-agent"
    texts = [t for d in fleet.documents() for t in fleet.page_texts([(d.doc_id, p) for p in range(1, d.page_count + 1)])]
    folder = tmp_path / "potion-tiny"
    build_static_model(folder, words_of(*texts, "winter season rates"))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(fleet.root), "--agent", "semtools-agent",
                       "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(tmp_path / "run"),
                       "--json", "--quiet", env={"DESKBENCH_SEMTOOLS_MODEL": str(folder)})
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()
    assert report["accuracy"] == 1.0
    (episode,) = RunStore(tmp_path / "run").episodes()
    assert episode.status == "ok", episode.error
    sub = episode.submission
    assert [(c.document, c.page) for c in sub.citations] == [("fleet.pdf", 2)]
    assert (sub.steps, sub.search_history, sub.llm_calls) == (1, ["winter season rates"], 2)
    first = fake.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["Bash", "Read", "Glob", "Grep"]
    assert first["messages"][1]["content"] == USER_PROMPT.format(
        pdf_path="/mnt/corpus/pdfs", markdown_path="/mnt/corpus/markdown", question=QUESTION)
    assert CLAUDE_MD in first["messages"][0]["content"]
    output = fake.requests[1]["messages"][-1]["content"]
    assert output.startswith("<stdin>:") and "<!-- page 2 -->" in output and "Mountain car" in output
    (system,) = stored_identities(RunStore(tmp_path / "run", create=False)).values()
    recorded = system.config.settings["semtools"]
    assert recorded["loop"] == LOOP and "LlamaParse" in recorded["parse_backend"]
    assert recorded["static_model"] == str(folder) and recorded["static_model_sha256"] == model_fingerprint(folder)
    assert system.config.prompt_hash == prompt_hash("deskbench.tracks.docqa.agents.semtools.prompts")


def test_semtools_agent_refuses_a_retriever_and_a_missing_model(fleet: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    base = ("run", "--tasks", str(tasks), "--corpus", str(fleet.root), "--agent", "semtools-agent",
            "--model", "openai-compat/fake@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"))
    build_static_model(tmp_path / "potion-tiny", ["x"])
    proc = run_cli(*base, "--retriever", "dense=some/model", env={"DESKBENCH_SEMTOOLS_MODEL": str(tmp_path / "potion-tiny")})
    assert proc.returncode == 2 and "never searches" in proc.stderr and "semtools" in proc.stderr
    proc = run_cli(*base, env={"DESKBENCH_SEMTOOLS_MODEL": str(tmp_path / "nowhere"), "HF_HUB_CACHE": str(tmp_path)})
    assert proc.returncode == 2 and "huggingface-cli download" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_semtools_agent_without_bubblewrap_in_unsafe_local_mode(fleet: Corpus, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """--unsafe-local: the same tools at their host paths (the prompt names them)."""
    import asyncio

    from deskbench.agents.base import AgentContext, AgentSettings
    from deskbench.models.openai_chat import OpenAIChat
    from deskbench.sandbox import Sandbox

    texts = [t for d in fleet.documents() for t in fleet.page_texts([(d.doc_id, p) for p in range(1, d.page_count + 1)])]
    folder = tmp_path / "potion-tiny"
    build_static_model(folder, words_of(*texts, "winter season rates"))
    monkeypatch.setenv("DESKBENCH_SEMTOOLS_MODEL", str(folder))

    def host_script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in body["messages"]):
            pdfs = re.search(r"PDFs at (\S+)\.", body["messages"][1]["content"])[1]  # type: ignore[index]
            return {"kind": "tool", "name": "Bash", "arguments": json.dumps(
                {"command": COMMAND.replace("/mnt/corpus/pdfs", pdfs)})}
        return script(body, n)

    with FakeOpenAI(script=host_script) as fake:
        model = OpenAIChat("fake", base_url=fake.base_url, api_key="k", id="openai-compat/fake")
        ctx = AgentContext(model=model, corpus=fleet, settings=AgentSettings(),
                           sandbox=Sandbox(unsafe_local=True))
        result = asyncio.run(make_agent("semtools-agent").run(TASK, ctx))
    assert result.status == "ok", result.error
    assert result.submission.answer == ["Mountain car"]  # type: ignore[union-attr]
    assert [(c.document, c.page) for c in result.submission.citations] == [("fleet.pdf", 2)]  # type: ignore[union-attr]
