"""`--agent claude-research` (deep_research/anthropic.py) against its strict simulator
(tests/sim_anthropic_research.py): the inputs uploaded once and put in the container, the
Messages API conversation in one container (pause_turn continued), Anthropic's web search
injected or omitted by the task's corpus discipline, its citations and searches kept, the
files the code created read back, usage and tool fees priced, uploads deleted at the end; a run
killed with kill -9 mid-conversation resumes in the same container without uploading again,
and the track scores what it made."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import run_cli, wait_while_running
from deliverable_responses import bundled_packages, recompute, respond
from sim_anthropic_research import SimResearch

from deskbench.agents.code_loop import AnalystContext, AnalystSettings
from deskbench.models.registry import open_model
from deskbench.models.settings import Sampling
from deskbench.runs.store import RunStore
from deskbench.sandbox import Limits, Sandbox
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.deliverables.agent import DELIVERABLE_AGENTS
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions
from deskbench.tracks.deliverables.deep_research.anthropic import (
    CODE_TOOL,
    CONTAINER_MIN_SECONDS,
    CONTAINER_USD_PER_HOUR,
    SEARCH_TOOL,
    ClaudeResearch,
    Conversation,
    protocol_notes,
    reply_text,
)
from deskbench.tracks.deliverables.deep_research.pending import load_pending
from deskbench.tracks.deliverables.scoring.rubric_qc_citations import (
    normalise_url,
    recorded_sources,
)
from deskbench.tracks.deliverables.scoring.verifiers_citations import cited_hosts
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask, load_package
from deskbench.tracks.deliverables.web_access import WebChoice
from deskbench.tracks.deliverables.web_recorded import RecordedWeb

MODEL = "anthropic/claude-opus-4-5"  # priced in the built-in table ($5 / $25 per M tokens)
MORDOR = "https://www.mordorintelligence.com/industry-reports/example-market"


@pytest.fixture()
def packages(tmp_path: Path) -> Path:
    return bundled_packages(tmp_path / "packages", "dl-0001-crp", "dl-0003-scp")


def answer(task: DeliverableTask, tmp_path: Path) -> tuple[str, dict[str, bytes]]:
    """A right response and its output files (tests/deliverable_responses.py)."""
    assert task.directory is not None
    folder = tmp_path / "answer" / task.id
    text = respond(task, recompute(task, task.directory), folder, set())
    return text, {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def context(tmp_path: Path, sampling: Sampling | None = None, max_rounds: int = 6) -> AnalystContext:
    return AnalystContext(model=open_model(MODEL, sampling=sampling), sandbox=Sandbox(Limits(), unsafe_local=True),
                          tasks_dir=tmp_path, run_dir=tmp_path, settings=AnalystSettings(max_rounds=max_rounds))


def env(sim: SimResearch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", sim.api_key)


def test_the_simulator_refuses_what_the_api_refuses() -> None:
    with SimResearch(turns=[[{"text": "hi"}]]) as sim:
        url, key = sim.base_url, sim.api_key
        ok = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        body = {"model": "claude-opus-4-5", "max_tokens": 100, "tools": [CODE_TOOL],
                "messages": [{"role": "user", "content": "hi"}]}

        def post(path: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
            return httpx.post(url + path, headers=headers, **kw)

        uploaded = post("/v1/files", ok, files={"file": ("in.csv", b"a,b\n1,2\n")}).json()
        assert uploaded["type"] == "file" and uploaded["downloadable"] is False and uploaded["filename"] == "in.csv"
        upload = {"type": "container_upload", "file_id": uploaded["id"]}
        for headers, payload, status, needle in (
            ({"anthropic-version": "2023-06-01"}, body, 401, "x-api-key header is required"),
            ({**ok, "x-api-key": "wrong"}, body, 401, "invalid x-api-key"),
            ({"x-api-key": key}, body, 400, "anthropic-version: header is required"),
            ({**ok, "anthropic-version": "2024-01-01"}, body, 400, "is not a valid version"),
            ({**ok, "anthropic-beta": "code-execution-2099-01-01"}, body, 400, "for the `anthropic-beta` header"),
            (ok, {**body, "background": True}, 400, "background: Extra inputs are not permitted"),
            (ok, {**body, "model": "claude-opus-9"}, 404, "model: claude-opus-9"),
            (ok, {**body, "tools": [{"type": "code_execution_20990101", "name": "code_execution"}]}, 400,
             "does not match any of the expected tags"),
            (ok, {**body, "tools": [{**SEARCH_TOOL, "allowed_domains": ["a.com"], "blocked_domains": ["b.com"]}]},
             400, "cannot both be given"),
            (ok, {**body, "tools": [{**SEARCH_TOOL, "name": "search"}]}, 400, "Input should be 'web_search'"),
            (ok, {**body, "messages": [{"role": "user", "content": [upload, {"type": "text", "text": "x"}]}],
                  "tools": []}, 400, "require the code execution tool"),
            (ok, {**body, "messages": [{"role": "user", "content": [{"type": "container_upload", "file_id": "file_x"}]}]},
             404, "File not found: file_x"),
            (ok, {**body, "container": "container_nope"}, 404, "Container not found"),
            (ok, {**body, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_forged", "name": "bash_code_execution",
                 "input": {"command": "ls"}}]}, {"role": "user", "content": "go on"}]}, 400, "sent back as the API"),
        ):
            resp = post("/v1/messages", headers, json=payload)
            assert resp.status_code == status, (payload, resp.text)
            assert resp.json()["type"] == "error" and needle in resp.json()["error"]["message"], resp.text
        assert httpx.get(f"{url}/v1/files/{uploaded['id']}/content", headers=ok).status_code == 400  # uploads: no download
        assert httpx.get(f"{url}/v1/files/file_nope", headers=ok).status_code == 404
        assert sim.counts["messages"] == 0  # nothing refused reached the script


def test_web_search_is_injected_by_corpus_discipline(packages: Path, tmp_path: Path) -> None:
    crp, scp = load_package(packages / "dl-0001-crp"), load_package(packages / "dl-0003-scp")
    agent = ClaudeResearch(DeliverableOptions(deny=None))  # --allow-peeking: the tool as the paper's
    conv = Conversation(messages=[{"role": "user", "content": "x"}])
    assert agent._request(crp, "m", conv, {})["tools"] == [CODE_TOOL, SEARCH_TOOL]  # hybrid: injected
    assert agent._request(scp, "m", conv, {})["tools"] == [CODE_TOOL]  # closed: omitted
    denied = ClaudeResearch()._request(crp, "m", conv, {})["tools"][1]  # by default, no peeking (web_deny.py)
    assert denied["type"] == "web_search_20250305" and "github.com/OxRML/MADQA" in denied["blocked_domains"]
    assert "huggingface.co/datasets/deccan-ai/dra-bench" in denied["blocked_domains"]
    web_dir = _recording(tmp_path)
    choice = WebChoice("recorded", str(web_dir))
    client = ClaudeResearch(DeliverableOptions(web=choice), RecordedWeb(web_dir))
    tools = client._request(crp, "m", conv, {"temperature": 0.2})
    assert [t.get("type", "custom") for t in tools["tools"]] == ["code_execution_20250825", "custom", "custom"]
    assert [t["name"] for t in tools["tools"]] == ["code_execution", "web_search", "fetch"]
    assert "input_schema" in tools["tools"][1] and tools["temperature"] == 0.2
    assert [n.source for n in protocol_notes(DeliverableOptions())] == ["paper", "deskbench", "paper"]
    assert protocol_notes(DeliverableOptions(web=choice))[-1].source == "deskbench"
    assert isinstance(DELIVERABLE_AGENTS["claude-research"](DeliverableOptions(), None), ClaudeResearch)


def _recording(tmp_path: Path) -> Path:
    d = tmp_path / "web"
    (d / "pages").mkdir(parents=True)
    (d / "pages" / "m.html").write_text("<html><body>Market size USD 4.2 billion</body></html>")
    lines = [{"kind": "search", "query": "mordor market size", "results": [
                 {"title": "Mordor", "url": MORDOR, "snippet": "market size"}]},
             {"kind": "page", "url": MORDOR, "file": "pages/m.html", "content_type": "text/html", "status": 200}]
    (d / "index.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return d


def test_an_episode_searches_cites_and_reads_the_files_back(packages: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(packages / "dl-0001-crp")
    text, outputs = answer(task, tmp_path)
    turns = [[{"bash": "python build.py", "reads": list(task.inputs), "writes": outputs, "stdout": "saved"},
              {"stop": "pause_turn"}],
             [{"search": "mordor intelligence market size", "results": [{"url": MORDOR, "title": "Mordor report"}]},
              {"text": "Intro. "}, {"text": "Market: USD 4.2B.", "cite": [MORDOR]}, {"text": "\n\n" + text}]]
    with SimResearch(turns) as sim:
        env(sim, monkeypatch)
        workdir = tmp_path / "outputs" / "sys" / task.id / "0"
        result = asyncio.run(ClaudeResearch().run(task, context(tmp_path), workdir))
        first, second = sim.requests
        counts = dict(sim.counts)
    assert result.status == "ok", result.error
    assert counts == {"files_uploaded": 3, "containers_created": 1, "messages": 2, "files_downloaded": 1,
                      "files_deleted": 4}
    uploads = [b for b in first["messages"][0]["content"] if b["type"] == "container_upload"]
    assert len(uploads) == 3 and "CORPUS DISCIPLINE: HYBRID" in first["messages"][0]["content"][-1]["text"]
    assert "container" not in first
    assert second["container"] in sim.containers and second["messages"][1]["role"] == "assistant"
    sub = result.submission
    assert isinstance(sub, DeliverableSubmission) and [f.name for f in sub.files] == list(outputs)
    assert (tmp_path / sub.files_dir / next(iter(outputs))).read_bytes() == next(iter(outputs.values()))
    assert f"Market: USD 4.2B. [1]({MORDOR})" in sub.response and f"1. [Mordor report]({MORDOR})" in sub.response
    assert set(cited_hosts(sub.response)) == {"mordorintelligence.com"}
    by_name = {s.name: s for s in result.trajectory if isinstance(s, ToolCallStep)}
    assert by_name["web_search"].result["results"][0]["url"] == MORDOR
    assert by_name["citations"].result["cited"] == [{"url": MORDOR, "title": "Mordor report",
                                                      "cited_text": "Market: USD 4.2B."}]
    sources = recorded_sources(result.trajectory)  # what C.3 reads: the cited URL was found, with its text
    assert "4.2B" in sources[normalise_url(MORDOR)].text
    assert by_name["execute_code"].result["exit_code"] == 0
    assert by_name["execute_code"].arguments == {"code": "python build.py", "tool": "bash_code_execution",
                                                 "sandbox": "anthropic"}
    assert [f[0] for f in by_name["read_back_files"].result["files"]] == list(outputs)
    assert load_pending(workdir) is None and sub.rounds == 2
    assert result.transcript is not None
    calls = [e for e in result.transcript.doc().events if e.kind == "model_call"]
    assert "CORPUS DISCIPLINE: HYBRID" in calls[0].messages[0]["content"] and len(calls) == 2
    assert "paused turn" in calls[1].messages[0]["content"] and calls[1].reply is not None
    assert "Sources:" in calls[1].reply["message"]["content"]
    # tokens at $5/$25 per M, one search at $0.01, the container's 5-minute minimum at $0.05/h
    tokens_in = sum(1000 + 10 * len(json.dumps(b["messages"])) // 40 for b in (first, second))
    assert (result.usage.input_tokens, result.usage.output_tokens) == (tokens_in, 400)
    fee = CONTAINER_MIN_SECONDS / 3600 * CONTAINER_USD_PER_HOUR
    assert result.usage.cost_usd == pytest.approx(tokens_in * 5 / 1e6 + 400 * 25 / 1e6 + 0.01 + fee)


def test_closed_task_missing_inputs_and_client_web_tools(packages: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(packages / "dl-0001-crp")
    web_dir = _recording(tmp_path)
    turns = [[{"tool_use": "web_search", "input": {"query": "mordor market size"}}],
             [{"bash": "python build.py", "reads": ["not_uploaded.xlsx"]},
              {"bash": "echo x > ../escape.md", "writes": {"../escape.md": b"x"}}, {"text": f"Done, see {MORDOR}."}]]
    with SimResearch(turns) as sim:
        env(sim, monkeypatch)
        agent = ClaudeResearch(DeliverableOptions(web=WebChoice("recorded", str(web_dir))), RecordedWeb(web_dir))
        result = asyncio.run(agent.run(task, context(tmp_path), tmp_path / "w" / "0"))
        assert result.status == "ok", (result.error, sim.refusals)
        second = sim.requests[1]
    answered = second["messages"][2]["content"][0]
    assert answered["type"] == "tool_result" and MORDOR in answered["content"]
    steps = [s for s in result.trajectory if isinstance(s, ToolCallStep)]
    search = next(s for s in steps if s.name == "web_search")
    assert search.result["backend"] == "recorded"
    bash = next(s for s in steps if s.name == "execute_code")
    assert bash.result["exit_code"] == 1 and "not_uploaded.xlsx" in bash.result["error_tail"]
    sub = result.submission
    assert isinstance(sub, DeliverableSubmission) and [f.name for f in sub.files] == ["escape.md"]
    assert (tmp_path / "w" / "0" / "result" / "escape.md").is_file() and not (tmp_path / "w" / "escape.md").exists()


def test_failures_are_episode_errors(packages: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(packages / "dl-0003-scp")
    with SimResearch([[{"text": "x"}]], models=frozenset({"claude-sonnet-4-5"})) as sim:
        env(sim, monkeypatch)
        workdir = tmp_path / "w" / "0"
        refused = asyncio.run(ClaudeResearch().run(task, context(tmp_path), workdir))
        assert refused.status == "error" and "not_found_error: model: claude-opus-4-5" in (refused.error or "")
        assert load_pending(workdir) is None and sim.counts["files_deleted"] == 3  # a refusal is final: cleaned up
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        other = AnalystContext(model=open_model("openai/gpt-4o"), sandbox=Sandbox(Limits(), unsafe_local=True),
                               tasks_dir=tmp_path, run_dir=tmp_path)
        wrong = asyncio.run(ClaudeResearch().run(task, other, workdir))
        assert wrong.status == "error" and "runs on Anthropic models" in (wrong.error or "")
        ctx = context(tmp_path)
        monkeypatch.delenv("ANTHROPIC_API_KEY")
        keyless = asyncio.run(ClaudeResearch().run(task, ctx, workdir))
        assert keyless.status == "error" and "$ANTHROPIC_API_KEY" in (keyless.error or "")


def test_an_overloaded_api_keeps_the_conversation_and_a_rerun_goes_on(packages: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(packages / "dl-0003-scp")
    text, outputs = answer(task, tmp_path)
    turns = [[{"bash": "python plan.py", "reads": list(task.inputs), "writes": outputs}, {"stop": "pause_turn"}],
             [{"status": 529}]]
    workdir = tmp_path / "w" / "0"
    with SimResearch(turns) as sim:
        env(sim, monkeypatch)
        failed = asyncio.run(ClaudeResearch().run(task, context(tmp_path), workdir))
        assert failed.status == "error" and "overloaded_error" in (failed.error or "") and "run again" in (failed.error or "")
        saved = load_pending(workdir)
        assert saved is not None and saved.id in sim.containers and len(saved.data["replies"]) == 1
        assert sim.counts["messages"] == 5  # the first turn, then the second tried four times (three retries)
        sim.turns[1] = [{"text": text}]
        sim.fail_downloads = 4  # the files cannot be read back yet: the answered conversation is kept
        cut = asyncio.run(ClaudeResearch().run(task, context(tmp_path), workdir))
        assert cut.status == "error" and "api_error" in (cut.error or "")
        assert sim.counts["messages"] == 6 and load_pending(workdir) is not None
        done = asyncio.run(ClaudeResearch().run(task, context(tmp_path), workdir))
        counts = dict(sim.counts)
    assert done.status == "ok", done.error
    # one upload of each input, one container, and no request sent again once the turn had ended
    assert (counts["files_uploaded"], counts["containers_created"], counts["messages"]) == (3, 1, 6)
    sub = done.submission
    assert isinstance(sub, DeliverableSubmission) and [f.name for f in sub.files] == list(outputs)
    assert sub.response == text.strip() and sub.rounds == 2 and load_pending(workdir) is None
    assert done.usage.calls == 2  # both answered turns, recorded again from the saved replies


def test_prompt_names_files_outputs_and_trap_hints(packages: Path) -> None:
    from deskbench.tracks.deliverables.deep_research.anthropic import build_prompt
    from deskbench.tracks.deliverables.prompts import TRAP_HINTS

    task = load_package(packages / "dl-0003-scp")
    plain = build_prompt(task, task.input_paths(), inline_chars=2000, web="")
    assert plain.startswith("CORPUS DISCIPLINE: CLOSED") and "web_search" not in plain
    assert ", ".join(task.inputs) in plain and f"- {task.required_outputs[0].name} (json)" in plain
    hinted = build_prompt(task, task.input_paths(), inline_chars=0, web="server", trap_hints=True)
    assert next(iter(TRAP_HINTS.values())) in hinted.split("CORPUS DISCIPLINE")[0]
    assert "(web_search)" in hinted and "normalised to text" not in hinted


def test_reply_text_numbers_each_source_once() -> None:
    reply = {"content": [{"type": "text", "text": "A", "citations": [{"url": "https://a.org/x", "title": "A"}]},
                         {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                         {"type": "text", "text": " B", "citations": [{"url": "https://a.org/x", "title": "A"},
                                                                     {"url": "https://b.org", "title": "B"}]}]}
    assert reply_text(reply) == ("A [1](https://a.org/x) B [1](https://a.org/x) [2](https://b.org)\n\n"
                                 "Sources:\n1. [A](https://a.org/x)\n2. [B](https://b.org)")


def test_run_killed_mid_conversation_resumes_in_the_same_container_and_is_scored(
        bwrap: str, packages: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(packages / "dl-0003-scp")
    text, outputs = answer(task, tmp_path)
    turns = [[{"bash": "python plan.py", "reads": list(task.inputs), "writes": outputs}, {"stop": "pause_turn"}],
             [{"bash": "python check.py", "reads": list(outputs), "stdout": "ok"}, {"stop": "pause_turn"}],
             [{"text": text}]]
    out = tmp_path / "run"
    args = ["run", "--tasks", str(packages / task.id), "--out", str(out), "--agent", "claude-research",
            "--model", MODEL, "--quiet", "--json"]
    with SimResearch(turns, hold_turn=1) as sim:
        proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "ANTHROPIC_BASE_URL": sim.base_url, "ANTHROPIC_API_KEY": sim.api_key})
        try:
            wait_while_running(sim.held.is_set, "the second request", proc)
        finally:
            proc.kill()  # SIGKILL: nothing is cleaned up
            proc.communicate()
        assert proc.returncode == -9
        [pending_file] = list(out.rglob("*.pending.json"))
        container = next(iter(sim.containers))
        assert (sim.counts["files_uploaded"], sim.counts["containers_created"], sim.counts["messages"]) == (3, 1, 2)
        sim.release.set()
        env(sim, monkeypatch)
        again = run_cli(*args)
        assert again.returncode == 0, again.stderr
        # the same uploads and container; only the turn lost with the process is sent again
        assert (sim.counts["files_uploaded"], sim.counts["containers_created"], sim.counts["messages"]) == (3, 1, 4)
        assert [r.get("container") for r in sim.requests] == [None, container, container, container]
        assert sim.requests[2] == sim.requests[1]
    assert not pending_file.exists()
    [ep] = RunStore(out, create=False).episodes()
    assert ep.status == "ok" and ep.system == f"claude-research:{MODEL}"
    sub = ep.submission
    assert isinstance(sub, DeliverableSubmission) and [f.name for f in sub.files] == list(outputs)
    assert (out / sub.files_dir / next(iter(outputs))).read_bytes() == next(iter(outputs.values()))
    assert ep.usage.calls == 3 and ep.usage.cost_usd is not None and ep.usage.cost_usd > 0
    items = tmp_path / "items.jsonl"
    scored = run_cli("score", str(out), "--json", "--items-out", str(items))
    assert scored.returncode == 0, scored.stderr
    [item] = [json.loads(line) for line in items.read_text().splitlines()]
    outcomes = {v["id"]: v["status"] for v in item["verifiers"]}
    assert outcomes and set(outcomes.values()) == {"pass"}, outcomes
    diag = run_cli("diagnose", str(out), "--json")
    assert diag.returncode == 0, diag.stderr
    assert json.loads(diag.stdout)["systems"][0]["categories"] == {"ok": 1}
