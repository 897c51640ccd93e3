"""deskbench against strict provider simulators: every request the adapters build must pass the
real services' documented rules (tests/sim_openai.py, tests/sim_anthropic.py), and a refusal that
is the user's to fix stops a run at once with one line and exit 2.

The two end-to-end runs are the issue's acceptance: a bm25-agent run and a judged score with
openai/gpt-5-mini (a reasoning model: no max_tokens, no temperature) and with an Anthropic model,
through 429s and 500s, every episode ok and judged, no request refused.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from conftest import run_cli
from PIL import Image
from sim_anthropic import SimAnthropic
from sim_openai import SimOpenAI

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.models.capabilities import CapabilityRegistry, capabilities, use_capabilities
from deskbench.models.registry import make_model, open_model, preflight
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.settings import Sampling, resolve
from deskbench.models.types import (
    ChatRequest,
    ImagePart,
    Message,
    ProviderRefused,
    TextPart,
    ToolCall,
    ToolSpec,
)
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.tasks import DocQATask

FAST = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, timeout=300.0)  # timeouts are tested with their own policy: a slow machine must not retry
SEARCH = ToolSpec(name="search_documents", description="Search the documents.",
                  parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
ANSWER = ToolSpec(name="provide_answer", description="Give the final answer.",
                  parameters={"type": "object", "properties": {"answer": {"type": "array", "items": {"type": "string"}}},
                              "required": ["answer"]})
TASKS = [DocQATask(id=f"q{i}", question="Which vehicle rental rates are given for the winter season?",
                   answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
         for i in range(4)]
ANSWER_ARGS = {"answer": ["the Mountain car rental rates"], "citations": [{"file": "alpha.pdf", "page": 1}]}


def tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": json.dumps(args)}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def png(side: int, seed: int = 0, noise: bool = False) -> bytes:
    """A square PNG: grey, or random noise (which does not compress) from `seed`."""
    return _png(side, seed if noise else 0, noise)  # a grey one is the same whatever the seed


@functools.cache
def _png(side: int, seed: int, noise: bool) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8) if noise else np.full((side, side, 3), 200, np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(autouse=True)
def _builtin_capabilities() -> Any:
    use_capabilities(None)
    yield
    use_capabilities(None)


# --- the scripted model behind both simulators ----------------------------------------------------

def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name") or t.get("function", {}).get("name") for t in body.get("tools") or []}


def _has_tool_result(body: dict[str, Any]) -> bool:
    for m in body["messages"]:
        if m.get("role") == "tool":
            return True
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return True
    return False


def agent_and_judge(faults: dict[int, dict[str, Any]]) -> Callable[[dict[str, Any], int], dict[str, Any]]:
    """Searches once, then answers; judges say correct; `faults` by accepted-request number."""
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n in faults:
            return faults[n]
        names = _tool_names(body)
        if "submit_judgment" in names:
            return tool("submit_judgment", {"judgment": "correct", "main_issue": "none",
                                             "explanation": "matches the gold answer"})
        if "search_documents" in names and not _has_tool_result(body):
            return tool("search_documents", {"query": "winter rental rates"})
        return tool("provide_answer", ANSWER_ARGS)

    return script


FAULTS = {1: {"kind": "status", "status": 429, "retry_after": "0.05"}, 3: {"kind": "status", "status": 500},
          6: {"kind": "status", "status": 429, "retry_after": "0.05"}}


def _tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    return path


def deskbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`deskbench ARGS` (conftest.run_cli: in this process, as `python -m deskbench.cli` would run
    it) with `env` added and this environment's provider keys, URLs and capability file removed."""
    unset: dict[str, str | None] = {k: None for k in os.environ
                                    if k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "DESKBENCH_CAPABILITIES"))}
    return run_cli(*args, env=cast("dict[str, str]", {**unset, **env}))  # None: unset (click's isolation)


# --- acceptance: a run and a judged score, end to end --------------------------------------------

def test_gpt5_mini_run_and_judged_score_pass_the_reasoning_model_rules(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path)
    with SimOpenAI(profile="openai", script=agent_and_judge(FAULTS)) as sim:
        env = {"OPENAI_BASE_URL": sim.base_url, "OPENAI_API_KEY": "sk-test", "DESKBENCH_CACHE_DIR": str(tmp_path / "cache")}
        proc = deskbench("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", "bm25-agent",
                         "--model", "openai/gpt-5-mini", "--judge", "openai/gpt-5-mini", "--out", str(tmp_path / "run"),
                         "--concurrency", "2", "--json", "--quiet", "--preset", "paper", env=env)  # provide_answer replies
        assert proc.returncode == 0, proc.stderr
        rescored = deskbench("score", str(tmp_path / "run"), "--judge", "openai/gpt-5-mini", "--judge-cache",
                             str(tmp_path / "fresh.sqlite"), "--json", env=env)
        assert rescored.returncode == 0, rescored.stderr
        page = deskbench("report", str(tmp_path / "run"), "--output", str(tmp_path / "report.html"), "--judge",
                         "openai/gpt-5-mini", "--judge-reasoning-effort", "low", env=env)
        assert page.returncode == 0, page.stderr
        other = deskbench("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--model",
                          "openai/gpt-5-mini", "--max-tokens", "900", "--out", str(tmp_path / "run"), "--quiet",
                          "--preset", "paper", env=env)
    assert sim.refused == [], sim.refused[:1]
    (report,) = json.loads(proc.stdout).values()  # {system: report}
    assert report["n"] == 4 and report["n_errors"] == 0 and report["n_unscored"] == 0 and report["accuracy"] == 1.0
    (rescored_report,) = json.loads(rescored.stdout).values()
    assert rescored_report["n_unscored"] == 0
    episodes = RunStore(tmp_path / "run").episodes()
    assert [e.status for e in episodes] == ["ok"] * 4
    bodies = sim.accepted
    assert not any("max_tokens" in b or "temperature" in b or "top_p" in b for b in bodies)  # the official agents send neither
    assert sum("submit_judgment" in _tool_names(b) for b in bodies) >= 8  # two scorings, four items each
    assert "gpt-5-mini settings: temperature=default, top_p=default, reasoning_effort=default, " \
           "max_completion_tokens=default" in proc.stderr
    html = (tmp_path / "report.html").read_text()
    assert "Model settings" in html and "bm25-agent:openai/gpt-5-mini" in html
    assert "reasoning_effort=low" in html and "not taken by this model: temperature=0.0" in html  # the judge's row
    assert other.returncode == 2 and "already holds a bm25-agent:openai/gpt-5-mini run with" in other.stderr
    assert "max_completion_tokens=900" in other.stderr  # a resume with other settings is refused, not mixed
    stored = RunStore(tmp_path / "run").meta("model_settings")
    assert isinstance(stored, dict) and stored["bm25-agent:openai/gpt-5-mini"]["output_limit_field"] == "max_completion_tokens"


def test_gpt5_mini_settings_go_out_under_the_fields_it_takes(tmp_path: Path) -> None:
    from deskbench.models.openai_chat import OpenAIChat
    with SimOpenAI(profile="openai") as sim:
        model = ResilientModel(OpenAIChat("gpt-5-mini", base_url=sim.base_url, api_key="sk-test"), policy=FAST,
                               settings=resolve("openai/gpt-5-mini", Sampling(max_tokens=300, reasoning_effort="low")))
        run(model.complete(ChatRequest(messages=[Message(role="user", content="hi")])))
    assert sim.refused == []
    assert sim.accepted[0]["max_completion_tokens"] == 300 and sim.accepted[0]["reasoning_effort"] == "low"
    # What the model refuses never leaves: one line naming the flag, before any call.
    with pytest.raises(UserError, match=r"--temperature 0.0: openai/gpt-5-mini does not accept a temperature"):
        resolve("openai/gpt-5-mini", Sampling(temperature=0.0))
    with pytest.raises(UserError, match=r"--judge-reasoning-effort minimal: openai/o3 takes a reasoning effort of low"):
        resolve("openai/o3", Sampling(reasoning_effort="minimal"), "judge")
    assert resolve("openai/gpt-5-mini", Sampling(), "judge").dropped == ["temperature=0.0"]  # a judge preference, dropped
    assert resolve("openai/gpt-4.1", Sampling(), "judge").sent.temperature == 0.0  # ... kept where it is taken


def test_claude_run_and_judged_score_pass_the_messages_api_rules(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path)
    faults = {**FAULTS, 4: {"kind": "status", "status": 529}}
    with SimAnthropic(script=agent_and_judge(faults)) as sim:
        env = {"ANTHROPIC_BASE_URL": sim.base_url, "ANTHROPIC_API_KEY": "sk-ant-test",
               "DESKBENCH_CACHE_DIR": str(tmp_path / "cache")}
        proc = deskbench("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", "bm25-agent",
                         "--model", "anthropic/claude-sonnet-4-5", "--judge", "anthropic/claude-sonnet-4-5",
                         "--out", str(tmp_path / "run"), "--concurrency", "2", "--json", "--quiet", env=env)
    assert proc.returncode == 0, proc.stderr
    assert sim.refused == [], sim.refused[:1]
    (report,) = json.loads(proc.stdout).values()  # {system: report}
    assert report["n"] == 4 and report["n_errors"] == 0 and report["n_unscored"] == 0 and report["accuracy"] == 1.0
    assert all(b["max_tokens"] == 4096 for b in sim.accepted)  # required; the official MADQA agent's value
    judged = [b for b in sim.accepted if "submit_judgment" in _tool_names(b)]
    assert len(judged) == 4
    assert not any("temperature" in b for b in sim.accepted)  # refused by the API version the SDK speaks
    agent = [b for b in sim.accepted if "submit_judgment" not in _tool_names(b)]
    last_user = [m for m in agent[-1]["messages"] if m["role"] == "user"][-1]["content"]
    kinds = [b["type"] for b in last_user]
    assert kinds[0] == "tool_result" and "image" in kinds  # pages as images, after the tool results


# --- Anthropic Messages rules, adapter by adapter --------------------------------------------------

def claude(sim: SimAnthropic, name: str = "claude-sonnet-4-5", **settings: Any) -> ResilientModel:
    # imported here: the SDK takes 2-3 s, paid only by the tests that call it, not by every collection
    from deskbench.models.anthropic_chat import AnthropicChat

    return ResilientModel(AnthropicChat(name, base_url=sim.base_url, api_key="sk-ant-test"), policy=FAST,
                          settings=resolve(f"anthropic/{name}", Sampling(**settings)))


def test_anthropic_turns_alternate_and_every_tool_use_is_answered() -> None:
    calls = [ToolCall(id="toolu_1", name="search_documents", arguments='{"query": "a"}'),
             ToolCall(id="toolu_2", name="search_documents", arguments='{"query": "b"}')]
    history = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Question?"),
        Message(role="user", content="(a second user turn)"),
        Message(role="assistant", content="", tool_calls=calls),
        Message(role="tool", tool_call_id="toolu_1", content="page text"),  # toolu_2 left unanswered by the agent
        Message(role="user", content=[TextPart(text="file: alpha.pdf page: 1"), ImagePart.of(png(64))]),
        Message(role="assistant", content=""),  # an empty reply: an empty turn is refused
        Message(role="user", content="Answer now."),
    ]
    with SimAnthropic() as sim:
        run(claude(sim).complete(ChatRequest(messages=history, tools=[SEARCH, ANSWER], tool_choice="provide_answer")))
    assert sim.refused == [], sim.refused[:1]
    sent = sim.accepted[0]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    results = sent["messages"][2]["content"]
    assert [b["type"] for b in results[:2]] == ["tool_result", "tool_result"]  # first, both ids
    assert {b["tool_use_id"] for b in results[:2]} == {"toolu_1", "toolu_2"}
    assert sent["tool_choice"] == {"type": "tool", "name": "provide_answer"} and sent["system"] == "Be brief."


def test_anthropic_images_are_downscaled_and_counted_never_refused() -> None:
    big = png(1700, noise=True)  # ~8.7 MB of noise: over the 5 MB limit
    assert len(base64.b64encode(big)) > 5 * 1024 * 1024
    with SimAnthropic() as sim:
        model = claude(sim)
        run(model.complete(ChatRequest(messages=[Message(role="user", content=[TextPart(text="look"), ImagePart.of(big)])])))
        many = [ImagePart.of(png(2400, seed=i)) for i in range(25)]  # over 20 images: 2000 px a side at most
        run(model.complete(ChatRequest(messages=[Message(role="user", content=[TextPart(text="look"), *many])])))
        lots = [ImagePart.of(png(40, seed=i)) for i in range(105)]  # over the 100-image limit
        run(model.complete(ChatRequest(messages=[Message(role="user", content=[TextPart(text="look"), *lots])])))
    assert sim.refused == [], sim.refused[:1]
    # Each request found by what it carries, not by its place in the log: a retried try would
    # shift every index after it (a slow machine once timed out and re-sent the 25 images).
    def images(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [b for b in body["messages"][0]["content"] if b["type"] == "image"]

    def sent(n: int) -> dict[str, Any]:
        bodies = [b for b in sim.accepted if len(images(b)) == n]
        assert bodies, f"no accepted request with {n} images: {[len(images(b)) for b in sim.accepted]}"
        return bodies[0]

    (first,) = images(sent(1))
    assert len(first["source"]["data"]) <= 5 * 1024 * 1024
    sides = [max(Image.open(io.BytesIO(base64.b64decode(b["source"]["data"]))).size) for b in images(sent(25))]
    assert len(sides) == 25 and max(sides) <= 2000
    blocks = sent(100)["messages"][0]["content"]  # 105 given: the oldest 5 dropped for a line of text
    assert any(b["type"] == "text" and "image omitted" in b["text"] for b in blocks)


def test_anthropic_sampling_and_structured_output() -> None:
    with SimAnthropic(script=lambda b, n: tool("respond", {"a": "b"})) as sim:
        model = claude(sim, max_tokens=512)
        reply = run(model.complete(ChatRequest(messages=[Message(role="user", content="JSON please")],
                                               response_schema={"type": "object", "properties": {"a": {"type": "string"}}})))
    assert sim.refused == []
    body = sim.accepted[0]
    assert body["max_tokens"] == 512 and "temperature" not in body and "top_p" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "respond"}
    assert isinstance(json.loads(reply.message.text()), dict)
    # API version 2026-10-21, which the SDK sends, removed the sampling fields.
    with pytest.raises(UserError, match="--temperature 0.2: anthropic/claude-sonnet-4-5 does not accept a temperature"):
        resolve("anthropic/claude-sonnet-4-5", Sampling(temperature=0.2))
    with pytest.raises(UserError, match="--judge-top-p 0.9: anthropic/claude-haiku-4-5 does not accept top_p"):
        resolve("anthropic/claude-haiku-4-5", Sampling(top_p=0.9), "judge")
    with pytest.raises(UserError, match="writes at most 32000 output tokens"):
        resolve("anthropic/claude-opus-4-1", Sampling(max_tokens=64000))


# --- OpenAI Chat Completions rules ------------------------------------------------------------------

def gpt(sim: SimOpenAI, name: str, **settings: Any) -> ResilientModel:
    from deskbench.models.openai_chat import OpenAIChat
    return ResilientModel(OpenAIChat(name, base_url=sim.base_url, api_key="sk-test"), policy=FAST,
                          settings=resolve(f"openai/{name}", Sampling(**settings)))


@pytest.mark.parametrize("choice", ["auto", "none", "required", "provide_answer"])
def test_openai_tool_choice_forms(choice: str) -> None:
    with SimOpenAI(profile="openai", script=lambda b, n: tool("provide_answer", {"answer": ["x"]})) as sim:
        run(gpt(sim, "gpt-4.1").complete(ChatRequest(messages=[Message(role="user", content="q")],
                                                     tools=[SEARCH, ANSWER], tool_choice=choice)))
    assert sim.refused == [], sim.refused[:1]
    expected = {"type": "function", "function": {"name": "provide_answer"}} if choice == "provide_answer" else choice
    assert sim.accepted[0]["tool_choice"] == expected


def test_openai_json_schema_images_and_tool_turns_pass() -> None:
    image = ImagePart.of(png(64))
    calls = [ToolCall(id="call_1", name="search_documents", arguments='{"query": "a"}')]
    history = [Message(role="system", content="s"), Message(role="user", content=[TextPart(text="q"), image]),
               Message(role="assistant", content="", tool_calls=calls),
               Message(role="tool", tool_call_id="call_1", content="results")]
    with SimOpenAI(profile="openai", script=lambda b, n: {"kind": "text", "text": '{"a": "b"}'}) as sim:
        run(gpt(sim, "gpt-5-mini").complete(ChatRequest(messages=history, response_schema={"type": "object"})))
        run(gpt(sim, "gpt-4o").complete(ChatRequest(messages=history, tools=[SEARCH], tool_choice="auto")))
    assert sim.refused == [], sim.refused[:1]
    body = sim.accepted[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert body["messages"][2]["content"] is None  # OpenAI's own form for a tool-call turn


def test_text_only_models_get_text_pages_or_a_clear_refusal(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path)
    with SimOpenAI(profile="openai", script=agent_and_judge({})) as sim:
        env = {"OPENAI_BASE_URL": sim.base_url, "OPENAI_API_KEY": "sk-test"}
        base = ["run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--model", "openai/gpt-3.5-turbo",
                "--limit", "1", "--quiet", "--preset", "paper"]
        forced = deskbench(*base, "--view", "image", "--out", str(tmp_path / "forced"), env=env)
        assert forced.returncode == 2 and not (tmp_path / "forced").exists()
        assert forced.stderr.strip().count("\n") == 0 and "reads text only" in forced.stderr
        auto = deskbench(*base, "--out", str(tmp_path / "auto"), env=env)
    assert auto.returncode == 0, auto.stderr
    assert "reads text only: pages are shown as text" in auto.stderr
    assert sim.refused == [] and not any(p.get("type") == "image_url" for b in sim.accepted for m in b["messages"]
                                         if isinstance(m["content"], list) for p in m["content"])


# --- Gemini's OpenAI-compatible endpoint and the local servers ------------------------------------

def test_gemini_through_its_openai_compatible_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    with SimOpenAI(profile="gemini", script=lambda b, n: tool("provide_answer", {"answer": ["x"]})) as sim:
        monkeypatch.setenv("GEMINI_BASE_URL", sim.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", "sk-test")
        model = open_model("gemini/gemini-2.5-flash", sampling=Sampling(reasoning_effort="low", max_tokens=800))
        run(model.complete(ChatRequest(messages=[Message(role="user", content=[TextPart(text="q"), ImagePart.of(png(32))])],
                                       tools=[SEARCH, ANSWER], tool_choice="provide_answer", seed=7)))
        judge = open_model("gemini/gemini-2.5-flash", role="judge")
        run(judge.complete(ChatRequest(messages=[Message(role="user", content="json")], response_schema={"type": "object"})))
    assert sim.refused == [], sim.refused[:1]
    assert sim.accepted[0]["reasoning_effort"] == "low" and sim.accepted[0]["max_tokens"] == 800
    assert "seed" not in sim.accepted[0]  # not among the compatibility layer's documented parameters
    assert sim.accepted[1]["temperature"] == 0.0
    with pytest.raises(UserError, match="gemini-2.5-pro takes a reasoning effort of low"):
        resolve("gemini/gemini-2.5-pro", Sampling(reasoning_effort="none"))


def test_ollama_cannot_force_a_tool_so_it_gets_that_tool_alone() -> None:
    with SimOpenAI(profile="ollama", script=lambda b, n: tool("provide_answer", {"answer": ["x"]})) as sim:
        model = ResilientModel(make_model(f"ollama/llama3.2@{sim.base_url}"), policy=FAST)
        run(model.complete(ChatRequest(messages=[Message(role="user", content="q")], tools=[SEARCH, ANSWER],
                                       tool_choice="provide_answer")))
    assert sim.refused == [] and sim.ignored == []
    assert [t["function"]["name"] for t in sim.accepted[0]["tools"]] == ["provide_answer"]
    assert "tool_choice" not in sim.accepted[0]


def test_llamacpp_gets_empty_content_on_tool_call_turns() -> None:
    calls = [ToolCall(id="call_1", name="search_documents", arguments='{"query": "a"}')]
    history = [Message(role="user", content="q"), Message(role="assistant", content="", tool_calls=calls),
               Message(role="tool", tool_call_id="call_1", content="results")]
    with SimOpenAI(profile="llamacpp", server="llama-cpp-python", script=lambda b, n: {"kind": "text", "text": "{}"}) as sim:
        model = ResilientModel(make_model(f"llamacpp/smol@{sim.base_url}"), policy=FAST)
        run(model.complete(ChatRequest(messages=history, tools=[SEARCH], tool_choice="auto")))
        run(model.complete(ChatRequest(messages=history[:1], response_schema={"type": "object"})))
    assert sim.refused == [], sim.refused[:1]
    assert sim.accepted[0]["messages"][1]["content"] == ""


def test_vllm_without_auto_tool_choice_stops_the_run_with_the_servers_words() -> None:
    with SimOpenAI(profile="vllm") as sim:
        model = ResilientModel(make_model(f"vllm/Qwen/Qwen2.5-7B-Instruct@{sim.base_url}"), policy=FAST)
        with pytest.raises(ProviderRefused, match="enable-auto-tool-choice"):
            run(model.complete(ChatRequest(messages=[Message(role="user", content="q")], tools=[SEARCH],
                                           tool_choice="auto")))
    assert len(sim.requests) == 1  # never retried


# --- a refusal that is the user's to fix stops the run --------------------------------------------

def test_unknown_model_stops_the_run_at_the_first_call(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path)
    with SimOpenAI(profile="openai", script=agent_and_judge({})) as sim:
        env = {"OPENAI_BASE_URL": sim.base_url, "OPENAI_API_KEY": "sk-test"}
        proc = deskbench("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--model",
                         "openai/gpt-9-imaginary", "--out", str(tmp_path / "run"), "--concurrency", "1", "--quiet", env=env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("openai/gpt-9-imaginary settings:")  # the settings, then the error
    assert "error: openai/gpt-9-imaginary refused the request (HTTP 404: The model `gpt-9-imaginary` does not exist" \
           in lines[1] and "check the model name in --model" in lines[1]
    assert len(sim.requests) == 1  # never retried, no other episode started
    assert RunStore(tmp_path / "run").episodes() == []  # nothing recorded: a later run starts clean


def test_a_wrong_capability_entry_gives_the_providers_400_and_the_flag(operator_corpus: Corpus, tmp_path: Path) -> None:
    """A user who told deskbench that gpt-5-mini takes a temperature gets OpenAI's own 400, once."""
    caps = tmp_path / "caps.toml"
    caps.write_text('[[rules]]\nprovider = "openai"\nmodel = "gpt-5-mini"\nset = { temperature = true }\n')
    tasks = _tasks_file(tmp_path)
    with SimOpenAI(profile="openai", script=agent_and_judge({})) as sim:
        env = {"OPENAI_BASE_URL": sim.base_url, "OPENAI_API_KEY": "sk-test"}
        proc = deskbench("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--model", "openai/gpt-5-mini",
                         "--temperature", "0", "--capabilities", str(caps), "--out", str(tmp_path / "run"),
                         "--concurrency", "3", "--quiet", env=env)
    assert proc.returncode == 2
    error = proc.stderr.strip().splitlines()[-1]
    assert "Unsupported value: 'temperature' does not support 0 with this model" in error
    assert "change or drop --temperature" in error and "Traceback" not in proc.stderr
    assert 1 <= len(sim.requests) <= 3 and len(sim.refused) == len(sim.requests)  # the episodes in flight, no retry
    assert RunStore(tmp_path / "run").episodes() == []


def test_bad_key_stops_with_the_variable_to_check(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path)
    with SimAnthropic() as sim:
        env = {"ANTHROPIC_BASE_URL": sim.base_url, "ANTHROPIC_API_KEY": "sk-ant-wrong"}
        proc = deskbench("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--model",
                         "anthropic/claude-haiku-4-5", "--out", str(tmp_path / "run"), "--concurrency", "1", "--quiet",
                         env=env)
    assert proc.returncode == 2 and "HTTP 401" in proc.stderr and "check the key in ANTHROPIC_API_KEY" in proc.stderr
    assert "sk-ant-wrong" not in proc.stderr and len(sim.requests) == 1


@pytest.mark.parametrize(("model", "variable"), [("openai/gpt-5-mini", "OPENAI_API_KEY"),
                                                 ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
                                                 ("gemini/gemini-2.5-flash", "GEMINI_API_KEY")])
def test_no_key_no_run_directory(model: str, variable: str, tmp_path: Path) -> None:
    from deskbench.corpus.ingest import open_or_create

    tasks = _tasks_file(tmp_path)
    open_or_create(tmp_path / "corpus").close()  # an empty corpus: a missing one is named before the key
    proc = deskbench("run", "--tasks", str(tasks), "--corpus", str(tmp_path / "corpus"), "--model", model,
                     "--out", str(tmp_path / "run"), env={})
    assert proc.returncode == 2 and not (tmp_path / "run").exists()
    assert proc.stderr.strip() == f"error: {model} needs an API key: set {variable} in the environment " \
                                  "(or run offline with --model local)"
    judge = deskbench("run", "--tasks", str(tasks), "--agent", "lexical", "--corpus", str(tmp_path / "none"),
                      "--judge", model, "--out", str(tmp_path / "run2"), env={})
    assert judge.returncode == 2 and variable in judge.stderr and not (tmp_path / "run2").exists()


# --- the capability table ----------------------------------------------------------------------------

def test_capability_table_rules_and_user_file(tmp_path: Path) -> None:
    assert capabilities("openai/gpt-5-mini").output_limit == "max_completion_tokens"
    assert not capabilities("openai/gpt-5-mini").temperature and capabilities("openai/gpt-5-chat-latest").temperature
    assert capabilities("openai/gpt-5.1").reasoning_effort == ["none", "low", "medium", "high"]
    assert capabilities("anthropic/claude-sonnet-4-5").max_tokens_required
    assert not capabilities("local/smollm2-135m-instruct").vision
    user = tmp_path / "caps.json"
    user.write_text(json.dumps({"rules": [{"provider": "openai-compat", "model": "qwen*-vl*",
                                           "set": {"vision": True, "reasoning_effort": ["low", "high"]}}]}))
    table = CapabilityRegistry.load(user)
    assert table.lookup("openai-compat", "qwen2.5-vl-7b").reasoning_effort == ["low", "high"]
    assert table.lookup("openai-compat", "llama3").reasoning_effort == []
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\nprovider = "openai"\nset = { temprature = false }\n')
    with pytest.raises(UserError, match=r"capability file .*bad.toml is unusable \(temprature: Extra inputs"):
        CapabilityRegistry.load(bad)


def test_preflight_names_the_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="openai/gpt-5-mini needs an API key: set OPENAI_API_KEY"):
        preflight("openai/gpt-5-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert preflight("openai/gpt-5-mini", Sampling(max_tokens=100)).sent.max_tokens == 100
