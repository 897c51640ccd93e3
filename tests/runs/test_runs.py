"""The run store: atomic episodes, resume without duplicates, several writers, kill -9."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deskbench.errors import UserError
from deskbench.models.types import Usage
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

TASKS = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[[str(i)]]) for i in range(5)]


def episode(task_id: str, system: str = "bm25-agent:local", status: str = "ok") -> Episode:
    return Episode(
        task_id=task_id, system=system, status=status,  # type: ignore[arg-type]
        error=None if status == "ok" else "ValueError: unparseable answer",
        submission=DocQASubmission(id=task_id, answer=["x"]) if status == "ok" else None,
        trajectory=[ToolCallStep(name="search_documents", arguments={"query": "x"}, result={"pages": [["a.pdf", 1]]})],
        usage=Usage(calls=2, input_tokens=10, output_tokens=3),
    )


def test_episodes_round_trip_and_are_never_duplicated(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.save_tasks(TASKS)
    assert store.record(episode("t0")) is True
    assert store.record(episode("t0")) is False  # a second write of the same episode is a no-op
    assert store.record(episode("t1", status="error")) is True
    got = store.episodes()
    assert [(e.task_id, e.status) for e in got] == [("t0", "ok"), ("t1", "error")]
    assert got[0].trajectory[0].name == "search_documents"  # type: ignore[union-attr]
    assert got[0].usage.input_tokens == 10 and got[1].error == "ValueError: unparseable answer"
    assert store.done("bm25-agent:local") == {("t0", 0), ("t1", 0)}
    assert [t.id for t in RunStore(tmp_path / "run").tasks_of(DocQATask)] == [t.id for t in TASKS]


def test_several_systems_merge_into_one_run(tmp_path: Path) -> None:
    a, b = RunStore(tmp_path / "run"), RunStore(tmp_path / "run")
    a.record(episode("t0", "rag:local"))
    b.record(episode("t0", "oracle:local"))
    assert a.systems() == ["oracle:local", "rag:local"]


def test_a_run_takes_new_tasks_but_not_other_ones_under_the_same_ids(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.save_tasks(TASKS)
    store.save_tasks(TASKS[:3])  # a subset (e.g. --limit) is the same run
    other = DocQATask(id="other", question="?", answer_variants=[["a"]])
    with pytest.raises(UserError, match="already holds a run over other tasks"):  # what an import asks for
        store.save_tasks([other], allow_new=False)
    store.save_tasks([other])  # new ids are added after the others
    assert [t.id for t in store.tasks_of(DocQATask)] == [*(t.id for t in TASKS), "other"]
    store.record(episode("t0"))
    with pytest.raises(UserError, match="t0"):  # t0 ran: its content may not change under its id
        store.save_tasks([TASKS[0].model_copy(update={"question": "Something else?"})])
    with pytest.raises(UserError, match="nothing does not exist"):
        RunStore(tmp_path / "nothing", create=False)


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_runs import episode
    from deskbench.runs.store import RunStore
    store = RunStore(Path(sys.argv[1]))
    hold = Path(sys.argv[4]) if len(sys.argv) > 4 else None  # past 30 episodes, wait for this file
    for i in range(int(sys.argv[2])):
        if (f"t{{i}}", 0) in store.done(sys.argv[3]):
            continue  # resume: committed episodes are skipped
        while hold is not None and i >= 30 and not hold.exists():
            time.sleep(0.01)
        time.sleep(0.01)
        store.record(episode(f"t{{i}}", sys.argv[3]))
""")


def test_kill_9_midway_then_resume_adds_up(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(tests=str(Path(__file__).parent)))
    run = tmp_path / "run"
    RunStore(run)
    n = 400
    # The writer stops after 30 episodes until the kill (a file it waits for never comes): it
    # cannot finish first, however slowly this test polls on a loaded machine.
    proc = subprocess.Popen([sys.executable, str(script), str(run), str(n), "sys-a", str(tmp_path / "never")],
                            start_new_session=True)
    deadline = time.monotonic() + 300  # a hang guard only
    while True:
        count = sqlite3.connect(run / "run.sqlite").execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
        if count >= 20:
            break
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = len(RunStore(run).episodes())
    assert 20 <= killed_at < n
    # resume with two writers at once, one of them a second system: merge, no duplicates
    procs = [subprocess.Popen([sys.executable, str(script), str(run), str(n), s]) for s in ("sys-a", "sys-b")]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    store = RunStore(run)
    keys = [(e.task_id, e.system, e.attempt) for e in store.episodes()]
    assert len(keys) == len(set(keys)) == 2 * n
    assert len(store.done("sys-a")) == n and len(store.done("sys-b")) == n
