"""The RLM agent (MADQA Appendix G.5): reply parsing, the REPL protocol through the real sandbox,
the agent end to end over the OpenAI wire (scripted replies), and one episode with the local model."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import ingest, require_tool, run_cli, write_text_pdf
from fake_openai import FakeOpenAI

from deskbench.agents.base import AgentContext, AgentSettings
from deskbench.corpus import Corpus
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.settings import Sampling
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.docqa.agents.registry import AGENTS, make_agent
from deskbench.tracks.docqa.agents.rlm import RlmAgent
from deskbench.tracks.docqa.agents.rlm_context import document_block, write_context
from deskbench.tracks.docqa.agents.rlm_prompts import DEFAULT_ANSWER, LAST_TURN, RLM_SYSTEM
from deskbench.tracks.docqa.agents.rlm_repl_host import Repl
from deskbench.tracks.docqa.agents.rlm_replies import Final, find_final, repl_blocks, shown
from deskbench.tracks.docqa.agents.rlm_settings import RlmSettings
from deskbench.tracks.docqa.tasks import DocQATask

FAST = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02, timeout=300.0)  # timeouts are tested with their own policy: a slow machine must not retry
TASK = DocQATask(id="q1", question="Which vehicle has winter season rental rates?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "fleet.pdf", "page": 2}])  # type: ignore[list-item]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("fleet")
    write_text_pdf(root / "pdfs" / "fleet.pdf", ["Introduction to the fleet.", "Winter season rates: Mountain car."])
    write_text_pdf(root / "pdfs" / "harbour.pdf", ["Harbour notes."])
    c, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    return c


def sandbox(**limits: Any):  # -> Sandbox
    require_tool("bwrap")
    from deskbench.sandbox import Limits, Sandbox

    return Sandbox(Limits(**limits))


# -- pure parts --------------------------------------------------------------------------------


def test_context_has_the_papers_markers(fleet: Corpus, tmp_path: Path) -> None:
    assert document_block("a.pdf", ["one", "two"]) == (
        "[FILE: a.pdf]\n[PAGE 1]\none\n[END PAGE 1]\n[PAGE 2]\ntwo\n[END PAGE 2]\n")
    stats = write_context(fleet, tmp_path / "context.txt")
    text = (tmp_path / "context.txt").read_text(encoding="utf-8")
    assert (stats.documents, stats.pages, stats.chars) == (2, 3, len(text))
    assert text.startswith("[FILE: fleet.pdf]\n[PAGE 1]\n") and "\n\n[FILE: harbour.pdf]\n[PAGE 1]\n" in text
    page2 = text[text.index("[PAGE 2]"):text.index("[END PAGE 2]")]
    assert "Mountain car" in page2 and "Introduction" not in page2
    assert (tmp_path / "context.txt").stat().st_mode & 0o004  # readable by the jail's uid


@pytest.mark.parametrize(("reply", "expected"), [
    ("Done.\nFINAL(Mountain car)", Final("answer", "Mountain car")),
    ("FINAL(3 (approx.) units, fleet.pdf page (2))\ntrailing", Final("answer", "3 (approx.) units, fleet.pdf page (2)")),
    ("FINAL(The answer spans\ntwo lines, it's fleet.pdf p. 2)", Final("answer", "The answer spans\ntwo lines, it's fleet.pdf p. 2")),
    ('FINAL("Mountain car")', Final("answer", "Mountain car")),
    ("- `FINAL(Mountain car)`", Final("answer", "Mountain car")),
    ("FINAL_VAR(found)", Final("var", "found")),
    ("I am done.\n  FINAL.VAR( 'found' )", Final("var", "found")),
    ("FINAL (cut off by the token lim", Final("answer", "cut off by the token lim")),
    ("```repl\nFINAL_VAR(x)\n```\nFINAL(y)", Final("answer", "y")),
])
def test_final_answer_forms(reply: str, expected: Final) -> None:
    assert find_final(reply) == expected


@pytest.mark.parametrize("reply", [
    "I will give FINAL(x) when done.",  # not at the start of a line
    "```repl\nFINAL(x)\n```",  # inside code
    "```repl\nx = 1\nFINAL(x)",  # inside an unclosed code block
    "FINALLY(no)\nFINAL_VARS(x)",
    "no answer yet",
])
def test_no_final_answer(reply: str) -> None:
    assert find_final(reply) is None


def test_repl_blocks_in_order() -> None:
    reply = ("Look first.\n```repl\nx = context[:100]\nprint(x)\n```\nThen:\n```python\nignored = 1\n```\n"
             "```repl\ny = 2```\n```repl\n\n```\n```repl  \r\nz = 3\r\n```")
    assert repl_blocks(reply) == ["x = context[:100]\nprint(x)", "y = 2", "z = 3"]
    assert repl_blocks("no code") == []


def test_shown_truncates_with_a_count() -> None:
    assert shown("abc", 5) == "abc"
    assert shown("x" * 10, 4) == "xxxx\n... [6 more characters not shown]"


# -- the REPL through the real sandbox ---------------------------------------------------------------


def test_repl_protocol_in_the_sandbox(bwrap: str, tmp_path: Path) -> None:
    (tmp_path / "context.txt").write_text("[FILE: a.pdf]\n[PAGE 1]\nhello winter\n[END PAGE 1]\n", encoding="utf-8")
    asked: list[list[str]] = []

    async def answer(prompts: list[str]) -> list[str]:
        asked.append(prompts)
        return [p.upper() for p in prompts]

    async def go() -> None:
        repl = Repl(sandbox(), tmp_path / "context.txt", RlmSettings())
        try:
            assert await repl.start() is None
            first = await repl.execute("at = context.find('winter')\nprint('at', at)", answer)
            assert (first.stdout, first.error, first.llm_queries) == ("at 29\n", False, 0)
            second = await repl.execute("one = llm_query(f'q {at}')\nmany = llm_query_batched(['a', 'b'])\none, many", answer)
            assert second.stdout == "('Q 29', ['A', 'B'])\n" and second.llm_queries == 3  # state kept, last expression shown
            assert asked == [["q 29"], ["a", "b"]]
            boom = await repl.execute("print('before')\n1 / 0", answer)
            assert boom.error and boom.stdout == "before\n" and "ZeroDivisionError" in boom.stderr
            assert '"<repl>"' in boom.stderr and "rlm_repl" not in boom.stderr  # the model's frames only
            quiet = await repl.execute("import os, sys\nos.write(1, b'raw fd 1\\n')\nsys.stdout.write('kept')\n"
                                       "print(input.__name__)\nFINAL_VAR(one)", answer)
            assert quiet.error and quiet.stdout == "keptinput\n" and "outside any code block" in quiet.stderr
            big = await repl.execute("print('x' * 300_000)", answer)
            assert big.stdout_chars == 300_001 and len(big.stdout) < 101_000
            assert await repl.get_var("one") == ("Q 29", "")
            assert await repl.get_var("many") == ("['A', 'B']", "")
            value, problem = await repl.get_var("missing")
            assert value is None and "no variable named 'missing'" in problem
            assert (await repl.execute("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)", answer)).error
            assert repl.process is not None
            proc = repl.process.proc
        finally:
            repl.close()
        assert proc.poll() is not None and not os.path.exists(f"/proc/{proc.pid}")
        assert not list(Path(tempfile.gettempdir()).glob(f"deskbench-*-{os.getpid()}.*"))  # spawn folders removed

    asyncio.run(go())


def test_repl_lost_to_wall_time_or_exit_is_restarted(bwrap: str, tmp_path: Path) -> None:
    (tmp_path / "context.txt").write_text("ctx", encoding="utf-8")

    async def answer(prompts: list[str]) -> list[str]:
        await asyncio.sleep(1.5)  # sub-calls do not count against the wall time of the code
        return ["ok" for _ in prompts]

    async def go() -> None:
        repl = Repl(sandbox(wall_seconds=1.0), tmp_path / "context.txt", RlmSettings())
        try:
            assert await repl.start() is None
            slow_model = await repl.execute("kept = llm_query('x')\nprint(kept)", answer)
            assert slow_model.lost is None and slow_model.stdout == "ok\n"
            spin = await repl.execute("while True:\n    pass", answer)
            assert spin.lost is not None and "wall-time limit of 1 s" in spin.lost and spin.restart_failed is None
            after = await repl.execute("print(context, 'kept' in globals())", answer)
            assert after.stdout == "ctx False\n"  # a new process: context again, variables gone
            died = await repl.execute("import os\nos._exit(3)", answer)
            assert died.lost is not None and "exit status 3" in died.lost
            assert (await repl.execute("print(1)", answer)).stdout == "1\n"
        finally:
            repl.close()

    asyncio.run(go())


def test_repl_without_bubblewrap_in_unsafe_local_mode(tmp_path: Path) -> None:
    from deskbench.sandbox import Sandbox

    (tmp_path / "context.txt").write_text("local ctx", encoding="utf-8")

    async def go() -> None:
        repl = Repl(Sandbox(unsafe_local=True), tmp_path / "context.txt", RlmSettings())
        try:
            assert await repl.start() is None
            out = await repl.execute("context.upper()", lambda ps: asyncio.sleep(0, ps))
            assert out.stdout == "'LOCAL CTX'\n"
        finally:
            repl.close()

    asyncio.run(go())


# -- the agent over the wire ---------------------------------------------------------------------------

FIND = """Let me search the context.
```repl
at = context.find("Winter season")
file = context[context.rfind("[FILE: ", 0, at) + 7:].split("]")[0]
page = context[context.rfind("[PAGE ", 0, at) + 6:].split("]")[0]
vehicle = llm_query("Which vehicle? " + context[at:at + 40])
found = f"{vehicle} (file {file}, page {page})"
print(found)
```"""
EXTRACTED = {"answer": ["Mountain car"], "citations": [{"file": "fleet.pdf", "page": 2}]}


def scripted(root_replies: list[str], sub_reply: str = "Mountain car"):  # -> script for FakeOpenAI
    """Root turns in order; sub-calls (no system message) and the extraction step (a schema)
    recognised by their shape."""
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        messages = body["messages"]
        if body.get("response_format"):
            return {"kind": "text", "text": json.dumps(EXTRACTED)}
        if messages[0]["role"] != "system":
            return {"kind": "text", "text": sub_reply}
        turn = sum(m["role"] == "assistant" for m in messages)
        return {"kind": "text", "text": root_replies[min(turn, len(root_replies) - 1)]}
    return script


def context(fake: FakeOpenAI, corpus: Corpus, max_steps: int | None = 4, with_sandbox: bool = True,
            max_sub_calls: int | None = None) -> AgentContext:
    from deskbench.models.openai_chat import OpenAIChat
    model = OpenAIChat("fake", base_url=fake.base_url, api_key="k", id="openai-compat/fake")
    return AgentContext(model=ResilientModel(model, policy=FAST), corpus=corpus,
                        settings=AgentSettings(max_steps=max_steps, max_sub_calls=max_sub_calls),
                        sandbox=sandbox() if with_sandbox else None)


def test_rlm_agent_searches_context_queries_a_sub_llm_and_answers(bwrap: str, fleet: Corpus) -> None:
    with FakeOpenAI(script=scripted([FIND, "The REPL found it.\nFINAL_VAR(found)"])) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet)))
        assert result.status == "ok", result.error
        sub = result.submission
        assert sub.answer == ["Mountain car"] and [(c.document, c.page) for c in sub.citations] == [("fleet.pdf", 2)]
        # effort = LLM calls (2 root + 1 sub-call; the extraction step is not counted), as the
        # official RLM's llm_calls; no `iterations`, as the official output has none
        assert (sub.steps, sub.llm_calls, sub.iterations, sub.search_history) == (3, 3, None, None)
        kinds = [type(s).__name__ for s in result.trajectory]
        assert kinds == ["ModelCallStep", "ModelCallStep", "ToolCallStep", "ModelCallStep", "ModelCallStep"]
        step = result.trajectory[2]
        assert isinstance(step, ToolCallStep) and step.name == "repl" and "llm_query(" in step.arguments["code"]
        assert step.result == {"stdout_chars": len("Mountain car (file fleet.pdf, page 2)\n"), "error": False,
                               "llm_queries": 1}
        assert result.usage.calls == 4 and all(isinstance(s, ModelCallStep) for s in result.trajectory if s is not step)
        first, sub_call, second, extraction = fake.requests
        assert first["messages"][0] == {"role": "system", "content": RLM_SYSTEM}
        opening = first["messages"][1]["content"]
        assert "2 PDF document(s), 3 page(s)" in opening and TASK.question in opening
        assert sub_call["messages"] == [{"role": "user", "content": sub_call["messages"][0]["content"]}]
        assert sub_call["messages"][0]["content"].startswith("Which vehicle? Winter season rates: Mountain car.")
        assert "REPL output:\nMountain car (file fleet.pdf, page 2)" in second["messages"][-1]["content"]
        assert "Mountain car (file fleet.pdf, page 2)" in extraction["messages"][-1]["content"]
        assert TASK.question in extraction["messages"][-1]["content"]


def test_rlm_agent_recovers_from_a_lost_repl_and_a_missing_variable(bwrap: str, fleet: Corpus) -> None:
    replies = ["```repl\nx = 1\nimport os\nos._exit(3)\n```\n```repl\nprint(x)\n```", "FINAL_VAR(x)",
               "FINAL(Mountain car, from fleet.pdf page 2)"]
    with FakeOpenAI(script=scripted(replies)) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet)))
        assert result.status == "ok" and result.submission.steps == result.submission.llm_calls == 3
        repl_steps = [s for s in result.trajectory if isinstance(s, ToolCallStep)]
        assert len(repl_steps) == 1 and repl_steps[0].result["error"] and "exit status 3" in repl_steps[0].result["repl_lost"]
        after_crash = fake.requests[1]["messages"][-1]["content"]
        assert "it was restarted" in after_crash and "The remaining 1 block(s) of your reply were not run." in after_crash
        after_var = fake.requests[2]["messages"][-1]["content"]
        assert "FINAL_VAR(x): there is no variable named 'x'" in after_var
        assert "Mountain car, from fleet.pdf page 2" in fake.requests[3]["messages"][-1]["content"]


def test_rlm_agent_without_final_asks_for_a_default_answer(bwrap: str, fleet: Corpus) -> None:
    """Out of iterations: one more call asks for the answer (the RLM library's _default_answer);
    its reply goes through the extraction step. Only an empty reply ends the episode as a limit."""
    code = "```repl\nprint(len(context))\n```"
    with FakeOpenAI(script=scripted([code, code, "Mountain car, from fleet.pdf page 2"])) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet, max_steps=2)))
        assert result.status == "ok", result.error
        assert len(fake.requests) == 4  # 2 root iterations, the default-answer call, the extraction
        asked = fake.requests[2]["messages"][-1]
        assert asked["role"] == "user" and asked["content"].endswith(DEFAULT_ANSWER)
        assert LAST_TURN in fake.requests[1]["messages"][-1]["content"]
        assert "Mountain car, from fleet.pdf page 2" in fake.requests[3]["messages"][-1]["content"]
        assert result.submission.steps == result.submission.llm_calls == 3  # the default answer is an LLM call
        assert sum(isinstance(s, ToolCallStep) for s in result.trajectory) == 2
    with FakeOpenAI(script=scripted(["Thinking, no code.", "Thinking, no code.", ""])) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet, max_steps=2)))
        assert result.status == "limit" and result.submission is None and "after 2 iterations" in result.error
        assert "no ```repl``` block" in fake.requests[1]["messages"][-1]["content"] and len(fake.requests) == 3


def test_rlm_agent_needs_a_sandbox(bwrap: str, fleet: Corpus) -> None:
    with FakeOpenAI(script=scripted(["FINAL(x)"])) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet, with_sandbox=False)))
        assert result.status == "error" and "no sandbox" in result.error and not fake.requests


def test_sub_call_budget_is_reported_to_the_code(bwrap: str, fleet: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    code = "```repl\ntry:\n    llm_query_batched(['a', 'b', 'c'])\nexcept Exception as e:\n    print(e)\n```"
    with FakeOpenAI(script=scripted([code, "FINAL(done)"])) as fake:  # the run's cap (--max-sub-calls 2)
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet, max_sub_calls=2)))
        assert result.status == "ok" and len(fake.requests) == 3  # no sub-call reached the model
        assert "budget of 2 llm_query calls is spent" in fake.requests[1]["messages"][-1]["content"]
        assert result.submission.steps == 2  # the two root calls
    monkeypatch.setitem(AGENTS, "rlm", lambda: RlmAgent(RlmSettings(max_sub_calls=2)))  # the agent's own setting
    with FakeOpenAI(script=scripted([code, "FINAL(done)"])) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet)))
        assert "budget of 2 llm_query calls is spent" in fake.requests[1]["messages"][-1]["content"]


def test_rlm_defaults_are_the_official_rlms(bwrap: str, fleet: Corpus) -> None:
    """No cap on sub-calls and 30 root iterations (RLM(max_iterations=30), the library default the
    official baseline keeps); effort = every LLM call of the episode; no output-token field."""
    code = "```repl\nreplies = llm_query_batched(['q'] * 250)\nprint(len(replies))\n```"
    with FakeOpenAI(script=scripted([code, "FINAL(done)"])) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet, max_steps=None)))
        assert result.status == "ok", result.error
        assert "REPL output:\n250" in fake.requests[-2]["messages"][-1]["content"]  # all 250 answered
        assert len(fake.requests) == 2 + 250 + 1  # root calls, sub-calls, the extraction step
        assert result.submission.steps == result.submission.llm_calls == 2 + 250
        assert not any(k in b for b in fake.requests for k in ("max_tokens", "max_completion_tokens"))
    with FakeOpenAI(script=scripted([*["Thinking, no code."] * 30, ""])) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet, max_steps=None)))
        assert result.status == "limit" and result.error.startswith("no FINAL answer after 30 iterations")
        assert len(fake.requests) == 31  # 30 root iterations, then the default-answer call


def test_a_failed_sub_call_is_an_exception_in_the_code(bwrap: str, fleet: Corpus) -> None:
    code = "```repl\ntry:\n    llm_query('q')\nexcept Exception as e:\n    print(type(e).__name__, e)\n```"
    base = scripted([code, "FINAL(done)"])

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if body["messages"][0]["role"] != "system" and not body.get("response_format"):
            return {"kind": "status", "status": 400, "message": "prompt too long"}
        return base(body, n)

    with FakeOpenAI(script=script) as fake:
        result = asyncio.run(make_agent("rlm").run(TASK, context(fake, fleet)))
        assert result.status == "ok"
        assert "QueryError llm_query failed" in fake.requests[2]["messages"][-1]["content"]


def test_deskbench_run_with_the_rlm_agent(bwrap: str, fleet: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    with FakeOpenAI(script=scripted([FIND, "FINAL_VAR(found)"])) as fake:
        proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(fleet.root), "--agent", "rlm",
                       "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(tmp_path / "run"),
                       "--max-sub-calls", "5", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()  # {system: report}
    assert report["accuracy"] == 1.0
    (episode,) = RunStore(tmp_path / "run").episodes()
    assert episode.status == "ok" and episode.submission.steps == episode.submission.llm_calls == 3
    assert not any(k in b for b in fake.requests for k in ("max_tokens", "max_completion_tokens"))


# -- the real local model ----------------------------------------------------------------------------


def test_rlm_episode_with_the_local_model(local_model: str, bwrap: str, fleet: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipeline, not accuracy: SmolLM2 rarely follows the protocol; the episode must be stored
    as ok, or as a recorded error or limit, with a real trajectory."""
    from deskbench.runs.track import execute_run
    from deskbench.tracks.docqa.run import RunSpec, prepare

    monkeypatch.setitem(AGENTS, "rlm", lambda: RlmAgent(RlmSettings(max_sub_calls=3)))
    spec = RunSpec(agent="rlm", model="local", out=tmp_path / "run", corpus=fleet.root, concurrency=1,
                   max_steps=2, sampling=Sampling(max_tokens=96))
    (outcome,) = execute_run(prepare(spec, [TASK]))
    assert outcome.counts.done == 1
    (episode,) = RunStore(tmp_path / "run").episodes()
    assert episode.status in ("ok", "error", "limit")
    assert (episode.submission is not None) == (episode.status == "ok")
    calls = [s for s in episode.trajectory if isinstance(s, ModelCallStep)]
    assert calls and all(c.input_tokens > 0 for c in calls)
