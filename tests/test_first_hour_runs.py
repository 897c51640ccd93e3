"""The first hour with `deskbench run` (issue 31): the scores a run prints and stores cover the
tasks it ran (--limit, --task), as `deskbench score RUN` scores them; errored episodes can be run
again (--retry-errors) as new tries with the old ones kept; the summary names the most common
error; Ctrl-C ends with one line saying what is stored and how to resume."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO, ctrl_c, interruptible_cli, run_cli
from fake_openai import FakeOpenAI

from deskbench.generate.demo import bundled_dir
from deskbench.runs.store import RunStore

TESTS = str(Path(__file__).parent)
DEMO_TASKS = bundled_dir() / "docqa" / "tasks.jsonl"
MODEL = "scripted_provider:scripted/unused"  # a plugin docqa agent is given a model; these call none
# first_hour_agents and scripted_provider by module path, as a user's files
ENV = {"PYTHONPATH": os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)}


@pytest.fixture(scope="module")
def demo_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled demo's PDFs, ingested (what `deskbench demo` searches) without OCR: these tests
    are about what a run stores and prints, whatever its agents find; reading the scans (10 s of
    CPU) is tested with `deskbench demo` itself (tests/cli/test_demo.py, test_first_hour_offline)."""
    corpus = tmp_path_factory.mktemp("demo") / "corpus"
    proc = run_cli("ingest", str(bundled_dir() / "docqa" / "pdfs"), "--corpus", str(corpus), "--ocr", "never",
                   "--quiet")
    assert proc.returncode == 0, proc.stderr
    return corpus


def demo_ids(n: int) -> list[str]:
    return [json.loads(line)["id"] for line in DEMO_TASKS.read_text().splitlines()[:n]]


def stored_scoring_ids(run: Path) -> set[str]:
    """The task ids the run's latest stored scoring covers."""
    scoring = RunStore(run, create=False).latest_scoring()
    assert scoring is not None
    return {item.task_id for item in RunStore(run, create=False).scoring_items(scoring.id)}


# -- 1. numbers only over what was run ---------------------------------------------------------------


def test_docqa_run_limit_scores_the_tasks_it_ran_as_score_does(demo_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = run_cli("run", "--tasks", str(DEMO_TASKS), "--corpus", str(demo_corpus), "--agent", "lexical",
                   "--limit", "5", "--out", str(run), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "items 5: scored 5" in proc.stdout and "counted as incorrect" not in proc.stdout, proc.stdout
    assert stored_scoring_ids(run) == set(demo_ids(5))
    ran = RunStore(run, create=False).latest_scoring()
    scored = run_cli("score", str(run), "--json")
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)["lexical"]
    assert report["n"] == 5 and report["missing_ids"] == []
    assert ran is not None and ran.reports["lexical"]["accuracy"] == report["accuracy"]  # type: ignore[index]
    assert ran.reports["lexical"]["n"] == 5  # type: ignore[index]


ANALYTICS_TASKS = [{"id": f"sum-{i}", "category": "qa", "instruction": "What is the total amount in sales.csv?",
                    "inputs": ["sales.csv"], "difficulty_steps": 1, "answer": "60", "answer_value": 60}
                   for i in range(3)]


def test_analytics_run_limit_scores_the_tasks_it_ran_as_score_does(bwrap: str, tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20.5\neast,29.5\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in ANALYTICS_TASKS))
    run = tmp_path / "run"
    proc = run_cli("run", "--agent", "tests.plugin_agents:SandboxSumAgent", "--tasks", str(tasks), "--limit", "2",
                   "--out", str(run), "--json", "--quiet", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    (printed,) = json.loads(proc.stdout).values()
    assert stored_scoring_ids(run) == {"sum-0", "sum-1"}
    scored = run_cli("score", str(run), "--json", cwd=REPO)
    assert scored.returncode == 0, scored.stderr
    (again,) = json.loads(scored.stdout).values()
    assert printed["overall"] == again["overall"] and printed["overall"]["pass1"] == 1.0
    assert printed["n_tasks"] == 2 and printed["missing"] == [], printed


def test_deliverables_run_task_scores_the_package_it_ran_as_score_does(bwrap: str, tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    for name in ("dl-0002-rcp", "dl-0003-scp"):
        shutil.copytree(bundled_dir() / "deliverables" / name, packages / name)
    run = tmp_path / "run"
    with FakeOpenAI() as fake:  # the agent calls no model; deliverables systems pair an agent with one
        proc = run_cli("run", "--agent", "tests.plugin_agents:SandboxSumDeliverable", "--task", "dl-0003-scp",
                       "--model", f"openai-compat/unused@{fake.base_url}", "--tasks", str(packages),
                       "--out", str(run), "--json", "--quiet", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    (row,) = printed["rows"]
    assert printed["tasks"] == ["dl-0003-scp"] and row["missing"] == [], printed
    assert not any("no episode for" in note for note in printed["notes"]), printed["notes"]
    assert stored_scoring_ids(run) == {"dl-0003-scp"}
    scored = run_cli("score", str(run), "--json", cwd=REPO)
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["tasks"] == printed["tasks"]


# -- 2. --retry-errors, the most common error, errored episodes kept -------------------------------------


def flaky_run(corpus: Path, run: Path, *extra: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli("run", "--tasks", str(DEMO_TASKS), "--corpus", str(corpus), "--agent",
                   "first_hour_agents:FlakyLexical", "--model", MODEL, "--limit", "5", "--out", str(run),
                   "--quiet", "--json", *extra, env={**ENV, **env})


def summary_line(stderr: str) -> str:
    """The end-of-run line without its cost part (a scripted model's cost, retries)."""
    (line,) = [x for x in stderr.splitlines() if "episodes run" in x]
    return re.sub(r"; cost .*?; retries \d+", "", line)


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.slow])])
def test_retry_errors_runs_errored_episodes_again_as_new_tries(demo_corpus: Path, tmp_path: Path,
                                                               executor: str) -> None:
    if executor == "ray":
        pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'deskbench[ray]')")
    ids = demo_ids(5)
    broken, limited = tmp_path / "broken.txt", tmp_path / "limited.txt"
    broken.write_text("\n".join(ids[:3]))
    limited.write_text(ids[4])
    env = {"FIRST_HOUR_BROKEN": str(broken), "FIRST_HOUR_LIMIT": str(limited), "RAY_USAGE_STATS_ENABLED": "0"}
    run, system = tmp_path / "run", f"first_hour_agents:FlakyLexical:{MODEL}"
    ex = ("--executor", executor)

    first = flaky_run(demo_corpus, run, *ex, env=env)
    assert first.returncode == 0, first.stderr
    assert summary_line(first.stderr) == (
        f"{system}: 5 episodes run (4 errors), 0 already done; most common (3): ModuleNotFoundError: "
        "No module named 'mcp_not_installed_here'")

    again = flaky_run(demo_corpus, run, *ex, env=env)  # the cause not fixed, no flag: nothing runs, and it says why
    assert again.returncode == 0, again.stderr
    assert summary_line(again.stderr) == (f"{system}: 0 episodes run (0 errors), 5 already done; 3 errored "
                                          "episodes kept; add --retry-errors to run them again")

    broken.unlink()  # the cause fixed (the extra installed)
    retried = flaky_run(demo_corpus, run, *ex, "--retry-errors", env=env)
    assert retried.returncode == 0, retried.stderr  # not refused as another configuration of the run
    assert summary_line(retried.stderr) == f"{system}: 3 episodes run (0 errors), 2 already done"

    store = RunStore(run, create=False)
    status = {e.task_id: e.status for e in store.episodes(system)}
    assert status == {**dict.fromkeys(ids[:4], "ok"), ids[4]: "limit"}  # the limit is not an error: not run again
    assert store.try_counts(system) == {(i, system, 0): 1 for i in ids[:3]}
    ((earlier, _),) = store.earlier_tries(ids[0], system)
    assert earlier.status == "error" and "No module named 'mcp_not_installed_here'" in (earlier.error or "")
    assert store.earlier_tries(ids[3], system) == []
    info = run_cli("info", str(run), "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["systems"][system]["earlier_tries"] == 3
    assert "3 earlier tries kept" in run_cli("info", str(run)).stdout
    # the scoring reads the latest tries: the same as `score RUN`, no agent errors but the limit
    printed = json.loads(retried.stdout)[system]
    scored = run_cli("score", str(run), "--json", env=ENV)
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)[system] == printed
    assert printed["n_errors"] == 1 and printed["n"] == 5


def test_a_retried_episode_keeps_its_earlier_try_with_its_transcript(tmp_path: Path) -> None:
    from deskbench.runs.store import Episode
    from deskbench.runs.transcript import Transcript
    from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

    store = RunStore(tmp_path / "run")
    store.save_tasks([DocQATask(id=i, question=f"{i}?", answer_variants=[["x"]]) for i in ("a", "b")])

    def transcript(name: str) -> Transcript:
        t = Transcript()
        t.tool(name, {}, {})
        return t

    def ended(task: str, status: str) -> Episode:
        return Episode(task_id=task, system="s", status=status, error=None if status == "ok" else f"{status} in {task}",  # type: ignore[arg-type]
                       submission=DocQASubmission(id=task, answer=["x"]) if status == "ok" else None)

    store.record(ended("a", "error"), transcript=transcript("first"))
    store.record(ended("b", "limit"))
    assert store.errored("s") == {("a", 0)}  # a limit is not an error
    assert store.record(ended("a", "error"), transcript=transcript("second"), retry=True)
    assert store.record(ended("a", "ok"), transcript=transcript("third"), retry=True)
    assert not store.record(ended("b", "ok"), retry=True)  # not an errored episode: kept as it was
    assert [(e.task_id, e.status) for e in store.episodes()] == [("b", "limit"), ("a", "ok")]
    tries = store.earlier_tries("a", "s")
    assert [(e.status, e.error) for e, _ in tries] == [("error", "error in a"), ("error", "error in a")]
    assert [[ev.name for ev in doc.events] for _, doc in tries] == [["first"], ["second"]]  # type: ignore[union-attr]
    latest = store.transcript("a", "s")
    assert latest is not None and [ev.name for ev in latest.events] == ["third"]  # type: ignore[union-attr]
    assert store.try_counts() == {("a", "s", 0): 2}


def test_retry_errors_is_a_flag_of_every_track() -> None:
    from deskbench.contract.registry import tracks
    from deskbench.runs.track_options import takes

    assert all("--retry-errors" in takes("run", name) for name in tracks())


# -- 4. Ctrl-C: one line ---------------------------------------------------------------------------------


def _stored(run: Path) -> int:
    db = run / "run.sqlite"
    if not db.exists():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return int(con.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
    except sqlite3.OperationalError:  # the run has not made its tables yet
        return 0
    finally:
        con.close()


def test_ctrl_c_ends_with_what_is_stored_and_how_to_resume(demo_corpus: Path, tmp_path: Path) -> None:
    ids = demo_ids(4)
    quick = tmp_path / "quick.txt"
    quick.write_text("\n".join(ids[:2]))  # two episodes end; the other two wait until interrupted
    run = tmp_path / "run"
    args = ["run", "--tasks", str(DEMO_TASKS), "--corpus", str(demo_corpus), "--agent",
            "first_hour_agents:WaitingLexical", "--model", MODEL, "--limit", "4", "--out", str(run)]
    proc = interruptible_cli(*args, env={**os.environ, **ENV, "FIRST_HOUR_QUICK": str(quick)})
    try:
        deadline = time.monotonic() + 240
        while _stored(run) < 2:  # the two quick episodes are stored; the others are waiting
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the quick episodes were not stored"
            time.sleep(0.05)
        out, err = ctrl_c(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Aborted" not in err, err
    assert err.strip().splitlines()[-1] == (f"interrupted: 2 of 4 episodes stored in {run}; "
                                            "run the same command to resume")
    assert out == ""
    assert _stored(run) == 2  # the waiting episodes stopped unrecorded: the same command resumes them
