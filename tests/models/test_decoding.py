"""Decoding presets (`--decoding aida`, AIDABench Appendix E, Table 3) and top-k sampling
(`--sampling-top-k`): each model gets its row of the paper's table, its numbers go out under the
provider's own field where the provider takes them (the strict simulators check the wire), a value
a model does not take stays unset and is recorded, and the run keeps the preset's name and row."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, cast

import pytest
from conftest import run_cli
from sim_anthropic import SimAnthropic
from sim_gemini_native import SimGeminiNative
from sim_openai import SimOpenAI

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.models.capabilities import use_capabilities
from deskbench.models.decoding import presets, resolve_preset
from deskbench.models.registry import open_model
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.settings import Sampling, resolve
from deskbench.models.types import ChatRequest, Message, ProviderRefused
from deskbench.runs.store import RunStore

FAST = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02, timeout=120.0)
QUESTION = ChatRequest(messages=[Message(role="user", content="How many rows?")])

# Table 3 as printed in the paper (Appendix E): model, temperature, top-p, top-k; "–" is "unset".
TABLE_3 = [
    ("claude-sonnet-4-5", 0.0, "unset", "unset"),
    ("gemini-3-pro-preview", 1.0, 0.95, 40),
    ("qwen3-max-2026-01-23-thinking", 0.6, 0.95, 20),
    ("deepseek-v3.2-thinking", "unset", "unset", "unset"),
    ("deepseek-v3.2", 1.0, 1.0, "unset"),
    ("qwen3-max-2026-01-23", 0.7, 0.8, 20),
    ("kimi-k2-thinking", 1.0, "default", "default"),
    ("qwen3-235b-a22b-instruct-2507", 0.7, 0.8, 20),
    ("kimi-k2-turbo-preview", 0.6, "default", "default"),
    ("qwen3-30b-a3b-thinking-2507", 0.6, 0.95, 20),
    ("qwen3-30b-a3b-instruct-2507", 0.7, 0.8, 20),
]


@pytest.fixture(autouse=True)
def _builtin_capabilities() -> Any:
    use_capabilities(None)
    yield
    use_capabilities(None)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _caps_file(tmp_path: Path, provider: str) -> Path:
    """A user capability file that (wrongly) lets `provider` take top_k: the provider's own refusal
    is then what stops the call."""
    path = tmp_path / "caps.toml"
    path.write_text(f'[[rules]]\nprovider = "{provider}"\nmodel = "*"\nset = {{ top_k = true }}\n')
    return path


# --- the table ------------------------------------------------------------------------------------

def test_the_aida_preset_is_table_3_row_for_row() -> None:
    aida = presets()["aida"]
    assert "Appendix E, Table 3" in aida.source
    assert [(r.model, r.temperature, r.top_p, r.top_k) for r in aida.models] == TABLE_3


@pytest.mark.parametrize(("model_id", "row"), [
    ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("anthropic/claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("google/gemini-3-pro-preview", "gemini-3-pro-preview"),
    ("openai-compat/qwen3-max-2026-01-23", "qwen3-max-2026-01-23"),
    ("vllm/Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b-instruct-2507"),  # org prefix and case dropped
    ("openai-compat/kimi-k2-turbo-preview", "kimi-k2-turbo-preview"),
])
def test_a_model_gets_the_row_of_its_name(model_id: str, row: str) -> None:
    assert resolve_preset("aida", model_id).row.model == row


def test_a_model_the_table_does_not_cover_is_one_line_naming_the_rows() -> None:
    with pytest.raises(UserError) as caught:
        resolve("openai/gpt-5-mini", Sampling(decoding="aida"))
    text = str(caught.value)
    assert "\n" not in text and "openai/gpt-5-mini is not in its table" in text
    assert all(model in text for model, *_ in TABLE_3) and "--decoding aida:ROW" in text
    # a near name is not a match: the sonnet 4.5 row does not cover sonnet 4.6
    with pytest.raises(UserError, match="not in its table"):
        resolve_preset("aida", "anthropic/claude-sonnet-4-6")


def test_a_named_row_applies_whatever_the_model_is_called() -> None:
    s = resolve("openai-compat/deepseek-reasoner", Sampling(decoding="aida:deepseek-v3.2-thinking"))
    assert s.sent.given() == {} and s.sent.decoding == "aida:deepseek-v3.2-thinking"  # the row sets nothing
    s = resolve("vllm/my-finetune", Sampling(decoding="aida:qwen3-max-2026-01-23"))
    assert s.sent.given() == {"temperature": 0.7, "top_p": 0.8, "top_k": 20}
    with pytest.raises(UserError, match="aida has no row 'gpt-5'; its rows: claude-sonnet-4-5"):
        resolve("vllm/x", Sampling(decoding="aida:gpt-5"))
    with pytest.raises(UserError, match="--decoding madqa: no such preset; deskbench has aida"):
        resolve("vllm/x", Sampling(decoding="madqa"))


def test_a_sampling_flag_with_a_preset_is_refused() -> None:
    for asked, named in ((Sampling(decoding="aida", temperature=0.2), "--temperature"),
                         (Sampling(decoding="aida", top_k=5), "--sampling-top-k")):
        with pytest.raises(UserError, match=f"{named} with --decoding aida: the preset sets"):
            resolve("openai-compat/qwen3-max-2026-01-23", asked)
    # what the table does not set stays the user's
    s = resolve("openai-compat/qwen3-max-2026-01-23", Sampling(decoding="aida", max_tokens=900))
    assert s.sent.given() == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "max_tokens": 900}


def test_values_a_model_does_not_take_stay_unset_and_are_recorded() -> None:
    claude = resolve("anthropic/claude-sonnet-4-5", Sampling(decoding="aida"))
    assert claude.sent.temperature is None and claude.sent.max_tokens == 4096  # API 2026-10-21: no sampling
    assert claude.dropped == [claude.dropped[0]] and claude.dropped[0].startswith("temperature=0.0 (aida:claude-sonnet-4-5:")
    line = claude.describe()
    assert line.startswith("decoding=aida:claude-sonnet-4-5 (AIDABench, Appendix E, Table 3: temperature=0.0, ")
    assert "preset values not sent: temperature=0.0" in line
    compat = resolve("gemini/gemini-3-pro-preview", Sampling(decoding="aida"))  # the OpenAI-compatible endpoint
    assert compat.sent.given() == {"temperature": 1.0, "top_p": 0.95} and compat.dropped[0].startswith("top_k=40 ")
    native = resolve("google/gemini-3-pro-preview", Sampling(decoding="aida"))
    assert native.sent.given() == {"temperature": 1.0, "top_p": 0.95, "top_k": 40} and native.dropped == []


def test_top_k_is_refused_where_the_provider_has_none() -> None:
    for model_id in ("openai/gpt-4.1", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash", "mistral/mistral-small",
                     "ollama/llama3.2", "openai-compat/some-server-model"):
        with pytest.raises(UserError, match=f"--sampling-top-k 20: {model_id} does not accept top_k") as caught:
            resolve(model_id, Sampling(top_k=20))
        assert "\n" not in str(caught.value)
    for model_id in ("google/gemini-2.5-flash", "vllm/x", "llamacpp/x", "openai-compat/qwen3-max-2026-01-23"):
        assert resolve(model_id, Sampling(top_k=20)).sent.top_k == 20
    with pytest.raises(UserError, match="takes top_k of 1 or more"):
        resolve("vllm/x", Sampling(top_k=0))


def test_settings_stored_before_top_k_existed_still_compare_equal() -> None:
    """A run stored before top_k and decoding existed holds `sent` without them: a resume with the
    same flags must find the same settings (runs/settings.py compares the dumps)."""
    dumped = resolve("openai/gpt-4.1", Sampling(temperature=0.2)).model_dump(mode="json")
    assert dumped["sent"] == {"temperature": 0.2, "top_p": None, "reasoning_effort": None, "max_tokens": None}
    assert "top_k" not in ChatRequest(messages=[]).model_dump()  # request cache keys unchanged too


# --- on the wire ----------------------------------------------------------------------------------

def test_vllm_and_qwen_compatible_mode_get_the_rows_numbers_in_the_body() -> None:
    served = {"Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-max-2026-01-23"}
    with SimOpenAI(profile="vllm", models=served) as sim:
        for spec in (f"vllm/Qwen/Qwen3-30B-A3B-Instruct-2507@{sim.base_url}",
                     f"openai-compat/qwen3-max-2026-01-23@{sim.base_url}"):
            model = open_model(spec, sampling=Sampling(decoding="aida"))
            run(model.complete(QUESTION))
    assert sim.refused == [] and sim.ignored == []  # top_k is read by vLLM, not dropped
    assert [(b["temperature"], b["top_p"], b["top_k"]) for b in sim.accepted] == [(0.7, 0.8, 20), (0.7, 0.8, 20)]


def test_llamacpp_takes_top_k() -> None:
    with SimOpenAI(profile="llamacpp") as sim:
        model = open_model(f"llamacpp/any@{sim.base_url}", sampling=Sampling(top_k=7, temperature=0.3))
        run(model.complete(QUESTION))
    assert sim.refused == [] and sim.accepted[0]["top_k"] == 7 and sim.accepted[0]["temperature"] == 0.3


def test_gemini_native_sends_topk_in_generation_config(monkeypatch: pytest.MonkeyPatch) -> None:
    with SimGeminiNative() as sim:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", sim.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", sim.api_key)
        model = open_model("google/gemini-2.5-flash", sampling=Sampling(decoding="aida:gemini-3-pro-preview"))
        run(model.complete(QUESTION))
    assert sim.refused == [], sim.refused[:1]
    config = sim.accepted[0]["generationConfig"]
    assert (config["temperature"], config["topP"], config["topK"]) == (1.0, 0.95, 40)


def test_gemini_compatible_endpoint_never_gets_top_k(monkeypatch: pytest.MonkeyPatch) -> None:
    with SimOpenAI(profile="gemini", models={"gemini-2.5-flash"}) as sim:
        monkeypatch.setenv("GEMINI_BASE_URL", sim.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", "sk-test")
        model = open_model("gemini/gemini-2.5-flash", sampling=Sampling(decoding="aida:gemini-3-pro-preview"))
        run(model.complete(QUESTION))
    assert sim.refused == [] and "top_k" not in sim.accepted[0] and sim.accepted[0]["top_p"] == 0.95
    assert model.settings is not None and model.settings.dropped[0].startswith("top_k=40 (aida:gemini-3-pro-preview:")


def test_claude_under_the_preset_sends_no_sampling_field() -> None:
    from deskbench.models.anthropic_chat import AnthropicChat

    with SimAnthropic() as sim:
        settings = resolve("anthropic/claude-sonnet-4-5", Sampling(decoding="aida"))
        model = ResilientModel(AnthropicChat("claude-sonnet-4-5", base_url=sim.base_url, api_key=sim.api_key),
                               policy=FAST, settings=settings)
        run(model.complete(QUESTION))
    assert sim.refused == [], sim.refused[:1]
    assert not {"temperature", "top_p", "top_k"} & set(sim.accepted[0])


def test_where_the_table_is_wrong_the_providers_refusal_names_the_flag(tmp_path: Path) -> None:
    """A capability file that lets OpenAI or Anthropic take top_k: the real APIs refuse the field
    (the simulators answer as they do) and the run stops with one line naming --sampling-top-k."""
    from deskbench.models.anthropic_chat import AnthropicChat
    from deskbench.models.openai_chat import OpenAIChat

    use_capabilities(_caps_file(tmp_path, "openai"))
    with SimOpenAI(profile="openai") as sim:
        model = ResilientModel(OpenAIChat("gpt-4.1", base_url=sim.base_url, api_key="sk-test"), policy=FAST,
                               settings=resolve("openai/gpt-4.1", Sampling(top_k=20)))
        with pytest.raises(ProviderRefused) as openai_refusal:
            run(model.complete(QUESTION))
    assert "Unrecognized request argument supplied: top_k" in str(openai_refusal.value)
    assert "--sampling-top-k" in str(openai_refusal.value)
    use_capabilities(_caps_file(tmp_path, "anthropic"))
    with SimAnthropic() as sim:
        model = ResilientModel(AnthropicChat("claude-sonnet-4-5", base_url=sim.base_url, api_key=sim.api_key),
                               policy=FAST, settings=resolve("anthropic/claude-sonnet-4-5", Sampling(top_k=20)))
        with pytest.raises(ProviderRefused) as anthropic_refusal:
            run(model.complete(QUESTION))
    assert "top_k" in str(anthropic_refusal.value) and "--sampling-top-k" in str(anthropic_refusal.value)
    assert [r["rule"] for r in sim.refused] == ["extra_fields"]


# --- the run records the preset -------------------------------------------------------------------

def _answering(body: dict[str, Any], n: int) -> dict[str, Any]:
    names = {t["function"]["name"] for t in body.get("tools") or []}
    name = "provide_answer" if "provide_answer" in names else sorted(names)[0] if names else ""
    if not name:
        return {"kind": "text", "text": "Mountain car"}
    args = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]} if name == "provide_answer" \
        else {"query": "winter rental rates"}
    return {"kind": "tool", "name": name, "arguments": json.dumps(args)}


def test_a_run_under_a_preset_records_its_name_and_row(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q1", "question": "Which vehicle rental rates are given for the winter season?",
                                 "answer_variants": [["Mountain car"]],
                                 "evidence": [{"document": "alpha.pdf", "page": 1}]}) + "\n")
    unset = {k: None for k in os.environ if k.startswith(("OPENAI_", "DESKBENCH_CAPABILITIES"))}
    env = cast("dict[str, str]", {**unset, "DESKBENCH_CACHE_DIR": str(tmp_path / "cache")})
    with SimOpenAI(profile="vllm", models={"Qwen/Qwen3-30B-A3B-Instruct-2507"}, auto_tool_choice=True,
                   script=_answering) as sim:
        model = f"vllm/Qwen/Qwen3-30B-A3B-Instruct-2507@{sim.base_url}"
        base = ["run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", "bm25-agent",
                "--model", model, "--quiet", "--preset", "paper", "--out"]
        proc = run_cli(*base, str(tmp_path / "run"), "--decoding", "aida", env=env)
        assert proc.returncode == 0, proc.stderr
        assert "decoding=aida:qwen3-30b-a3b-instruct-2507 (AIDABench, Appendix E, Table 3: temperature=0.7" in proc.stderr
        other = run_cli(*base, str(tmp_path / "run"), "--temperature", "0.7", "--top-p", "0.8", "--sampling-top-k", "20",
                        env=env)
        bogus = run_cli(*base, str(tmp_path / "bogus"), "--decoding", "aida2", env=env)
        mixed = run_cli(*base, str(tmp_path / "mixed"), "--decoding", "aida", "--top-p", "0.5", env=env)
    assert sim.refused == [] and sim.ignored == [] and sim.accepted
    assert all((b["temperature"], b["top_p"], b["top_k"]) == (0.7, 0.8, 20) for b in sim.accepted)
    stored = RunStore(tmp_path / "run").meta("model_settings")
    assert isinstance(stored, dict)
    (settings,) = stored.values()
    assert settings["sent"]["decoding"] == "aida:qwen3-30b-a3b-instruct-2507" and settings["sent"]["top_k"] == 20
    assert settings["decoding_row"] == "temperature=0.7, top_p=0.8, top_k=20"
    info = run_cli("info", str(tmp_path / "run"), env=env)
    assert info.returncode == 0 and "model decoding=aida:qwen3-30b-a3b-instruct-2507" in info.stdout
    # the same numbers without the preset are another configuration: not resumed into this run
    assert other.returncode == 2 and "already holds" in other.stderr
    assert bogus.returncode == 2 and bogus.stderr.strip().count("\n") == 0 and "no such preset" in bogus.stderr
    assert not (tmp_path / "bogus").exists()
    assert mixed.returncode == 2 and "--top-p with --decoding aida" in mixed.stderr
    assert not (tmp_path / "mixed").exists()  # refused before the run directory is made
    page = run_cli("report", str(tmp_path / "run"), "--output", str(tmp_path / "report.html"), env=env)
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "report.html").read_text()
    assert "decoding=aida:qwen3-30b-a3b-instruct-2507" in html and "top_k=20" in html
