"""Plugin agents on the analytics and deliverables tracks (deskbench/plugins.py agent_factory),
by module path: the track is the one the agent declares, the agent gets the context objects the
built-in agents get (tests/plugin_agents.py checks them and uses the sandbox through them), and
its episodes are stored and scored like any other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from fake_openai import FakeOpenAI

from deskbench.generate.demo import bundled_dir
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.deliverables.tasks import DeliverableTask

TASK = {"id": "sum-1", "category": "qa", "instruction": "What is the total amount in sales.csv?",
        "inputs": ["sales.csv"], "difficulty_steps": 1, "answer": "60", "answer_value": 60}


@pytest.fixture()
def analytics_tasks(tmp_path: Path) -> Path:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20.5\neast,29.5\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    return tasks


def test_an_analytics_plugin_agent_uses_the_sandbox_and_is_scored(bwrap: str, analytics_tasks: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "tests.plugin_agents:SandboxSumAgent", "--tasks", str(analytics_tasks),
                   "--out", str(out), "--json", "--quiet", cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    store = RunStore(out, create=False)
    assert store.track() == "analytics"  # the track the plugin declares, though no track names it
    (ep,) = store.episodes()
    assert ep.status == "ok", ep.error
    assert ep.system == "tests.plugin_agents:SandboxSumAgent"
    (call,) = [s for s in ep.trajectory if isinstance(s, ToolCallStep)]
    assert call.name == "execute_code" and call.result["exit_code"] == 0
    assert call.result["files"] == [["total.txt", 4]]  # written in the jail's /mnt/result, collected
    assert ep.submission is not None and ep.submission.answer == "The total amount is 60.0."  # type: ignore[attr-defined]
    assert (out / ep.submission.files_dir / "total.txt").read_text() == "done"  # type: ignore[attr-defined]
    (report,) = json.loads(proc.stdout).values()
    assert report["n_unscored"] == 0 and report["overall"]["pass1"] == 1.0, report  # the stated total is right
    assert store.latest_scoring() is not None


def test_a_plugin_of_another_track_is_one_line(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", packages / "dl-0003-scp")
    proc = run_cli("run", "--agent", "deliverable-agent", "--agent", "tests.plugin_agents:SandboxSumAgent",
                   "--model", "local", "--tasks", str(packages), "--out", str(tmp_path / "run"), cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: agent 'tests.plugin_agents:SandboxSumAgent' (module path) is for the analytics track, not "
        "deliverables; run it on analytics tasks"]
    assert not (tmp_path / "run").exists()


def test_a_deliverables_plugin_agent_gets_the_context_and_options(bwrap: str, tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", packages / "dl-0003-scp")
    out = tmp_path / "run"
    with FakeOpenAI() as fake:  # the agent calls no model; deliverables systems pair an agent with one
        proc = run_cli("run", "--agent", "tests.plugin_agents:SandboxSumDeliverable",
                       "--model", f"openai-compat/unused@{fake.base_url}", "--tasks", str(packages),
                       "--out", str(out), "--json", "--quiet", cwd=REPO, timeout=300)
        assert fake.requests == []
    assert proc.returncode == 0, proc.stderr
    store = RunStore(out, create=False)
    (ep,) = store.episodes()
    assert ep.status == "ok", ep.error
    sub = ep.submission
    assert sub is not None
    inputs = ", ".join(sorted(Path(p).name for p in store.tasks_of(DeliverableTask)[0].inputs))
    assert sub.response == f"Inputs read: {inputs}. Options seen: inline_chars, trap_hints, web."  # type: ignore[attr-defined]
    assert [f.name for f in sub.files] == ["notes.md"]  # type: ignore[attr-defined]
    assert store.latest_scoring() is not None
