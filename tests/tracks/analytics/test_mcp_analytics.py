"""`--agent external` and `deskbench mcp` on the code tracks: an agent built elsewhere
(tests/external_code_agent.py, the official MCP client library) runs execute_code in the real
bubblewrap sandbox and answers; the episode is stored as the built-in agents' are (submission,
output files, trajectory, transcript), scored by the track's scorer and shown by report and view."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.analytics.tasks import AnalyticsSubmission
from tests.conftest import run_cli


@pytest.fixture(scope="module", autouse=True)
def _mcp_sdk() -> None:
    """Skipped without the MCP SDK, checked when these tests run, not imported (about 1 s) at every
    worker's collection."""
    pytest.importorskip("mcp")


AGENT = Path(__file__).parents[2] / "external_code_agent.py"
TASKS = [
    {"id": "sum-1", "category": "qa", "instruction": "What is the total of the amount column in sales.csv?",
     "inputs": ["sales.csv"], "difficulty_steps": 2, "answer": "60", "answer_value": 60},
    {"id": "sum-2", "category": "qa", "instruction": "What is the total amount sold in sales.csv?",
     "inputs": ["sales.csv"], "difficulty_steps": 2, "answer": "60", "answer_value": 60},
]


@pytest.fixture()
def tasks(tmp_path: Path) -> Path:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\neast,30\n")
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return path


def test_external_analytics_agent_is_stored_scored_and_reported(bwrap: str, tasks: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "external", "--command", f"{sys.executable} {AGENT} analytics {{question}}",
                   "--tasks", str(tasks), "--out", str(out), "--json", "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stderr
    store = RunStore(out, create=False)
    assert store.meta("track") == "analytics"
    episodes = {e.task_id: e for e in store.episodes("external")}
    assert set(episodes) == {"sum-1", "sum-2"}
    for task_id, ep in episodes.items():
        assert ep.status == "ok", ep.error
        calls = [s for s in ep.trajectory if isinstance(s, ToolCallStep)]
        assert [c.name for c in calls] == ["execute_code", "provide_answer"]
        assert calls[0].result["exit_code"] == 0 and calls[0].result["files"] == [["total.csv", 9]]
        sub = ep.submission
        assert isinstance(sub, AnalyticsSubmission)
        assert sub.answer == "The total amount is 60." and sub.rounds == 1 and sub.stop == "answer"
        assert [f.name for f in sub.files] == ["total.csv"]
        assert (out / sub.files_dir / "total.csv").read_text() == "total\n60\n"  # collected as the analyst's are
        transcript = store.transcript(task_id, "external")
        assert transcript is not None
        body = transcript.model_dump_json()
        assert "execute_code" in body and "provide_answer" in body and "pd.read_csv" in body
    (report,) = json.loads(proc.stdout).values()  # scored at the end of the run, by the analytics scorer
    assert report["overall"]["pass1"] == 1.0 and report["sources"] == {"numeric": 2}
    assert any(p["aspect"] == "agent prompt" and "external" in p["detail"] for p in report["protocol"])
    html = tmp_path / "report.html"
    proc = run_cli("report", str(out), "--output", str(html))
    assert proc.returncode == 0, proc.stderr
    assert "external" in html.read_text()
    shown = viewer_episode(out, "sum-1")
    assert "execute_code" in shown and "provide_answer" in shown and "The total amount is 60." in shown


def viewer_episode(run: Path, task: str, system: str = "external") -> str:
    """The episode's page in `deskbench view`'s app, logged in."""
    from fastapi.testclient import TestClient

    from deskbench.web.store import WebStore
    from deskbench.web.viewer import create_viewer_app
    from tests.web.test_viewer import login

    token = WebStore(run).add_user("ann")
    client = TestClient(create_viewer_app([run], None))
    login(client, token)
    page = client.get("/episode", params={"run": run.name, "system": system, "task": task, "attempt": 0})
    assert page.status_code == 200, page.text[:300]
    return page.text


def test_external_deliverables_agent_is_stored_with_its_verifiers(bwrap: str, tmp_path: Path) -> None:
    """A package run by an external agent: read_input, execute_code writing the deliverable files,
    submit_deliverable; the deliverables scorer runs its verifiers on the stored episode."""
    import shutil

    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.deliverables.tasks import DeliverableSubmission, load_packages
    from tests.deliverable_responses import recompute, respond

    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0002-rcp", packages / "dl-0002-rcp")
    (task,) = load_packages(packages)
    files = tmp_path / "good"
    response = tmp_path / "response.md"
    response.write_text(respond(task, recompute(task, task.directory), files, set()), encoding="utf-8")  # type: ignore[arg-type]
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "external", "--command", f"{sys.executable} {AGENT} deliverables {{question}}",
                   "--tasks", str(packages), "--out", str(out), "--json", "--quiet", timeout=300,
                   env={"EXTERNAL_FILES": str(files), "EXTERNAL_RESPONSE": str(response)})
    assert proc.returncode == 0, proc.stderr
    store = RunStore(out, create=False)
    (ep,) = store.episodes("external")
    assert ep.status == "ok", ep.error
    calls = [s for s in ep.trajectory if isinstance(s, ToolCallStep)]
    assert [c.name for c in calls] == ["read_input", "execute_code", "submit_deliverable"]
    sub = ep.submission
    assert isinstance(sub, DeliverableSubmission)
    assert sub.response == response.read_text(encoding="utf-8") and sub.rounds == 1 and sub.stop == "answer"
    assert sorted(f.name for f in sub.files) == sorted(p.name for p in files.iterdir())
    assert sorted(f.name for f in sub.files) == sorted(o.name for o in task.required_outputs)
    (row,) = json.loads(proc.stdout)["rows"]  # scored at the end of the run, by the deliverables scorer
    assert row["system"] == "external" and row["traps"] == {"fell": 0, "avoided": 2, "unobservable": 0}
    ((_, item),) = store.scored_items("external").values()  # the stored scoring, with every verifier's result
    verdicts = {v["id"]: v["status"] for v in item.row["verifiers"]}
    assert verdicts["file_benchmark_table"] == "pass" and verdicts["table_current_aht"] == "pass"
    assert item.row["passed"] == 13 and verdicts["derived_metrics"] == "unobservable"  # llm_check: no judge given
    assert "read_input" in viewer_episode(out, "dl-0002-rcp")


def test_deskbench_mcp_serves_an_analytics_task_over_stdio(bwrap: str, tasks: Path, tmp_path: Path) -> None:
    """The official client spawns `deskbench mcp --tasks FILE --task ID` as an MCP host would: the
    task's prompt arrives as the server's instructions, execute_code runs in the sandbox, each
    answer is stored as the task's next attempt, and `deskbench score` scores them."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.external_code_agent import SUM_CODE
    from tests.mcp_client import is_error

    out = tmp_path / "served"
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "deskbench.cli", "mcp", "--tasks", str(tasks), "--task", "sum-2", "--out", str(out)])

    async def client() -> tuple[set[str], str]:
        # errlog now: stdio_client's default is the sys.stderr of when mcp.client.stdio was first imported,
        # which may be a CliRunner's stream (an in-process CLI call), with no file descriptor
        async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as session:
            hello = await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            ran = await session.call_tool("execute_code", {"code": SUM_CODE})
            assert not is_error(ran) and "60" in ran.content[0].text  # type: ignore[union-attr]
            await session.call_tool("provide_answer", {"answer": "The total is 60."})
            await session.call_tool("provide_answer", {"answer": "The total is 45."})  # a second attempt, wrong
            return names, hello.instructions or ""

    names, instructions = asyncio.run(asyncio.wait_for(client(), 120))
    assert names == {"execute_code", "provide_answer"}
    assert "What is the total amount sold in sales.csv?" in instructions and "/mnt/data/sales.csv" in instructions
    store = RunStore(out, create=False)
    first, second = sorted(store.episodes("external"), key=lambda e: e.attempt)
    assert (first.task_id, first.attempt, second.attempt) == ("sum-2", 0, 1)
    assert isinstance(first.submission, AnalyticsSubmission) and first.submission.rounds == 1
    assert (out / first.submission.files_dir / "total.csv").is_file()
    proc = run_cli("score", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["external"]
    assert report["overall"]["passk"] == 1.0 and report["overall"]["avgk"] == 0.5  # k=2: one right, one wrong


def test_deskbench_mcp_max_rounds_ends_an_episode_past_it(bwrap: str, tasks: Path, tmp_path: Path) -> None:
    """`deskbench mcp --tasks F --max-rounds 1`: the second execute_code of an episode ends it as a
    round limit (the paper's analyst loop), stored; the next call starts the next attempt."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.external_code_agent import SUM_CODE
    from tests.mcp_client import is_error

    out = tmp_path / "served"
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "deskbench.cli", "mcp", "--tasks", str(tasks), "--task", "sum-2", "--out", str(out), "--max-rounds", "1"])

    async def client() -> None:
        # errlog now: stdio_client's default is the sys.stderr of when mcp.client.stdio was first imported,
        # which may be a CliRunner's stream (an in-process CLI call), with no file descriptor
        async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert not is_error(await session.call_tool("execute_code", {"code": SUM_CODE}))
            await session.call_tool("execute_code", {"code": SUM_CODE})  # past the budget: the episode ends
            await session.call_tool("provide_answer", {"answer": "The total is 60."})  # the next attempt

    asyncio.run(asyncio.wait_for(client(), 120))
    first, second = sorted(RunStore(out, create=False).episodes("external"), key=lambda e: e.attempt)
    assert first.status == "limit" and second.status == "ok"
    assert run_cli("mcp", "--tasks", str(tasks), "--out", str(out), "--max-rounds", "0").returncode == 2


@pytest.mark.parametrize("case", ["no-command", "quits", "timeout", "past-budget"])
def test_bad_input_is_one_line_or_the_episode_error(bwrap: str, case: str, tasks: Path, tmp_path: Path) -> None:
    """No --command: one line, exit 2. An agent that exits without answering, one that outlives
    --timeout, one still calling execute_code past --max-rounds (the paper's round-limit
    exception): the episode records why, with the calls it made."""
    out = tmp_path / "run"
    base = ("run", "--agent", "external", "--tasks", str(tasks), "--out", str(out), "--limit", "1", "--quiet")
    if case == "no-command":
        proc = run_cli(*base)
        assert proc.returncode == 2 and "--command" in proc.stderr and "Traceback" not in proc.stderr
        return
    script = tmp_path / "agent.py"
    script.write_text({"quits": "import sys; print('no idea', file=sys.stderr); sys.exit(4)\n",
                       "timeout": "import time; time.sleep(60)\n"}.get(case, ""))
    command = {"past-budget": f"{sys.executable} {AGENT} greedy {{question}}"}.get(case, f"{sys.executable} {script}")
    extra = {"timeout": ("--timeout", "3"), "past-budget": ("--max-rounds", "1")}.get(case, ())
    proc = run_cli(*base, "--command", command, *extra, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (ep,) = RunStore(out, create=False).episodes("external")
    sub = ep.submission
    assert isinstance(sub, AnalyticsSubmission)
    if case == "quits":
        assert ep.status == "error" and "code 4" in (ep.error or "") and "no idea" in (ep.error or "")
        assert sub.stop == "error"
    elif case == "timeout":
        assert ep.status == "limit" and "3 s" in (ep.error or "") and sub.stop == "error"
    else:
        assert ep.status == "limit" and sub.stop == "round_limit" and sub.rounds == 1
        assert "round limit" in (ep.error or "")
        assert [s.name for s in ep.trajectory if isinstance(s, ToolCallStep)] == ["execute_code"]
