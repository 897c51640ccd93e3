"""`--retriever` end to end: a run whose agents search through a plugin retriever (by module path
and as an installed entry point), its identity in the run's configuration and the report, a
resume under another retriever refused, the agents that never search refusing it, `deskbench
search`, `deskbench mcp` and `--agent external` searching with it, `deskbench list retrievers`.

The plugin (tests/retriever_plugins.py) returns the pages named as its model for any query, so
what a search returned tells which retriever ran; no model is downloaded or built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from deskbench.corpus import Corpus
from deskbench.runs.identity import stored_identities
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.tasks import DocQATask

PINNED = "retriever_plugins:PINNED"
TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
BETA_2 = {"kind": "pinned", "model": "beta.pdf:2", "pages": [["beta.pdf", 2]]}


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(TASK.model_dump_json() + "\n")
    return path


def _lexical(corpus: Corpus, tmp_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`deskbench run --agent lexical` (no model: one search with the question, the answer read off)."""
    return run_cli("run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(corpus.root), "--agent", "lexical",
                   "--out", str(out), "--json", "--quiet", *extra)


def _searched(out: Path, system: str = "lexical") -> list[list[object]]:
    (episode,) = RunStore(out, create=False).episodes(system)
    (search, *_) = [s for s in episode.trajectory if isinstance(s, ToolCallStep) and s.name == "search_documents"]
    return list(search.result["pages"])


def test_a_run_searches_with_its_retriever_records_it_and_reports_it(operator_corpus: Corpus, tmp_path: Path) -> None:
    bm25_run, pinned_run = tmp_path / "bm25", tmp_path / "pinned"
    proc = _lexical(operator_corpus, tmp_path, bm25_run)
    assert proc.returncode == 0, proc.stderr
    assert _searched(bm25_run)[0] == ["alpha.pdf", 1]  # BM25: the winter page
    assert "retriever" not in stored_identities(RunStore(bm25_run, create=False))["lexical"].config.settings

    proc = _lexical(operator_corpus, tmp_path, pinned_run, "--retriever", f"{PINNED}=beta.pdf:2")
    assert proc.returncode == 0, proc.stderr
    assert "retriever ready: pinned=beta.pdf:2" in proc.stderr  # opened (its index built) before the episodes
    assert _searched(pinned_run) == [["beta.pdf", 2]]  # the agent's search ran on the plugin
    config = stored_identities(RunStore(pinned_run, create=False))["lexical"].config
    assert config.settings["retriever"] == BETA_2
    assert json.loads(proc.stdout)["lexical"]["accuracy"] == 0.0  # the winter page was never seen
    info = run_cli("info", str(pinned_run))
    assert info.returncode == 0 and "retriever=pinned=beta.pdf:2, " in info.stdout  # its configuration, one line

    # resumed with the same retriever: the same system, nothing to run
    again = _lexical(operator_corpus, tmp_path, pinned_run, "--retriever", f"{PINNED}=beta.pdf:2")
    assert again.returncode == 0, again.stderr

    report = tmp_path / "report.html"
    made = run_cli("report", str(bm25_run), str(pinned_run), "--output", str(report))
    assert made.returncode == 0, made.stderr
    html = report.read_text()
    assert "<th>Retriever</th>" in html
    assert html.count('<td class="retriever">') == 2
    assert '<td class="retriever">bm25</td>' in html and '<td class="retriever">pinned=beta.pdf:2</td>' in html

    alone = tmp_path / "bm25-report.html"  # runs that all searched with BM25: no column, as before
    assert run_cli("report", str(bm25_run), "--output", str(alone)).returncode == 0
    assert "<th>Retriever</th>" not in alone.read_text()


@pytest.mark.parametrize(("first", "then", "says"), [
    ((), ("--retriever", f"{PINNED}=beta.pdf:2"), "retriever: bm25 -> pinned=beta.pdf:2"),
    (("--retriever", f"{PINNED}=beta.pdf:2"), (), "retriever: pinned=beta.pdf:2 -> bm25"),
    (("--retriever", f"{PINNED}=beta.pdf:2"), ("--retriever", f"{PINNED}=alpha.pdf:2"),
     "retriever: pinned=beta.pdf:2 -> pinned=alpha.pdf:2"),
])
def test_a_resume_under_another_retriever_is_refused(first: tuple[str, ...], then: tuple[str, ...], says: str,
                                                     operator_corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _lexical(operator_corpus, tmp_path, out, *first).returncode == 0
    proc = _lexical(operator_corpus, tmp_path, out, *then)
    assert proc.returncode == 2
    assert f"already holds a lexical run with another configuration ({says})" in proc.stderr
    assert len(RunStore(out, create=False).episodes()) == 1


@pytest.mark.parametrize(("agent", "reads"), [("guess", "no pages"), ("oracle", "the gold pages"),
                                              ("rlm", "every page's text in its REPL")])
def test_agents_that_never_search_refuse_a_retriever(agent: str, reads: str, operator_corpus: Corpus,
                                                     tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(operator_corpus.root), "--agent", agent,
                   "--model", "openai-compat/x@http://127.0.0.1:9/v1", "--out", str(out),
                   "--retriever", f"{PINNED}=beta.pdf:2")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: --retriever {PINNED}=beta.pdf:2: --agent {agent} never searches (it reads "
                                   f"{reads}); drop --retriever, or use an agent that searches")
    assert not out.exists()


@pytest.mark.parametrize(("args", "says"), [
    (("--retriever", "bm25+"), "--retriever 'bm25+': '' is not KIND or KIND=MODEL"),
    (("--retriever", "nosuch=m"), "--retriever 'nosuch' is not a retriever kind; choose one of bm25"),
    (("--retriever", PINNED), f"--retriever {PINNED} needs a model: give {PINNED}=MODEL"),
    (("--retriever-download",), "--retriever-download fetches a --retriever's model; bm25 has none"),
    (("--retriever", f"{PINNED}=gamma.pdf:1"), "'gamma.pdf:1' is not a page of the corpus"),  # as a missing model
])
def test_a_retriever_mistake_is_one_line_before_the_run_directory(args: tuple[str, ...], says: str,
                                                                  operator_corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _lexical(operator_corpus, tmp_path, out, *args)
    assert proc.returncode == 2
    assert says in proc.stderr and proc.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_search_command_takes_a_retriever(operator_corpus: Corpus) -> None:
    proc = run_cli("search", "winter", "--corpus", str(operator_corpus.root), "--json",
                   "--retriever", f"{PINNED}=beta.pdf:2,alpha.pdf:3")
    assert proc.returncode == 0, proc.stderr
    assert [(h["document"], h["page"]) for h in json.loads(proc.stdout)] == [("beta.pdf", 2), ("alpha.pdf", 3)]
    bm25 = json.loads(run_cli("search", "winter", "--corpus", str(operator_corpus.root), "--json").stdout)
    assert [(h["document"], h["page"]) for h in bm25] == [("alpha.pdf", 1)]


def test_mcp_server_searches_with_its_retriever(operator_corpus: Corpus, tmp_path: Path) -> None:
    """`deskbench mcp --corpus --retriever`: its search_documents runs on the retriever (the
    session's tool, called as the server calls it)."""
    pytest.importorskip("mcp")
    import asyncio

    from deskbench.contract.mcp import McpRequest
    from deskbench.tracks.docqa.mcp_tools import DocqaMcpTools

    request = McpRequest(store=RunStore(tmp_path / "run"), source=operator_corpus.root, question="winter?",
                         retriever=f"{PINNED}=alpha.pdf:3")
    served = DocqaMcpTools().corpus(request)
    _, _, session = served.next()
    found = json.loads(asyncio.run(session.search_documents("winter")))
    assert [(r["file"], r["page"]) for r in found["results"]] == [("alpha.pdf", 3)]


def test_mcp_command_refuses_a_retriever_with_tasks(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    proc = run_cli("mcp", "--tasks", str(_tasks(tmp_path)), "--out", str(tmp_path / "run"), "--retriever",
                   f"{PINNED}=beta.pdf:2")
    assert proc.returncode == 2
    assert "--retriever chooses the search over a corpus; with --tasks there is none" in proc.stderr


def test_an_external_agent_searches_with_the_runs_retriever(operator_corpus: Corpus, tmp_path: Path) -> None:
    """--agent external over MCP (tests/external_agent.py cites its search's first page): the
    episode's MCP server searches the run's corpus through the run's retriever."""
    pytest.importorskip("mcp")
    out = tmp_path / "run"
    agent = REPO / "tests" / "external_agent.py"
    proc = run_cli("run", "--agent", "external", "--command", f"{sys.executable} {agent} {{question}}", "--tasks",
                   str(_tasks(tmp_path)), "--corpus", str(operator_corpus.root), "--out", str(out), "--json",
                   "--retriever", f"{PINNED}=beta.pdf:1", timeout=240)
    assert proc.returncode == 0, proc.stderr
    (episode,) = RunStore(out, create=False).episodes("external")
    assert episode.status == "ok", episode.error
    assert _searched(out, "external")[0] == ["beta.pdf", 1]
    assert [(c.document, c.page) for c in episode.submission.citations] == [("beta.pdf", 1)]  # type: ignore[union-attr]
    assert stored_identities(RunStore(out, create=False))["external"].config.settings["retriever"]["model"] == \
        "beta.pdf:1"


def test_an_installed_retriever_plugin_is_listed_and_runs(operator_corpus: Corpus, tmp_path: Path) -> None:
    """tests/retriever_plugins.py as a distribution declaring `deskbench.retrievers: pinned` (a
    .dist-info, as an install leaves it): listed without being imported, chosen by its name."""
    site_dir = tmp_path / "site"
    info = site_dir / "deskbench_pinned-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deskbench-pinned\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[deskbench.retrievers]\npinned = retriever_plugins:PINNED\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site_dir), str(REPO / "tests")])}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "deskbench.cli", *args], capture_output=True, text=True,
                              timeout=300, env=env, cwd=tmp_path)

    listed = cli("list", "retrievers", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r["origin"] for r in json.loads(listed.stdout)}
    assert rows["pinned"] == "entry point of deskbench-pinned 0.1"
    assert rows["bm25"].startswith("built-in: BM25F")
    text = cli("list", "retrievers")
    assert text.returncode == 0 and "pinned" in text.stdout

    out = tmp_path / "run"
    proc = cli("run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(operator_corpus.root), "--agent", "lexical",
               "--out", str(out), "--json", "--quiet", "--retriever", "bm25+pinned=beta.pdf:2")
    assert proc.returncode == 0, proc.stderr
    # RRF of BM25 (alpha 1 only) and the pin (beta 2): equal 1/61, BM25's first
    assert _searched(out) == [["alpha.pdf", 1], ["beta.pdf", 2]]
    recorded = stored_identities(RunStore(out, create=False))["lexical"].config.settings["retriever"]
    assert recorded["kind"] == "hybrid" and recorded["parts"][1] == BETA_2
