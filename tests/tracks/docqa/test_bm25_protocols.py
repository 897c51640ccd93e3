"""bm25-agent's presets and protocols: which loop a run gets, with which T and k, and where each
value comes from (tracks/docqa/agents/bm25_protocols/registry.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from deskbench.errors import UserError
from deskbench.tracks.docqa.agents.bm25_protocols.registry import (
    OFFICIAL_FOR_PROVIDER,
    PROTOCOLS,
    choose,
)


def test_the_default_is_the_official_preset_with_the_providers_script() -> None:
    c = choose("openai")
    assert (c.protocol, c.max_steps, c.top_k, c.warning) == ("openai_agent.py", 5, 4, None)
    assert c.protocol_source.endswith("baselines/bm25-mllm-agent/openai_agent.py")
    assert "process_dataset.py" in c.sources["max_steps"] and "--top-k 4" in c.sources["top_k"]


def test_the_paper_preset_is_prompt_5_with_t10_k5() -> None:
    c = choose("openai", preset="paper")
    assert (c.protocol, c.max_steps, c.top_k) == ("paper", 10, 5)
    assert "G.1" in c.sources["max_steps"] and "G.1" in c.sources["top_k"]


def test_a_value_is_sourced_by_what_it_is_not_by_the_flag() -> None:
    """--max-steps 10 under the official preset is the paper's T; --top-k 7 is neither source's."""
    c = choose("openai", max_steps=10, top_k=7)
    assert (c.protocol, c.max_steps, c.top_k) == ("openai_agent.py", 10, 7)
    assert c.sources["max_steps"].startswith("preset paper") and c.sources["top_k"] == "--top-k (neither preset's)"
    assert choose("openai", max_steps=5) == choose("openai")  # the same configuration, resumable


def test_a_provider_no_script_drives_falls_back_by_default_and_is_refused_when_asked() -> None:
    c = choose("scripted")
    assert c.protocol == "paper" and (c.max_steps, c.top_k) == (10, 5)
    assert c.warning is not None and "scripted" in c.warning and "--protocol" in c.warning
    for kwargs in ({"preset": "official"}, {"protocol_name": "official"}):
        with pytest.raises(UserError) as refused:
            choose("scripted", **kwargs)  # type: ignore[arg-type]
        line = str(refused.value)
        assert "\n" not in line and "--preset paper" in line and "openai (openai_agent.py)" in line
    assert choose("scripted", protocol_name="openai_agent.py").protocol == "openai_agent.py"  # named: any OpenAI-wire model


def test_unknown_names_are_one_line_naming_the_choices() -> None:
    with pytest.raises(UserError, match=r"--preset 'fast' is not known; choose one of: official, paper"):
        choose("openai", preset="fast")
    with pytest.raises(UserError) as refused:
        choose("openai", protocol_name="nope.py")
    assert "official, paper" in str(refused.value) and "openai_agent.py" in str(refused.value)


def test_every_official_mapping_names_a_registered_protocol() -> None:
    assert set(OFFICIAL_FOR_PROVIDER.values()) <= set(PROTOCOLS)


def test_the_flags_belong_to_bm25_agent(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"id": "1", "question": "q?", "answer_variants": [["a"]]}) + "\n")
    proc = run_cli("run", "--tasks", str(tasks), "--agent", "guess", "--model", "scripted:none.jsonl",
                   "--protocol", "paper", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "--protocol chooses bm25-agent's loop" in proc.stderr and not (tmp_path / "r").exists()
