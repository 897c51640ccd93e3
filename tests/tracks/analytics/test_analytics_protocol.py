"""The analytics agent's protocol: the paper's Listing 1 setting by default; the two deskbench
additions (--last-round-note, --cjk-font-hint) only when asked, as other systems of the run, with
the protocol kept per system and a resume under another protocol refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.agents.code_loop import (
    CJK_FONT_HINT,
    EXECUTE_CODE_DESCRIPTION,
    AnalystSettings,
    execute_tool,
)
from deskbench.models.settings import Sampling, resolve
from deskbench.runs.protocol import ProtocolNote, all_paper, stored_protocol
from deskbench.runs.store import RunStore
from deskbench.tracks.analytics.generate.tasks import generate_analytics
from deskbench.tracks.analytics.run import (
    AnalyticsRunSpec,
    analytics_run_protocol,
    analytics_system,
)
from deskbench.tracks.analytics.tasks import read_tasks


@pytest.fixture(scope="module")
def one_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("analytics")
    generate_analytics(out, tasks=11, seed=5)
    qa = next(t for t in read_tasks(out / "tasks.jsonl").items if t.category == "qa")
    path = out / "one.jsonl"
    path.write_text(qa.model_dump_json() + "\n", encoding="utf-8")
    return path


def _never_answers(body: dict[str, Any], n: int) -> dict[str, Any]:
    return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": "print(1)"})}


def _run(tasks: Path, out: Path, fake: FakeOpenAI, *extra: str):
    return run_cli("run", "--agent", "analyst-agent", "--tasks", str(tasks), "--out", str(out),
                   "--model", f"openai-compat/scripted@{fake.base_url}", "--concurrency", "1", "--quiet",
                   "--json", "--max-rounds", "2", "--no-summary", *extra)


def test_defaults_are_the_papers() -> None:
    assert AnalystSettings().last_round_note is False and AnalystSettings().cjk_font_hint is False
    assert "CJK" not in execute_tool(False).description
    assert execute_tool(True).description == EXECUTE_CODE_DESCRIPTION + CJK_FONT_HINT
    spec = AnalyticsRunSpec(agent="analyst-agent", model="m", out=Path("o"), tasks_file=Path("t"))
    assert all_paper(analytics_run_protocol(spec))
    assert analytics_system(spec, "m") == "analyst-agent:m"
    both = AnalyticsRunSpec(agent="analyst-agent", model="m", out=Path("o"), tasks_file=Path("t"),
                            summary=False, last_round_note=True, cjk_font_hint=True)
    assert analytics_system(both, "m") == "analyst-agent[no-summary,last-round-note,cjk-font-hint]:m"
    notes = {n.aspect: n for n in analytics_run_protocol(both)}
    assert notes["round-limit note"].source == "deskbench" and "--last-round-note" in notes["round-limit note"].detail
    assert notes["CJK font hint"].source == "deskbench" and notes["auxiliary summary"].source == "paper"


def test_decoding_is_the_papers_only_under_table_3() -> None:
    """Appendix E, Table 3 sets decoding per model: `--decoding aida` is the paper's; provider defaults,
    hand-set values, or a row value the model cannot take (Claude under API version 2026-10-21) are not."""
    spec = AnalyticsRunSpec(agent="analyst-agent", model="m", out=Path("o"), tasks_file=Path("t"))

    def note(model: str, sampling: Sampling) -> ProtocolNote:
        (found,) = [n for n in analytics_run_protocol(spec, True, resolve(model, sampling)) if n.aspect == "decoding"]
        return found

    qwen = note("openai-compat/qwen3-max-2026-01-23", Sampling(decoding="aida"))
    assert qwen.source == "paper" and qwen.detail == ("Table 3 row qwen3-max-2026-01-23: temperature=0.7, top_p=0.8, "
                                                      "top_k=20 (--decoding aida)")
    claude = note("anthropic/claude-sonnet-4-5", Sampling(decoding="aida"))
    assert claude.source == "deskbench" and "not sent: temperature=0.0" in claude.detail
    assert note("openai-compat/qwen3-max-2026-01-23", Sampling()).detail.startswith("the provider defaults, not Table 3")
    assert note("vllm/x", Sampling(temperature=0.7, top_k=20)).detail.startswith("temperature=0.7, top_k=20, not Table 3")


def test_flags_change_what_the_model_reads_and_are_kept_per_system(bwrap: str, one_task: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAI(script=_never_answers) as fake:
        proc = _run(one_task, out, fake)
        assert proc.returncode == 0, proc.stderr
        plain = fake.requests[-1]
    with FakeOpenAI(script=_never_answers) as fake:
        proc = _run(one_task, out, fake, "--last-round-note", "--cjk-font-hint")
        assert proc.returncode == 0, proc.stderr
        flagged = fake.requests[-1]

    def last_tool_output(body: dict[str, Any]) -> str:
        return [m["content"] for m in body["messages"] if m["role"] == "tool"][-1]

    def description(body: dict[str, Any]) -> str:
        return body["tools"][0]["function"]["description"]

    assert "round limit" not in last_tool_output(plain) and "CJK" not in description(plain)
    assert "round limit" in last_tool_output(flagged) and "Noto Sans CJK" in description(flagged)
    protocol = stored_protocol(RunStore(out, create=False))
    plain_name = "analyst-agent[no-summary]:openai-compat/scripted"
    flagged_name = "analyst-agent[no-summary,last-round-note,cjk-font-hint]:openai-compat/scripted"
    assert set(protocol) == {plain_name, flagged_name}  # two variants, one run
    # --max-rounds 2 is not the paper's budget, nor provider defaults its decoding: said so, whatever the flags
    assert {n.aspect for n in protocol[plain_name] if n.source == "deskbench"} == {"round budget", "decoding"}
    assert {n.aspect for n in protocol[flagged_name] if n.source == "deskbench"} == {
        "round budget", "round-limit note", "CJK font hint", "decoding"}
    # score and report say it, per system: how it was run, then how it was scored
    scored = json.loads(run_cli("score", str(out), "--json").stdout)
    flagged_notes = {n["aspect"]: n["source"] for n in scored[flagged_name]["protocol"]}
    assert flagged_notes["round-limit note"] == "deskbench" and flagged_notes["qa evaluator"] == "deskbench"
    assert {n["aspect"]: n["source"] for n in scored[plain_name]["protocol"]}["round-limit note"] == "paper"
    text = run_cli("score", str(out), "--system", flagged_name).stdout
    assert "round-limit note: deskbench" in " ".join(text.split())
    html = tmp_path / "report.html"
    assert run_cli("report", str(out), "--output", str(html)).returncode == 0
    page = html.read_text(encoding="utf-8")
    section = page[page.index('id="analytics-protocol"'):]
    assert "round-limit note: <strong>deskbench</strong>" in section and "CJK font hint" in section
    # the same system resumed under another protocol (another budget) is refused, naming both
    with FakeOpenAI(script=_never_answers) as fake:
        proc = run_cli("run", "--agent", "analyst-agent", "--tasks", str(one_task), "--out", str(out),
                       "--model", f"openai-compat/scripted@{fake.base_url}", "--quiet", "--json",
                       "--max-rounds", "3", "--no-summary")
        assert fake.requests == []
    assert proc.returncode == 2 and "already holds" in proc.stderr and "--max-rounds" in proc.stderr


def test_flags_are_refused_outside_analytics(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(json.dumps({"id": "q1", "question": "Which year?", "answer_variants": ["2020"]}) + "\n")
    proc = run_cli("run", "--agent", "guess", "--tasks", str(tmp_path / "t.jsonl"), "--out", str(tmp_path / "r"),
                   "--last-round-note")
    assert proc.returncode == 2 and "--last-round-note is not an option of the docqa track" in proc.stderr
