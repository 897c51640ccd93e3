"""Costs: an unknown price is unknown ("?", null), never $0.0000; sums with one unknown cost are
unknown; a model priced at 0 costs a known $0; the price table states its date.

Models named `openai-compat/NAME@URL` have no built-in price, so a run with one has an unknown
cost (the FakeOpenAI server answers for them); a --prices file prices one at 0."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.errors import UserError
from deskbench.generate.demo import bundled_dir
from deskbench.models.prices import BUILTIN, PRICES_AS_OF, PriceTable, format_cost, total_cost
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.types import ChatRequest, Message, Usage
from deskbench.report.data import build_report
from deskbench.report.render import render_html
from deskbench.runs.runner import RunCounts
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import Citation, ModelCallStep
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, load_packages
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, Evidence

UNPRICED = "openai-compat/unpriced"
FREE = "openai-compat/free"
OLD_UNKNOWN = {"calls": 2, "input_tokens": 100, "output_tokens": 10, "seconds": 1.5,
               "cost_usd": 0.0, "cost_known": False}  # how an unknown cost was stored before


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def wide_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with tables 250 columns wide, so that no cell wraps onto a second line."""
    return subprocess.run([sys.executable, "-m", "deskbench.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "250"})


# -- the Usage model -----------------------------------------------------------------------------


def test_usage_unknown_is_none_and_sums_with_it_are_unknown() -> None:
    known, free, unknown = Usage(cost_usd=0.25), Usage(cost_usd=0.0), Usage(cost_usd=None)
    assert unknown.cost_usd is None and not unknown.cost_known
    assert free.cost_usd == 0.0 and free.cost_known  # priced at 0: a known $0
    assert (known + free).cost_usd == pytest.approx(0.25) and (known + free).cost_known
    for total in (known + unknown, unknown + known, free + unknown, Usage() + unknown + known):
        assert total.cost_usd is None and not total.cost_known
    # the other way round: cost_known false is unknown whatever cost_usd said
    assert Usage(cost_usd=0.5, cost_known=False).cost_usd is None
    assert total_cost([0.1, 0.2]) == pytest.approx(0.3) and total_cost([]) == 0.0
    assert total_cost([0.1, None, 0.2]) is None
    assert format_cost(None) == "?" and format_cost(0.0) == "$0.0000" and format_cost(0.01234) == "$0.0123"


def test_old_rows_load_as_unknown() -> None:
    usage = Usage.model_validate_json(json.dumps(OLD_UNKNOWN))
    assert usage.cost_usd is None and not usage.cost_known and usage.input_tokens == 100
    assert json.loads(usage.model_dump_json())["cost_usd"] is None
    assert Usage.model_validate(OLD_UNKNOWN).cost_usd is None
    # a known zero stored the old way stays a known zero
    assert Usage.model_validate_json('{"cost_usd": 0.0, "cost_known": true}').cost_usd == 0.0


def test_a_zero_priced_model_costs_a_known_zero_and_an_unpriced_one_is_unknown() -> None:
    table = PriceTable()
    assert table.cost("local/smollm2-135m-instruct-q8_0", 1000, 100) == 0.0  # the local model: $0, known
    assert table.cost("openai-compat/unpriced", 1000, 100) is None

    async def one(model: ResilientModel) -> Usage:
        try:
            return (await model.complete(ChatRequest(messages=[Message(role="user", content="hi")]))).usage
        finally:
            await model.aclose()

    import asyncio

    from deskbench.models.openai_chat import OpenAIChat

    policy = RetryPolicy(attempts=1, timeout=300)  # generous: a slow machine must not fail the one try
    with FakeOpenAI() as fake:
        def model(name: str, prices: PriceTable) -> ResilientModel:
            return ResilientModel(OpenAIChat(name, base_url=fake.base_url, api_key="sk-test", id=f"openai-compat/{name}"),
                                  policy=policy, prices=prices)

        free = asyncio.run(one(model("free", PriceTable({"free": (0.0, 0.0)}))))
        unknown = asyncio.run(one(model("unpriced", PriceTable())))
    assert free.cost_usd == 0.0 and free.cost_known
    assert unknown.cost_usd is None and not unknown.cost_known


def test_run_counts_know_when_a_cost_is_unknown() -> None:
    counts = RunCounts()
    counts.add_cost(0.5)
    counts.add_cost(0.0)
    assert counts.cost_usd == pytest.approx(0.5) and counts.cost_unknown == 0
    counts.add_cost(None)
    counts.add_cost(0.25)
    assert counts.cost_usd is None and counts.cost_unknown == 1


# -- the price table --------------------------------------------------------------------------


def test_the_price_table_states_its_date_and_prices_current_models(tmp_path: Path) -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", PRICES_AS_OF)
    for name in ("gpt-5.1", "claude-sonnet-4-5", "claude-opus-4-1", "claude-opus-4-5", "claude-haiku-4-5",
                 "gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "o3", "o4-mini"):
        assert name in BUILTIN, name
    table = PriceTable()
    assert table.price("anthropic/claude-opus-4-5-20251101") == (5.0, 25.0)
    assert table.price("anthropic/claude-opus-4-1-20250805") == (15.0, 75.0)
    assert table.price("openai/gpt-5.1-2025-11-13") == (1.25, 10.0)
    assert table.price("openai/o3-mini") == (1.10, 4.40)  # not o3's price: the longest entry wins
    assert table.price("gemini/gemini-2.5-flash-lite") == (0.10, 0.40)
    # --prices FILE: the same JSON shape as before, extending and overriding the built-in table
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"my-model": [0.5, 1.5], "gpt-5.1": [2, 20]}))
    extended = PriceTable.load(path)
    assert extended.price("openai-compat/my-model") == (0.5, 1.5)
    assert extended.price("openai/gpt-5.1") == (2.0, 20.0)
    assert extended.price("openai/gpt-5-mini") == (0.25, 2.0)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"m": [1]}', '{"m": "12"}', '{"m": [1, -2]}',
                                     '{"m": {"input": 1}}', None])
def test_an_unreadable_price_file_is_one_clear_line(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "prices.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError) as info:
        PriceTable.load(path)
    message = str(info.value)
    assert message.startswith(f"price file {path} is unreadable (") and '{"my-model": [0.5, 1.5]}' in message
    assert "\n" not in message


def test_an_unreadable_price_file_stops_the_run_with_exit_2(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", packages / "dl-0003-scp")
    bad = tmp_path / "prices.json"
    bad.write_text("{oops")
    proc = run_cli("run", "--tasks", str(packages), "--out", str(tmp_path / "run"), "--model",
                   f"{UNPRICED}@http://127.0.0.1:9/v1", "--prices", str(bad), "--unsafe-local", "--quiet")
    assert proc.returncode == 2, proc.stderr
    [line] = [line for line in proc.stderr.strip().splitlines() if not line.startswith("warning: --unsafe-local")]
    assert line.startswith(f"error: price file {bad} is unreadable (not JSON: ") and "Traceback" not in proc.stderr


# -- deliverables: a run, `deskbench score`, `deskbench diagnose`, the report ------------------


@pytest.fixture()
def priced_run(bwrap: str, tmp_path: Path) -> tuple[Path, str]:
    """A deliverables run of two systems in the sandbox: one model without a price, one priced
    at 0 by a --prices file. Returns the run directory and the run's stderr."""
    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", packages / "dl-0003-scp")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"free": [0, 0]}))
    out = tmp_path / "run"

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"kind": "text", "text": "# Memo\nThe plan, in one line."}

    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--tasks", str(packages), "--out", str(out), "--agent", "deliverable-agent",
                       "--model", f"{UNPRICED}@{fake.base_url}", "--agent", "deliverable-agent",
                       "--model", f"{FREE}@{fake.base_url}", "--prices", str(prices), "--quiet", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    rows = {r["system"]: r for r in report["rows"]}
    unpriced, free = rows[f"deliverable-agent:{UNPRICED}"], rows[f"deliverable-agent:{FREE}"]
    assert unpriced["cost_usd"] is None and unpriced["mean_cost_usd"] is None and unpriced["cost_known"] is False
    assert free["cost_usd"] == 0.0 and free["mean_cost_usd"] == 0.0 and free["cost_known"] is True
    assert report["prices_as_of"] == PRICES_AS_OF
    return out, strip_ansi(proc.stderr)


def test_a_run_with_an_unpriced_model_says_unknown_everywhere(priced_run: tuple[Path, str]) -> None:
    out, stderr = priced_run
    lines = {line.split(":", 2)[1]: line for line in stderr.splitlines() if " episodes run " in line}
    assert lines.keys() == {"openai-compat/unpriced", "openai-compat/free"}
    assert f"cost ? (a model has no price in the table as of {PRICES_AS_OF}" in lines["openai-compat/unpriced"]
    assert f"cost $0.0000 (prices as of {PRICES_AS_OF}; --prices FILE to extend)" in lines["openai-compat/free"]
    assert "$0.0000" not in lines["openai-compat/unpriced"]

    # the episodes, as stored
    usage = {ep.system: ep.usage for ep in RunStore(out, create=False).episodes()}
    assert usage[f"deliverable-agent:{UNPRICED}"].cost_usd is None
    assert usage[f"deliverable-agent:{FREE}"].cost_usd == 0.0 and usage[f"deliverable-agent:{FREE}"].cost_known
    steps = [s for ep in RunStore(out, create=False).episodes(f"deliverable-agent:{UNPRICED}") for s in ep.trajectory
             if isinstance(s, ModelCallStep)]
    assert steps and all(s.cost_usd is None for s in steps)

    # deskbench score: Table 6's cost row
    proc = wide_cli("score", str(out))
    assert proc.returncode == 0, proc.stderr
    [row] = [line for line in strip_ansi(proc.stdout).splitlines() if "Mean cost per episode" in line]
    assert f"prices as of {PRICES_AS_OF}" in row
    cells = [c.strip() for c in row.split("│") if c.strip()]
    # systems in sorted order: free, then unpriced
    assert cells[-2:] == ["0.0000", "?"], row
    proc = run_cli("score", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["system"]: r for r in json.loads(proc.stdout)["rows"]}
    assert rows[f"deliverable-agent:{UNPRICED}"]["cost_usd"] is None
    assert rows[f"deliverable-agent:{UNPRICED}"]["cost_known"] is False
    items = out / "items.jsonl"
    assert run_cli("score", str(out), "--items-out", str(items)).returncode == 0
    by_system = {(row := json.loads(line))["system"]: row for line in items.read_text().splitlines()}
    assert by_system[f"deliverable-agent:{UNPRICED}"]["cost_usd"] is None
    assert by_system[f"deliverable-agent:{UNPRICED}"]["cost_known"] is False
    assert by_system[f"deliverable-agent:{FREE}"]["cost_usd"] == 0.0

    # deskbench diagnose
    proc = run_cli("diagnose", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    diag = json.loads(proc.stdout)
    systems = {s["system"]: s for s in diag["systems"]}
    assert systems[f"deliverable-agent:{UNPRICED}"]["cost_usd"] is None
    assert systems[f"deliverable-agent:{UNPRICED}"]["cost_known"] is False
    assert systems[f"deliverable-agent:{FREE}"]["cost_usd"] == 0.0
    assert systems[f"deliverable-agent:{FREE}"]["cost_known"] is True
    assert diag["prices_as_of"] == PRICES_AS_OF
    proc = wide_cli("diagnose", str(out))
    assert proc.returncode == 0, proc.stderr
    text = strip_ansi(proc.stdout)
    row = next(line for line in text.splitlines() if f"│ deliverable-agent:{UNPRICED} " in line)
    assert "?" in row and "0.0000" not in row
    row = next(line for line in text.splitlines() if f"│ deliverable-agent:{FREE} " in line)
    assert "0.0000" in row and "?" not in row
    assert f"prices as of {PRICES_AS_OF}" in text

    # the report
    html = render_html(build_report([out]))
    table = html[html.index('id="deliverables-main"') if 'id="deliverables-main"' in html else 0:]
    unpriced_row = re.search(r'<tr data-system="deliverable-agent:openai-compat/unpriced">.*?</tr>', table, re.S)
    free_row = re.search(r'<tr data-system="deliverable-agent:openai-compat/free">.*?</tr>', table, re.S)
    assert unpriced_row and free_row
    assert unpriced_row.group(0).endswith("<td>?</td></tr>") and "$0.0000" not in unpriced_row.group(0)
    assert free_row.group(0).endswith("<td>$0.0000</td></tr>")
    assert f"as of {PRICES_AS_OF}" in html


def _old_rows_run(path: Path) -> Path:
    """A deliverables run written the way unknown costs were stored before: cost_usd 0.0 with
    cost_known false, model-call steps at 0.0."""
    packages = load_packages(bundled_dir() / "deliverables")[:1]
    store = RunStore(path)
    store.save_tasks(packages)
    task = packages[0]
    for system, usage in (("agent:old-unpriced", OLD_UNKNOWN), ("agent:priced", {**OLD_UNKNOWN, "cost_usd": 0.02,
                                                                                 "cost_known": True})):
        store.record(Episode(task_id=task.id, system=system, status="ok",
                             submission=DeliverableSubmission(id=task.id, response="# Memo\nA plan.")))
        steps = [ModelCallStep(input_tokens=100, output_tokens=10, cost_usd=usage["cost_usd"]),
                 ModelCallStep(input_tokens=0, output_tokens=0, cost_usd=0.0)]  # a cache hit: $0
        with sqlite3.connect(path / RunStore.FILENAME) as con:
            con.execute("UPDATE episodes SET usage = ?, trajectory = ? WHERE system = ?",
                        (json.dumps(usage), json.dumps([s.model_dump(mode="json") for s in steps]), system))
    store.close()
    return path


def test_stored_rows_from_before_load_as_unknown(tmp_path: Path) -> None:
    run = _old_rows_run(tmp_path / "run")
    raw = sqlite3.connect(run / RunStore.FILENAME).execute(
        "SELECT usage FROM episodes WHERE system = 'agent:old-unpriced'").fetchone()[0]
    assert json.loads(raw)["cost_usd"] == 0.0  # what is on disk
    episodes = {ep.system: ep for ep in RunStore(run, create=False).episodes()}
    old, priced = episodes["agent:old-unpriced"], episodes["agent:priced"]
    assert old.usage.cost_usd is None and not old.usage.cost_known
    assert [s.cost_usd for s in old.trajectory if isinstance(s, ModelCallStep)] == [None, 0.0]
    assert priced.usage.cost_usd == pytest.approx(0.02)
    assert [s.cost_usd for s in priced.trajectory if isinstance(s, ModelCallStep)] == [0.02, 0.0]

    diag = json.loads(run_cli("diagnose", str(run), "--json").stdout)
    systems = {s["system"]: s for s in diag["systems"]}
    assert systems["agent:old-unpriced"]["cost_usd"] is None and systems["agent:old-unpriced"]["cost_known"] is False
    assert systems["agent:priced"]["cost_usd"] == pytest.approx(0.02)
    proc = run_cli("score", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["system"]: r for r in json.loads(proc.stdout)["rows"]}
    assert rows["agent:old-unpriced"]["mean_cost_usd"] is None and rows["agent:old-unpriced"]["cost_known"] is False
    assert rows["agent:priced"]["mean_cost_usd"] == pytest.approx(0.02)


# -- docqa: the report's leaderboard ------------------------------------------------------------


def test_the_report_shows_unknown_cost_as_a_question_mark(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    tasks = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[[f"answer {i}"]],
                       evidence=[Evidence(document="a.pdf", page=i + 1)]) for i in range(3)]
    store.save_tasks(tasks)
    for system, cost in (("priced", 0.01), ("free", 0.0), ("mixed", None)):
        for i, t in enumerate(tasks):
            # "mixed": two episodes priced, one not: the total is unknown, not $0.02
            c = None if cost is None and i == 2 else (0.01 if cost is None else cost)
            store.record(Episode(task_id=t.id, system=system, status="ok",
                                 submission=DocQASubmission(id=t.id, answer=[f"answer {i}"],
                                                            citations=[Citation(document="a.pdf", page=i + 1)]),
                                 usage=Usage(input_tokens=10, output_tokens=1, cost_usd=c)))
    store.close()
    report = build_report([tmp_path / "run"])
    rows = {s.row.system: s.row for s in report.section("docqa").data.systems}
    assert rows["mixed"].cost_usd is None and not rows["mixed"].cost_known
    assert rows["mixed"].cost_per_item is None and rows["mixed"].cost_per_correct is None
    assert rows["free"].cost_usd == 0.0 and rows["free"].cost_known and rows["free"].cost_per_item == 0.0
    assert rows["priced"].cost_per_item == pytest.approx(0.01)
    assert report.prices_as_of == PRICES_AS_OF
    html = render_html(report)
    cells = {name: re.search(rf'<tr data-system="{name}">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
             for name in rows}
    # cost / item, tokens / item, cost / correct, errors
    assert re.search(r"<td>\?</td><td>11</td><td>\?</td>", cells["mixed"]), cells["mixed"]
    assert "$0.0000" not in cells["mixed"]
    assert re.search(r"<td>\$0\.0000</td><td>11</td><td>\$0\.0000</td>", cells["free"])
    assert re.search(r"<td>\$0\.0100</td><td>11</td><td>\$0\.0100</td>", cells["priced"])
    assert f"price table as of {PRICES_AS_OF}" in html
