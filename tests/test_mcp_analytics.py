"""`--agent external` and `deskbench mcp` on the code tracks: an agent built elsewhere
(tests/external_code_agent.py, the official MCP client library) runs execute_code in the real
bubblewrap sandbox and answers; the episode is stored as the built-in agents' are (submission,
output files, trajectory, transcript), scored by the track's scorer and shown by report and view."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deskbench.runs.store import RunStore
from deskbench.tasks.analytics import AnalyticsSubmission
from deskbench.tasks.trajectory import ToolCallStep
from tests.conftest import require_tool, run_cli

pytest.importorskip("mcp")

AGENT = Path(__file__).parent / "external_code_agent.py"
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


def test_external_analytics_agent_is_stored_scored_and_reported(tasks: Path, tmp_path: Path) -> None:
    require_tool("bwrap")
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
    from tests.test_viewer import login

    token = WebStore(run).add_user("ann")
    client = TestClient(create_viewer_app([run], None))
    login(client, token)
    page = client.get("/episode", params={"run": run.name, "system": system, "task": task, "attempt": 0})
    assert page.status_code == 200, page.text[:300]
    return page.text
