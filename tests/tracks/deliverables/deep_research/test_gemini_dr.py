"""`--agent gemini-deep-research` (deep_research/gemini_dr.py) against its strict simulator
(tests/sim_gemini_interactions.py): the Interactions API request, the background interaction
polled to its end, the report's Python run in the sandbox over the staged inputs with the files
collected, what the agent searched, fetched and cited kept, its usage priced; a run killed with
kill -9 while the research runs polls the same interaction when run again, and the track scores
what it made."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, wait_while_running
from deliverable_responses import bundled_packages, recompute, respond
from sim_gemini_interactions import SimGeminiInteractions

from deskbench.agents.base import Recorder
from deskbench.agents.code_loop import AnalystContext, AnalystSettings
from deskbench.models.registry import open_model
from deskbench.models.settings import Sampling
from deskbench.runs.store import RunStore
from deskbench.sandbox import Limits, Sandbox
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.deliverables.agent import DELIVERABLE_AGENTS
from deskbench.tracks.deliverables.deep_research.gemini_dr import (
    SOURCES_NOTE,
    GeminiDeepResearchAgent,
    InteractionsApi,
    InteractionsError,
    Polling,
    python_blocks,
    read_outputs,
    research_prompt,
    with_sources,
)
from deskbench.tracks.deliverables.deep_research.pending import load_pending
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask, load_package

MODEL = "google/deep-research-pro-preview-12-2025"
TASK = "dl-0003-scp"  # a JSON deliverable, numeric verifiers only (no judge needed to score it)
CITED = "https://www.bls.gov/cpi/"
FAST = Polling(interval=0.01, max_interval=0.02, max_wait=5.0)


@pytest.fixture()
def package(tmp_path: Path) -> Path:
    return bundled_packages(tmp_path / "packages", TASK)


def point_at(sim: SimGeminiInteractions, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's key and endpoint root in this process's environment: the simulator's."""
    for k, v in sim.env().items():
        monkeypatch.setenv(k, v)


def files_code(folder: Path) -> str:
    """A program that writes every file of `folder` under /mnt/result (the agent's embedded code)."""
    lines = ["import base64"]
    for path in sorted(folder.iterdir()):
        blob = base64.b64encode(path.read_bytes()).decode()
        lines.append(f"open('/mnt/result/{path.name}', 'wb').write(base64.b64decode('{blob}'))")
    return "\n".join(lines + ["print('written')"])


class Researcher:
    """What the deep-research agent 'finds': the right answer with its file written by a python
    block, after a search, a fetch and a thought, citing one page by annotation only."""

    def __init__(self, task: DeliverableTask, work: Path) -> None:
        folder = work / "answer"
        assert task.directory is not None
        self.response = respond(task, recompute(task, task.directory), folder, set())
        self.code = files_code(folder)
        self.inputs: list[str] = []

    def __call__(self, text: str, agent: str) -> dict[str, Any]:
        self.inputs.append(text)
        report = f"# Cost plan\n\n{self.response}\n```python\n{self.code}\n```\n"
        return {"outputs": [
            {"type": "thought", "summary": [{"type": "text", "text": "Plan: read the unit costs, apply the footnote."}]},
            {"type": "google_search_call", "id": "s1", "arguments": {"queries": ["cpi 2025", "unit cost benchmark"]}},
            {"type": "google_search_result", "call_id": "s1", "result": [{"search_suggestions": "<div>...</div>"}]},
            {"type": "url_context_call", "id": "u1", "arguments": {"urls": [CITED, "https://paywalled.example.com/a"]}},
            {"type": "url_context_result", "call_id": "u1", "result": [{"url": CITED, "status": "success"},
                                                                       {"url": "https://paywalled.example.com/a",
                                                                        "status": "paywall"}]},
            {"type": "text", "text": report,
             "annotations": [{"type": "url_citation", "url": CITED, "title": "CPI", "start_index": 0, "end_index": 5}]},
        ], "usage": {"total_input_tokens": 250_000, "total_output_tokens": 40_000, "total_thought_tokens": 10_000,
                     "total_tool_use_tokens": 50_000, "total_tokens": 350_000}}


def context(tmp_path: Path, sampling: Sampling | None = None) -> AnalystContext:
    return AnalystContext(model=open_model(MODEL, sampling=sampling), sandbox=Sandbox(Limits()),
                          tasks_dir=tmp_path, run_dir=tmp_path, settings=AnalystSettings(max_rounds=5))


def test_the_simulator_refuses_what_the_api_refuses() -> None:
    ok = {"agent": "deep-research-pro-preview-12-2025", "input": "x", "background": True}
    with SimGeminiInteractions(script=lambda text, agent: {"outputs": []}) as sim:
        api = InteractionsApi(sim.root, sim.api_key)
        for body, status, needle in (
            ({**ok, "temperature": 0.2}, 400, 'Unknown name "temperature"'),
            ({**ok, "generation_config": {"temperature": 0}}, 400, 'Unknown name "generation_config"'),
            ({**ok, "background": "yes"}, 400, "Invalid value at 'background'"),
            ({**ok, "background": False}, 400, "must be run in the background"),
            ({k: v for k, v in ok.items() if k != "background"}, 400, "must be run in the background"),
            ({**ok, "store": False}, 400, "requires store=true"),
            ({**ok, "agent": "deep-research-ultra"}, 404, "Agent deep-research-ultra not found"),
            ({**ok, "model": "gemini-3-pro-preview"}, 400, "Exactly one of 'model' or 'agent'"),
            ({**ok, "agent_config": {"type": "dynamic"}}, 400, "agent_config.type"),
            ({**ok, "agent_config": {"type": "deep-research", "thinking_summaries": "all"}}, 400,
             "agent_config.thinking_summaries"),
            ({**ok, "agent_config": {"type": "deep-research", "depth": 3}}, 400, 'Unknown name "depth"'),
            ({"agent": ok["agent"], "background": True}, 400, "'input' is required"),
            ({**ok, "input": 42}, 400, "Invalid value at 'input'"),
        ):
            with pytest.raises(InteractionsError) as caught:
                api.call("POST", "interactions", body)
            assert (caught.value.status, needle in caught.value.message) == (status, True), (body, caught.value)
        with pytest.raises(InteractionsError) as caught:
            InteractionsApi(sim.root, "wrong").call("POST", "interactions", ok)
        assert caught.value.status == 400 and caught.value.message == "API key not valid. Please pass a valid API key."
        with pytest.raises(InteractionsError) as caught:
            InteractionsApi(sim.root, "").call("GET", "interactions/v1_1")
        assert caught.value.status == 403 and "unregistered callers" in caught.value.message
        with pytest.raises(urllib.error.HTTPError) as http:  # the Interactions API is v1beta only
            urllib.request.urlopen(urllib.request.Request(f"{sim.root}/v1/interactions", data=json.dumps(ok).encode(),
                                                          headers={"x-goog-api-key": sim.api_key}))
        assert http.value.code == 404 and json.loads(http.value.read())["error"]["status"] == "NOT_FOUND"
        with pytest.raises(InteractionsError) as caught:
            api.call("GET", "interactions/v1_99999999")
        assert caught.value.status == 404
        assert sim.created == []  # nothing refused was created
        made = api.call("POST", "interactions", {**ok, "agent_config": {"type": "deep-research",
                                                                        "thinking_summaries": "auto"}})
        assert made["status"] == "in_progress" and len(sim.created) == 1
        with pytest.raises(InteractionsError) as caught:
            api.call("GET", f"interactions/{made['id']}?verbose=true")
        assert 'Unknown name "verbose"' in caught.value.message
        assert api.call("GET", f"interactions/{made['id']}")["status"] == "completed"


def test_prompt_blocks_and_sources(package: Path) -> None:
    task = load_package(package / TASK)
    prompt = research_prompt(task, task.input_paths(), inline_chars=24_000)
    assert prompt.index("CORPUS DISCIPLINE: CLOSED") < prompt.index("/mnt/data/")
    assert "/mnt/result/cost_plan.json (json)" in prompt and "the json module" in prompt
    assert "execute_code" not in prompt  # this agent has no tool: its code is run after it
    short = research_prompt(task, task.input_paths(), inline_chars=200)
    assert "the rest of this file is in /mnt/data/ for your code" in short
    report = "Text\n```python\nprint(1)\n```\nmore\n```py\nprint(2)\n```\n```json\n{}\n```\n```python\n\n```"
    assert python_blocks(report) == ["print(1)\n", "print(2)\n"]
    cited = [{"url": "https://a.example.org/x", "title": ""}, {"url": "https://b.example.org/", "title": ""}]
    out = with_sources("See https://a.example.org/x.", cited)
    assert out.endswith(f"{SOURCES_NOTE}\n- https://b.example.org/\n") and out.count("a.example.org") == 1
    assert with_sources("no citations", []) == "no citations"


def test_registered_as_a_deliverables_agent() -> None:
    assert "gemini-deep-research" in DELIVERABLE_AGENTS
    assert isinstance(DELIVERABLE_AGENTS["gemini-deep-research"](GeminiDeepResearchAgent().options, None),
                      GeminiDeepResearchAgent)


@pytest.mark.parametrize("shape", ["outputs", "steps"])  # the reply before and since 2026-05
def test_an_episode_records_the_research_and_collects_the_files(bwrap: str, package: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    task = load_package(package / TASK)
    script = Researcher(task, tmp_path)
    with SimGeminiInteractions(script=script, polls_to_finish=3, shape=shape) as sim:
        point_at(sim, monkeypatch)
        workdir = tmp_path / "outputs" / "sys" / TASK / "0"
        result = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, context(tmp_path), workdir))
        [body] = sim.created
    assert result.status == "ok", result.error
    assert body == {"agent": "deep-research-pro-preview-12-2025", "input": body["input"], "background": True,
                    "agent_config": {"type": "deep-research", "thinking_summaries": "auto"}}
    assert script.inputs == [body["input"]] and "CORPUS DISCIPLINE: CLOSED" in body["input"]
    assert sim.polls[next(iter(sim.polls))] == 3 and load_pending(workdir) is None
    sub = result.submission
    assert isinstance(sub, DeliverableSubmission)
    assert [f.name for f in sub.files] == ["cost_plan.json"]
    written = json.loads((tmp_path / sub.files_dir / "cost_plan.json").read_text())
    assert written == json.loads((tmp_path / "answer" / "cost_plan.json").read_text())
    assert sub.response.endswith(f"{SOURCES_NOTE}\n- {CITED}\n")  # cited by annotation only: listed for the verifiers
    steps = {s.name: s for s in result.trajectory if isinstance(s, ToolCallStep)}
    assert steps["web_search"].arguments == {"queries": ["cpi 2025", "unit cost benchmark"]}
    fetched = [(s.result["url"], s.result["status"]) for s in result.trajectory
               if isinstance(s, ToolCallStep) and s.name == "fetch"]
    assert fetched == [(CITED, "success"), ("https://paywalled.example.com/a", "paywall")]
    assert steps["citations"].result["cited"] == [{"url": CITED, "title": "CPI"}]
    assert "footnote" in steps["thought"].result["summary"]
    assert steps["execute_code"].result["exit_code"] == 0 and steps["execute_code"].result["files"][0][0] == "cost_plan.json"
    # tokens: input + tool-use prompts, output + thoughts, at Gemini 3 Pro's list rates, and two queries at $14/1000
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.reasoning_tokens) == (300_000, 50_000, 10_000)
    assert result.usage.cost_usd == pytest.approx(300_000 * 2 / 1e6 + 50_000 * 12 / 1e6 + 2 * 0.014)
    assert result.transcript is not None
    [call] = [e for e in result.transcript.doc().events if e.kind == "model_call"]
    assert call.reply is not None and "```python" in call.reply["message"]["content"]
    assert call.messages[0]["content"] == body["input"]


def test_a_timed_out_wait_keeps_the_interaction_and_a_rerun_polls_it(bwrap: str, package: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(package / TASK)
    with SimGeminiInteractions(script=Researcher(task, tmp_path)) as sim:
        point_at(sim, monkeypatch)
        sim.hold.set()
        workdir = tmp_path / "w" / "0"
        short = Polling(interval=0.01, max_interval=0.01, max_wait=0.05)
        first = asyncio.run(GeminiDeepResearchAgent(polling=short).run(task, context(tmp_path), workdir))
        assert first.status == "error" and "run again to keep waiting" in (first.error or "")
        pending = load_pending(workdir)
        assert pending is not None and pending.provider == "gemini" and pending.api == "interactions"
        sim.hold.clear()
        second = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, context(tmp_path), workdir))
        assert second.status == "ok", second.error
        assert len(sim.created) == 1 and load_pending(workdir) is None
        first_step = second.trajectory[0]
        assert isinstance(first_step, ToolCallStep) and first_step.arguments["resumed"] is True


def test_failures_are_episode_errors(bwrap: str, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(package / TASK)
    failed = {"status": "failed", "error": {"code": 13, "message": "file corpus too large"}}
    with SimGeminiInteractions(script=lambda text, agent: failed) as sim:
        point_at(sim, monkeypatch)
        workdir = tmp_path / "w" / "0"
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, context(tmp_path), workdir))
        assert res.status == "error" and "ended failed (file corpus too large)" in (res.error or "")
        assert load_pending(workdir) is None  # an ended interaction is not polled again
        # a record whose interaction the API no longer knows: said, and removed
        (workdir.parent / "0.pending.json").write_text(json.dumps(
            {"provider": "gemini", "api": "interactions", "id": "v1_gone", "model": MODEL}))
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, context(tmp_path), workdir))
        assert res.status == "error" and "v1_gone is gone" in (res.error or "") and load_pending(workdir) is None
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(
            task, context(tmp_path, Sampling(temperature=0.2)), workdir))
        assert res.status == "error" and "drop --temperature" in (res.error or "")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        other = AnalystContext(model=open_model("openai/gpt-5-mini"), sandbox=Sandbox(Limits()), tasks_dir=tmp_path,
                               run_dir=tmp_path)
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, other, workdir))
        assert res.status == "error" and f"give e.g. --model {MODEL}" in (res.error or "")
        ctx = context(tmp_path)  # the model was opened with the key; the key is gone by the episode
        monkeypatch.delenv("GEMINI_API_KEY")
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, ctx, workdir))
        assert res.status == "error" and "needs an API key" in (res.error or "")
        assert len(sim.created) == 1


def test_run_killed_during_the_research_resumes_the_same_interaction_and_is_scored(
        bwrap: str, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(package / TASK)
    out = tmp_path / "run"
    args = ["run", "--tasks", str(package), "--out", str(out), "--agent", "gemini-deep-research", "--model", MODEL,
            "--quiet", "--json"]
    with SimGeminiInteractions(script=Researcher(task, tmp_path)) as sim:
        sim.hold.set()  # the research is still running when the run is killed
        proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, **sim.env()})
        try:
            wait_while_running(lambda: any(sim.polls.values()) and list(out.rglob("*.pending.json")), "poll", proc)
        finally:
            proc.kill()  # SIGKILL: nothing is cleaned up
            proc.communicate()
        assert proc.returncode == -9 and len(sim.created) == 1
        sim.hold.clear()
        point_at(sim, monkeypatch)
        again = run_cli(*args)
        assert again.returncode == 0, again.stderr
        assert len(sim.created) == 1  # the same interaction, polled again: one research run paid for
    assert not list(out.rglob("*.pending.json"))
    [ep] = RunStore(out, create=False).episodes()
    assert ep.status == "ok" and ep.system == f"gemini-deep-research:{MODEL}"
    sub = ep.submission
    assert isinstance(sub, DeliverableSubmission) and [f.name for f in sub.files] == ["cost_plan.json"]
    assert (out / sub.files_dir / "cost_plan.json").is_file()
    assert ep.usage.cost_usd is not None and ep.usage.cost_usd > 0
    scored = run_cli("score", str(out), "--json")
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    [row] = report["rows"]
    assert row["system"] == f"gemini-deep-research:{MODEL}"
    # every verifier passes on what the report's code wrote (V = 100), the file is there, no trap fell
    assert (row["v"]["mean"], row["verifiers"], row["files"]["rate"]) == (100.0, 9, 1.0)
    assert row["traps"] == {**row["traps"], "fell": 0, "avoided": 1}
    assert row["cost_known"] is True and row["cost_usd"] == pytest.approx(0.6 + 0.6 + 0.028)


def test_a_report_whose_code_fails_has_no_file_and_diagnose_says_why(bwrap: str, package: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper's Listing 1 (Gemini's wrong python-docx call): the text arrives, the file does not."""
    broken = ("import docx\nd = docx.Document()\nt = d.add_table(rows=1, cols=2)\n"
              "t.rows.cells[0].text = 'x'\nd.save('/mnt/result/cost_plan.json')\n")
    report = f"# Cost plan\n\nDECISION: ACCEPT\n\n```python\n{broken}```\n"
    out = tmp_path / "run"
    with SimGeminiInteractions(script=lambda text, agent: {"outputs": [{"type": "text", "text": report}]}) as sim:
        point_at(sim, monkeypatch)
        proc = run_cli("run", "--tasks", str(package), "--out", str(out), "--agent", "gemini-deep-research",
                       "--model", MODEL, "--quiet", "--json")
    assert proc.returncode == 0, proc.stderr
    [ep] = RunStore(out, create=False).episodes()
    assert ep.status == "ok" and isinstance(ep.submission, DeliverableSubmission) and ep.submission.files == []
    proc = run_cli("diagnose", str(out), "--json", "--episodes")
    assert proc.returncode == 0, proc.stderr
    diag = json.loads(proc.stdout)
    assert diag["systems"][0]["categories"] == {"file_generation_failed:wrong_api": 1}
    assert "AttributeError" in diag["episodes"][0]["detail"]


def test_web_is_refused_in_one_line_before_the_run(package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Table 5: Google controls the search, always on; a deskbench web backend cannot replace it."""
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "index.jsonl").write_text("")
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    proc = run_cli("run", "--tasks", str(package), "--out", str(tmp_path / "r"), "--agent", "gemini-deep-research",
                   "--model", MODEL, "--web", f"recorded:{tmp_path / 'web'}", "--quiet")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --agent gemini-deep-research searches with Google's own search, always on, as the paper's Gemini did "
        "(Table 5); --web cannot be plugged into it: drop --web for this agent")
    assert not (tmp_path / "r").exists()
    notes = {n.aspect: n for n in GeminiDeepResearchAgent().protocol_notes()}
    assert notes["web access"].source == "paper" and "always on" in notes["web access"].detail


def test_a_passing_outage_is_waited_out_and_a_long_one_keeps_the_record(bwrap: str, package: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_package(package / TASK)
    with SimGeminiInteractions(script=Researcher(task, tmp_path)) as sim:
        point_at(sim, monkeypatch)
        sim.unavailable = 4  # four 503s in a row: still within the five a wait allows
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, context(tmp_path), tmp_path / "a" / "0"))
        assert res.status == "ok", res.error
        sim.unavailable = 5
        workdir = tmp_path / "b" / "0"
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, context(tmp_path), workdir))
        assert res.status == "error" and res.error == (
            "gemini-deep-research: the Interactions API is unavailable (503 The service is currently unavailable.); "
            "run again to keep waiting for the same interaction")
        assert load_pending(workdir) is not None  # the research goes on server-side: a rerun polls it
        res = asyncio.run(GeminiDeepResearchAgent(polling=FAST).run(task, context(tmp_path), workdir))
        assert res.status == "ok" and len(sim.created) == 2


def test_search_queries_from_the_usage_when_no_call_is_itemised() -> None:
    rec = Recorder(None)
    reply = {"steps": [{"type": "user_input", "content": [{"type": "text", "text": "the task"}]},
                       {"type": "model_output", "content": [{"type": "text", "text": "Part 1"}]},
                       {"type": "thought", "summary": [{"type": "text", "text": "checking"}]},
                       {"type": "model_output", "content": [{"type": "text", "text": "Part 2"}]}],
             "usage": {"total_input_tokens": 10, "grounding_tool_count": [{"type": "google_search", "count": 7},
                                                                          {"type": "retrieval", "count": 2}]}}
    report = read_outputs(reply, rec)
    assert (report.text, report.queries, report.input_tokens) == ("Part 1\n\nPart 2", 7, 10)
    assert [s.name for s in rec.trajectory if isinstance(s, ToolCallStep)] == ["thought"]
