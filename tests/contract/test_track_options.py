"""Flags a track does not take are errors naming the track (runs/track_options.py, the one
table), and `--attempts K` on docqa: K episodes per task, resumable, pass@k / avg@k / spread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from conftest import run_cli
from fake_openai import FakeOpenAI
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.contract.registry import BUILTIN
from deskbench.errors import UserError
from deskbench.runs.store import RunStore
from deskbench.runs.track_options import COMMON, option_names, own_options, takes
from deskbench.scoring.attempts import attempt_metrics
from deskbench.tracks.docqa.tasks import DocQATask


def _invoke(args: list[str]) -> BaseException | None:
    result = CliRunner().invoke(app, args)
    return result.exception


@pytest.mark.parametrize("command", ["run", "score", "compare"])
def test_the_table_covers_every_option_of_the_command(command: str) -> None:
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    declared = COMMON[command] | frozenset().union(*(own_options(command, t) for t in BUILTIN))
    assert option_names(cmd) == set(declared)  # a new flag must say which tracks take it


DOCQA_IGNORED = [["--max-rounds", "3"], ["--no-summary"], ["--last-round-note"], ["--cjk-font-hint"],
                 ["--chart-judge", "openai/x"], ["--file-judge", "openai/x"], ["--file-judge-deferred"],
                 ["--task", "p1"], ["--system", "s"], ["--rerun"], ["--inline-chars", "10"],
                 ["--trap-hints"], ["--web", "brave"], ["--web-record", "w"]]
ANALYTICS_IGNORED = [["--corpus", "c"], ["--top-k", "3"], ["--view", "text"], ["--max-steps", "3"],
                     ["--max-sub-calls", "2"], ["--task", "p1"], ["--system", "s"], ["--rerun"],
                     ["--inline-chars", "10"], ["--trap-hints"], ["--web", "brave"]]
DELIVERABLES_IGNORED = [["--corpus", "c"], ["--top-k", "3"], ["--view", "text"], ["--max-steps", "3"],
                        ["--max-sub-calls", "2"], ["--limit", "2"], ["--no-summary"], ["--last-round-note"],
                        ["--cjk-font-hint"], ["--chart-judge", "openai/x"], ["--file-judge", "openai/x"]]
CASES = ([("docqa", f) for f in DOCQA_IGNORED] + [("analytics", f) for f in ANALYTICS_IGNORED]
         + [("deliverables", f) for f in DELIVERABLES_IGNORED])


def _run_args(track: str, tmp_path: Path) -> list[str]:
    base = ["run", "--out", str(tmp_path / "run"), "--quiet"]
    if track == "deliverables":
        (tmp_path / "packages").mkdir(exist_ok=True)
        return [*base, "--tasks", str(tmp_path / "packages")]
    agent = "analyst-agent" if track == "analytics" else "guess"
    (tmp_path / "tasks.jsonl").write_text(json.dumps(ONE_TASK[track]) + "\n")  # the tasks say their track
    return [*base, "--tasks", str(tmp_path / "tasks.jsonl"), "--agent", agent]


ONE_TASK = {"docqa": {"id": "t1", "question": "Which year?", "answer_variants": ["2020"]},
            "analytics": {"id": "a1", "category": "qa", "instruction": "Sum it.", "inputs": ["x.csv"],
                          "difficulty_steps": 1, "answer": "3"}}


@pytest.mark.parametrize(("track", "flag"), CASES, ids=[f"{t}{f[0]}" for t, f in CASES])
def test_run_refuses_a_flag_its_track_does_not_take(tmp_path: Path, track: str, flag: list[str]) -> None:
    exc = _invoke([*_run_args(track, tmp_path), *flag])
    assert isinstance(exc, UserError), exc
    assert str(exc).startswith(f"{flag[0]} is not an option of the {track} track (it takes: ")
    assert not (tmp_path / "run").exists()  # refused before anything is created


EXTERNAL_FLAGS = [["--command", "my-agent {question}"], ["--url", "http://127.0.0.1:9/"], ["--timeout", "5"]]


@pytest.mark.parametrize("track", ["docqa", "analytics", "deliverables"])
@pytest.mark.parametrize("flag", EXTERNAL_FLAGS, ids=lambda f: f[0])
def test_external_flags_without_an_external_agent_are_refused(tmp_path: Path, track: str, flag: list[str]) -> None:
    exc = _invoke([*_run_args(track, tmp_path), *flag])
    assert isinstance(exc, UserError), exc
    assert str(exc) == f"{flag[0]} configure(s) --agent external, which this run does not have; add --agent external or drop {flag[0]}"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("track", ["docqa", "analytics", "deliverables"])
def test_attempts_0_is_an_error_on_every_track(tmp_path: Path, track: str) -> None:
    exc = _invoke([*_run_args(track, tmp_path), "--attempts", "0"])
    assert isinstance(exc, UserError) and "--attempts 0 is not valid" in str(exc), exc


def test_the_error_is_one_line_with_exit_code_2(tmp_path: Path) -> None:
    proc = run_cli(*_run_args("docqa", tmp_path), "--max-rounds", "20")  # the default value, given: still refused
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --max-rounds is not an option of the docqa track (it takes: --command, --corpus, --image-retriever, "
        "--limit, --max-steps, --max-sub-calls, --preset, --protocol, --retriever, --retriever-download, "
        "--text-retriever, --timeout, --top-k, --unsafe-local, --url, --view; and the options of every track)"]


def _run_of(track: str, tmp_path: Path) -> Path:
    store = RunStore(tmp_path / track)
    store.set_meta("track", track)
    store.close()
    return tmp_path / track


SCORE_CASES = [("analytics", ["--official"]), ("analytics", ["--by", "domain"]), ("analytics", ["--pool-humans"]),
               ("analytics", ["--kuiper-ties", "stable"]), ("analytics", ["--effort", "tokens"]),
               ("analytics", ["--reviewed-only"]), ("analytics", ["--q0", "0.9"]),
               ("deliverables", ["--official"]), ("deliverables", ["--chart-judge", "openai/x"]),
               ("deliverables", ["--file-judge", "openai/x"]), ("docqa", ["--chart-judge", "openai/x"]),
               ("docqa", ["--file-judge", "openai/x"]), ("docqa", ["--reviewed-only"]),
               ("docqa", ["--file-judge-deferred"])]


@pytest.mark.parametrize(("track", "flag"), SCORE_CASES, ids=[f"{t}{f[0]}" for t, f in SCORE_CASES])
def test_score_refuses_a_flag_the_runs_track_does_not_take(tmp_path: Path, track: str, flag: list[str]) -> None:
    exc = _invoke(["score", str(_run_of(track, tmp_path)), *flag])
    assert isinstance(exc, UserError) and str(exc).startswith(f"{flag[0]} is not an option of the {track} track"), exc


def test_score_of_a_predictions_file_is_docqa(tmp_path: Path) -> None:
    (tmp_path / "preds.jsonl").write_text("")
    exc = _invoke(["score", str(tmp_path / "preds.jsonl"), "--tasks", "t.jsonl", "--reviewed-only"])
    assert isinstance(exc, UserError) and str(exc).startswith("--reviewed-only is not an option of the docqa track")
    assert "--reviewed-only" in takes("score", "deliverables") and "--official" in takes("score", "docqa")


def test_attempt_metrics_pass_avg_and_spread() -> None:
    rows = [("a", 0, 1.0), ("a", 1, 0.0), ("a", 2, 1.0),
            ("b", 0, 0.0), ("b", 1, 0.0), ("b", 2, 1.0),
            ("c", 0, 1.0), ("c", 1, None), ("c", 2, 1.0)]  # c's attempt 1 unscored: out of the means
    m = attempt_metrics(rows, 3)
    assert (m.n_tasks, m.pass1, m.passk) == (3, pytest.approx(2 / 3), 1.0)
    assert m.avgk == pytest.approx((2 / 3 + 1 / 3 + 1.0) / 3)
    assert m.per_attempt == [pytest.approx(2 / 3), 0.0, 1.0]
    assert m.spread == pytest.approx(21 ** 0.5 / 9)  # stdev of [2/3, 0, 1] (ddof 1): sqrt((1 + 25 + 16) / 81 / 2)
    assert not m.complete  # c has 2 scored attempts of 3
    assert attempt_metrics([("a", 0, 1.0)], 1).spread is None


TASKS = [DocQATask(id=f"q{i}", question=f"Question {i}?", answer_variants=[["yes"]]) for i in range(4)]


def _answer(text: str) -> dict[str, object]:
    return {"kind": "text", "text": json.dumps({"answer": [text], "citations": []})}  # guess: structured output


def test_docqa_attempts_run_resume_and_score(tmp_path: Path) -> None:
    """guess with a scripted model: attempt 0 answers q0-q2 right, attempt 1 only q3, attempt 2
    q0 only; `score` keeps the MADQA numbers on attempt 0 and adds pass@3, avg@3 and the spread."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    right = {0: {"q0", "q1", "q2"}, 1: {"q3"}, 2: {"q0"}}
    calls: dict[str, int] = {}

    def script(body: dict, n: int) -> dict[str, object]:
        text = json.dumps(body["messages"])
        task = next(t.id for t in TASKS if t.question in text)
        attempt = calls.get(task, 0)
        calls[task] = attempt + 1
        return _answer("yes" if task in right[attempt] else "no")

    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        model = f"openai-compat/fake@{fake.base_url}"
        base = ["run", "--tasks", str(tasks), "--agent", "guess", "--model", model, "--out", str(out),
                "--concurrency", "1", "--quiet", "--json"]
        first = run_cli(*base)  # one attempt first: pass@1 only
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["guess:openai-compat/fake"]["attempts"] is None
        proc = run_cli(*base, "--attempts", "3")  # resumed: attempts 1 and 2 added, attempt 0 kept
        assert proc.returncode == 0, proc.stderr
        assert "8 episodes run (0 errors), 4 already done" in proc.stderr
        assert len(fake.requests) == 12
    report = json.loads(proc.stdout)["guess:openai-compat/fake"]
    assert report["accuracy"] == 0.75 and report["n"] == 4  # attempt 0, as before
    att = report["attempts"]
    assert att["k"] == 3 and att["complete"] and att["n_tasks"] == 4
    assert att["per_attempt"] == [0.75, 0.25, 0.25]
    assert att["pass1"] == 0.75 and att["passk"] == 1.0
    assert att["avgk"] == pytest.approx((2 / 3 + 1 / 3 + 1 / 3 + 1 / 3) / 4)
    assert att["spread"] == pytest.approx(0.28867513459481287)
    episodes = RunStore(out).episodes()
    assert sorted((e.task_id, e.attempt) for e in episodes) == [(t.id, a) for t in TASKS for a in range(3)]
    text = run_cli("score", str(out))
    assert text.returncode == 0, text.stderr
    assert "attempts (k=3, 4 tasks): pass@1 75.0" in text.stdout and "pass@3 100.0, avg@3 41.7" in text.stdout
    assert "spread across attempts (std of per-attempt accuracy) 28.9 [75.0, 25.0, 25.0]" in text.stdout
    items = tmp_path / "items.jsonl"
    written = run_cli("score", str(out), "--json", "--items-out", str(items))  # a docqa run writes its items too
    assert written.returncode == 0, written.stderr
    rows = [json.loads(line) for line in items.read_text().splitlines()]
    assert [(r["system"], r["id"]) for r in rows] == [("guess:openai-compat/fake", t.id) for t in TASKS]
    assert [r["accuracy"] for r in rows] == [1.0, 1.0, 1.0, 0.0]  # attempt 0


def test_cached_attempts_are_their_own_calls(tmp_path: Path) -> None:
    """With --cache every attempt still calls the model (the cache keys attempt k > 0 apart), and
    the same run into a new directory replays each attempt's own reply from the cache."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS[:2]))
    answers: dict[str, int] = {}

    def script(body: dict, n: int) -> dict[str, object]:
        task = next(t.id for t in TASKS if t.question in json.dumps(body["messages"]))
        answers[task] = answers.get(task, 0) + 1
        return _answer("yes" if answers[task] == 1 else "no")  # attempt 0 right, attempt 1 wrong

    env = {"DESKBENCH_CACHE_DIR": str(tmp_path / "cache")}
    with FakeOpenAI(script=script) as fake:
        model = f"openai-compat/fake@{fake.base_url}"
        reports = []
        for out in ("a", "b"):
            proc = run_cli("run", "--tasks", str(tasks), "--agent", "guess", "--model", model, "--out",
                           str(tmp_path / out), "--concurrency", "1", "--quiet", "--json", "--attempts", "2",
                           "--cache", env=env)
            assert proc.returncode == 0, proc.stderr
            reports.append(json.loads(proc.stdout)["guess:openai-compat/fake"]["attempts"])
        assert len(fake.requests) == 4  # 2 tasks x 2 attempts, once: the second run is all cache hits
    assert reports[0]["per_attempt"] == [1.0, 0.0] and reports[1] == reports[0]
