"""`--agent external` and `deskbench mcp`: an agent built elsewhere, speaking MCP through the
official client library (tests/external_agent.py), evaluated on docqa's tools; every call it
makes is stored in the episode, scored and reported like a built-in agent's."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from tests.conftest import ingest, run_cli, write_text_pdf


@pytest.fixture(scope="module", autouse=True)
def _mcp_sdk() -> None:
    """Skipped without the MCP SDK, checked when these tests run: importing it (with starlette and
    uvicorn, about 1-2 s) at module level made every xdist worker pay at collection."""
    pytest.importorskip("mcp")


AGENT = Path(__file__).parents[1] / "external_agent.py"
DOCS = {
    "harbour.pdf": ["Harbour authority staff list, spring edition.", "The harbour master is Ingrid Solberg."],
    "fleet.pdf": ["The flagship vessel is Nordkapp, built in 1998.", "Crew rota for the fleet."],
}
TASKS = [
    {"id": "q1", "question": "Who is the harbour master?", "answer_variants": [["Ingrid"]],
     "evidence": [{"document": "harbour.pdf", "page": 2}]},
    {"id": "q2", "question": "Which vessel is the flagship?", "answer_variants": [["Nordkapp"]],
     "evidence": [{"document": "fleet.pdf", "page": 1}]},
]


def corpus_and_tasks(root: Path) -> tuple[Path, Path]:
    """DOCS ingested under `root` and TASKS written beside them: (corpus, tasks file)."""
    for name, pages in DOCS.items():
        write_text_pdf(root / "pdfs" / name, pages)
    _, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return root / "corpus", tasks


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return corpus_and_tasks(tmp_path_factory.mktemp("mcp"))


def test_external_agent_over_mcp_is_stored_scored_and_reported(setup: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, tasks = setup
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "external", "--command", f"{sys.executable} {AGENT} {{question}}",
                   "--tasks", str(tasks), "--corpus", str(corpus), "--out", str(out), "--json", timeout=240)
    assert proc.returncode == 0, proc.stderr
    store = RunStore(out, create=False)
    episodes = {e.task_id: e for e in store.episodes("external")}
    assert set(episodes) == {"q1", "q2"}
    for task_id, doc, page, answer in (("q1", "harbour.pdf", 2, "Ingrid"), ("q2", "fleet.pdf", 1, "Nordkapp")):
        ep = episodes[task_id]
        assert ep.status == "ok", ep.error
        calls = [s for s in ep.trajectory if isinstance(s, ToolCallStep)]
        assert [c.name for c in calls] == ["search_documents", "get_page", "provide_answer"]
        assert calls[0].result["pages"][0] == [doc, page]  # the search's hits are recorded
        assert calls[1].arguments == {"file": doc, "page": page, "view": "text"}
        assert all(c.at for c in calls)
        sub = ep.submission
        assert sub is not None
        assert sub.answer == [answer]  # type: ignore[attr-defined]
        assert [(c.document, c.page) for c in sub.citations] == [(doc, page)]  # type: ignore[attr-defined]
        assert sub.steps == 2  # type: ignore[attr-defined]  # effort: the tool calls before the answer
        transcript = store.transcript(task_id, "external")
        assert transcript is not None
        assert "search_documents" in transcript.model_dump_json()
    scores = json.loads(proc.stdout)
    assert "external" in json.dumps(scores)
    report = tmp_path / "report.html"
    proc = run_cli("report", str(out), "--output", str(report))
    assert proc.returncode == 0, proc.stderr
    html = report.read_text()
    assert "external" in html


def test_an_agent_that_never_answers_is_an_error_with_its_calls_kept(setup: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, tasks = setup
    script = tmp_path / "quitter.py"
    script.write_text("import sys; print('gave up', file=sys.stderr); sys.exit(3)\n")
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "external", "--command", f"{sys.executable} {script}", "--limit", "1",
                   "--tasks", str(tasks), "--corpus", str(corpus), "--out", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    (ep,) = RunStore(out, create=False).episodes("external")
    assert ep.status == "error"
    assert "code 3" in (ep.error or "") and "gave up" in (ep.error or "")


def test_external_without_command_is_one_line(setup: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, tasks = setup
    proc = run_cli("run", "--agent", "external", "--tasks", str(tasks), "--corpus", str(corpus),
                   "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert "--command" in proc.stderr and "Traceback" not in proc.stderr


def test_deskbench_mcp_over_stdio_serves_the_tools_and_records_the_episode(setup: tuple[Path, Path],
                                                                           tmp_path: Path) -> None:
    """The official client spawns `deskbench mcp --transport stdio`, as an MCP host would."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.mcp_client import is_error

    corpus, _ = setup
    out = tmp_path / "served"
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "deskbench.cli", "mcp", "--corpus", str(corpus), "--out", str(out), "--transport", "stdio",
        "--question", "Who is the harbour master?"])

    async def client() -> set[str]:
        # errlog now: stdio_client's default is the sys.stderr of when mcp.client.stdio was first imported,
        # which may be a CliRunner's stream (an in-process CLI call), with no file descriptor
        async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            page = await session.call_tool("get_page", {"file": "harbour.pdf", "page": 2})
            assert [c.type for c in page.content] == ["text", "image"]  # the label, then the PNG
            bad = await session.call_tool("get_page", {"file": "nowhere.pdf", "page": 1})
            assert is_error(bad)
            await session.call_tool("provide_answer", {"answer": ["Ingrid Solberg"],
                                                       "citations": [{"file": "harbour.pdf", "page": 2}]})
            return names

    assert asyncio.run(asyncio.wait_for(client(), 120)) == {"search_documents", "get_page", "provide_answer"}
    (ep,) = RunStore(out, create=False).episodes("external")
    assert ep.task_id == "mcp-1" and ep.status == "ok"
    assert [s.name for s in ep.trajectory if isinstance(s, ToolCallStep)] == ["get_page", "provide_answer"]
    assert ep.submission is not None and ep.submission.answer == ["Ingrid Solberg"]  # type: ignore[attr-defined]
