"""A store that fails one row at a time (issue 33, item 4; the row "one malformed episode row"):
a real docqa run (tests/madqa_export_run.py: two scripted systems, with transcripts) with one
episode's row corrupted by sqlite3 in each of the forms a damaged or hostile file can hold, then
met where a user meets it: `deskbench score`, `diagnose`, `export` (every format) in a subprocess,
the viewer's run page and episode page over HTTP, and a resume.

Before, each form but NaN gave a 45-56 line traceback and exit 1 (or a 500 for the whole run in
the viewer), and a NaN seconds was read as a number. Now the unreadable episode is named in one
line (task, system, attempt, what is wrong) and everything else is shown, scored, exported; it is
never a zero (docqa leaves it out of the denominator and counts it) and never done without a word
(a resume keeps it like an errored episode; --retry-errors runs it again)."""

from __future__ import annotations

import html
import json
import re
import shutil
import sqlite3
import subprocess
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fastapi.testclient import TestClient
from hostile_watch import bounded_cli
from madqa_export_run import DATA, TASKS, build_run

from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app

A = "bm25-agent:scripted/answers-a"
B = "bm25-agent:scripted/answers-b"
TASK = "x2"  # answered ("ok") by A; its row is the one corrupted
WHERE = f" WHERE task_id = '{TASK}' AND system = '{A}' AND attempt = 0"

# form -> (the SQL that corrupts A's x2, its parameters, the attempt the line shows, a word of the problem)
ROW_FORMS: dict[str, tuple[str, tuple[object, ...], str, str]] = {
    "input_tokens_inf": ("UPDATE episodes SET usage = ?" + WHERE, ('{"calls": 1, "input_tokens": Infinity}',),
                         "0", "usage: ValidationError: Input should be a finite number"),
    "seconds_nan": ("UPDATE episodes SET usage = ?" + WHERE, ('{"calls": 1, "seconds": NaN}',),
                    "0", "usage.seconds is nan, not a finite number"),
    "attempt_inf": ("UPDATE episodes SET attempt = 9e999" + WHERE, (), "inf", "attempt: ValueError"),
    "attempt_text": ("UPDATE episodes SET attempt = 'first'" + WHERE, (), "first", "attempt: ValueError"),
    "trajectory_100000_deep": ("UPDATE episodes SET trajectory = ?" + WHERE, ("[" * 100_000 + "]" * 100_000,),
                               "0", "trajectory: ValidationError: Invalid JSON: recursion limit exceeded"),
    "error_invalid_utf8": ("UPDATE episodes SET error = CAST(X'66ff80fe' AS TEXT)" + WHERE, (),
                           "0", "error: UnicodeDecodeError"),
    "submission_not_the_model": ("UPDATE episodes SET submission = ?" + WHERE, ('{"answer": {"a": 1}}',),
                                 "0", "submission: ValidationError"),
}
TRANSCRIPT_FORMS: dict[str, tuple[str, tuple[object, ...], str, str]] = {
    "transcript_truncated_zlib": ("UPDATE transcripts SET body = substr(body, 1, length(body) / 2)" + WHERE, (),
                                  "0", "its transcript: zlib.error"),
    "transcript_not_the_model": ("UPDATE transcripts SET body = ?" + WHERE,
                                 (zlib.compress(b'{"events": [{"kind": "nope"}]}'),), "0",
                                 "its transcript: ValidationError"),
}
FORMS = {**ROW_FORMS, **TRANSCRIPT_FORMS}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The untouched run (its corpus beside it, under operators/corpus)."""
    return build_run(tmp_path_factory.mktemp("bad-rows"))


def corrupted(base: Path, tmp_path: Path, form: str) -> Path:
    """A copy of the run with A's x2 corrupted in `form` (exactly one row changed)."""
    run = tmp_path / form
    shutil.copytree(base, run)
    sql, params, _, _ = FORMS[form]
    con = sqlite3.connect(run / "run.sqlite")
    try:
        assert con.execute(sql, params).rowcount == 1
        con.commit()
    finally:
        con.close()
    return run


def naming_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if f"'{TASK}'" in line]


def check_one_line(stderr: str, form: str) -> None:
    """One line names the episode (task, system, attempt) and what is wrong; no traceback."""
    _, _, attempt, problem = FORMS[form]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = naming_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    assert f"episode '{TASK}' of '{A}' (attempt {attempt}) could not be read" in lines[0], lines[0]
    assert problem in lines[0], lines[0]


def score_json(run: Path) -> dict[str, Any]:
    proc = run_cli("score", str(run), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def base_scores(base: Path) -> dict[str, Any]:
    return score_json(base)


@pytest.mark.parametrize("form", list(ROW_FORMS))
def test_score_names_the_row_and_scores_the_rest_without_a_zero(base: Path, base_scores: dict[str, Any],
                                                                tmp_path: Path, form: str) -> None:
    run = corrupted(base, tmp_path, form)
    if form == "trajectory_100000_deep":  # bounded in time and memory, in a watched subprocess
        watched = bounded_cli("score", str(run), "--json")
        watched.held()
        proc = subprocess.CompletedProcess(["deskbench"], watched.returncode, watched.stdout, watched.stderr)
    else:
        proc = run_cli("score", str(run), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_one_line(proc.stderr, form)
    assert "1 episode could not be read and is left out of the scores" in proc.stderr
    reports = json.loads(proc.stdout)
    assert reports[B] == base_scores[B]  # the other system: as before
    a, was = reports[A], base_scores[A]
    assert a["unreadable_ids"] == [TASK] and was["unreadable_ids"] == []
    assert a["n"] == was["n"] - 1  # out of the denominator: not "missing" (which counts as incorrect)
    assert TASK not in a["missing_ids"] and a["missing_ids"] == was["missing_ids"]
    assert a["n_errors"] == was["n_errors"]
    # the table says it too
    table = run_cli("score", str(run))
    assert table.returncode == 0 and "unreadable episodes 1 (not counted" in table.stdout, table.stderr[-2000:]


@pytest.mark.parametrize("form", list(ROW_FORMS))
def test_diagnose_names_the_row_and_diagnoses_the_rest(base: Path, tmp_path: Path, form: str) -> None:
    run = corrupted(base, tmp_path, form)
    proc = run_cli("diagnose", str(run), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_one_line(proc.stderr, form)
    episodes = {s["system"]: s["episodes"] for s in json.loads(proc.stdout)["systems"]}
    assert episodes == {A: 7, B: 5}  # 8 and 5 stored: the unreadable one is not counted as done
    table = run_cli("diagnose", str(run), "--episodes")
    assert table.returncode == 0 and len(naming_lines(table.stderr)) == 1, table.stderr[-2000:]


def _madqa_ids(out: Path) -> dict[str, list[str]]:
    return {p.name: [json.loads(line)["id"] for line in p.read_text(encoding="utf-8").splitlines()]
            for p in sorted(out.glob("*.jsonl"))}


def _inspect_samples(out: Path) -> dict[str, list[str]]:
    """Per log (by system, from its file name), the samples it holds."""
    found = {}
    for p in sorted(out.glob("*.eval")):
        names = zipfile.ZipFile(p).namelist()
        system = A if "answers-a" in p.name else B
        found[system] = sorted(n.removeprefix("samples/").removesuffix("_epoch_1.json")
                               for n in names if n.startswith("samples/"))
    return found


@pytest.mark.parametrize("form", list(FORMS))
def test_export_names_the_episode_and_writes_the_others(base: Path, tmp_path: Path, form: str) -> None:
    run = corrupted(base, tmp_path, form)
    proc = run_cli("export", str(run), "--format", "madqa", "-o", str(tmp_path / "madqa"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_one_line(proc.stderr, form)
    ids = _madqa_ids(tmp_path / "madqa")
    a_file = next(name for name in ids if "answers-a" in name)
    b_file = next(name for name in ids if "answers-b" in name)
    assert ids[a_file] == [f"x{i}" for i in range(1, 9) if i != 2]  # as they ended, x2 left out
    assert ids[b_file] == [f"x{i}" for i in range(1, 6)]
    proc = run_cli("export", str(run), "--format", "inspect", "-o", str(tmp_path / "inspect"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_one_line(proc.stderr, form)
    samples = _inspect_samples(tmp_path / "inspect")
    assert samples == {A: [f"x{i}" for i in range(1, 9) if i != 2], B: [f"x{i}" for i in range(1, 6)]}


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


def viewer(*runs: Path) -> TestClient:
    token = WebStore(runs[0]).add_user("ann")
    client = TestClient(create_viewer_app(list(runs)), raise_server_exceptions=False)
    r = client.post("/login", data={"csrf": _csrf(client.get("/login").text), "token": token}, follow_redirects=False)
    assert r.status_code == 303
    return client


ROW = re.compile(r'<tr class="outcome-\w+" data-task="([^"]+)" data-system="([^"]+)">')
MARKED = re.compile(r'<tr class="unreadable" data-task="([^"]+)" data-system="([^"]+)">(.*?)</tr>', re.S)


@pytest.mark.parametrize("form", list(FORMS))
def test_viewer_run_page_marks_the_row_and_shows_the_others(base: Path, tmp_path: Path, form: str) -> None:
    run = corrupted(base, tmp_path, form)
    client = viewer(run)
    page = client.get("/")
    assert page.status_code == 200, page.text[-2000:]
    rows = ROW.findall(page.text)
    marked = MARKED.findall(page.text)
    _, _, attempt, problem = FORMS[form]
    if form in ROW_FORMS:
        assert len(rows) == 12 and (TASK, A) not in rows  # 13 stored: every other one shown
        assert len(marked) == 1 and marked[0][:2] == (TASK, A)
        cells = re.findall(r"<td>(.*?)</td>", marked[0][2], re.S)
        assert cells[:4] == [run.name, A, TASK, attempt]
        assert problem.split(":")[0] in cells[4]
        if attempt == "0":  # its own page says why it is not shown
            gone = client.get("/episode", params={"run": run.name, "system": A, "task": TASK, "attempt": "0"})
            assert gone.status_code == 404 and "it is stored, but" in gone.text
            assert problem.split(":")[0] in html.unescape(gone.text)
    else:  # the row reads; its transcript does not: the episode is shown, its page says why no transcript
        assert len(rows) == 13 and not marked
        episode = client.get("/episode", params={"run": run.name, "system": A, "task": TASK, "attempt": "0"})
        assert episode.status_code == 200, episode.text[-2000:]
        assert "The transcript cannot be read" in episode.text and problem in html.unescape(episode.text)
    other = client.get("/episode", params={"run": run.name, "system": A, "task": "x1", "attempt": "0"})
    assert other.status_code == 200


def test_a_resume_says_it_kept_the_row_and_retry_errors_runs_it_again(base: Path, tmp_path: Path) -> None:
    """Not done without a word: a resume names it and counts it among the kept errored episodes;
    --retry-errors runs it again, the unreadable row kept as an earlier try."""
    run = corrupted(base, tmp_path, "input_tokens_inf")
    argv = ("run", "--tasks", str(TASKS), "--corpus", str(base.parent / "operators" / "corpus"), "--agent",
            "bm25-agent", "--protocol", "paper", "--model", "scripted:answers-a.jsonl", "--out", str(run),
            "--max-steps", "4", "--top-k", "4", "--view", "text", "--concurrency", "1", "--quiet")
    proc = run_cli(*argv, cwd=DATA)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_one_line(proc.stderr, "input_tokens_inf")
    assert "2 errored episodes (1 of them unreadable) kept; add --retry-errors" in proc.stderr + proc.stdout
    proc = run_cli(*argv, "--retry-errors", cwd=DATA)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not naming_lines(proc.stderr), proc.stderr[-3000:]
    con = sqlite3.connect(run / "run.sqlite")
    try:
        tries = con.execute("SELECT usage FROM episode_tries WHERE task_id = ? AND system = ?", (TASK, A)).fetchall()
    finally:
        con.close()
    assert tries == [('{"calls": 1, "input_tokens": Infinity}',)]  # kept as it was stored
    assert score_json(run)[A]["unreadable_ids"] == []


KEY_FORMS = {"task_id": "UPDATE episodes SET task_id = CAST(X'78ff32' AS TEXT)" + WHERE,
             "system": "UPDATE episodes SET system = CAST(X'78ff32' AS TEXT)" + WHERE}


@pytest.mark.parametrize("column", list(KEY_FORMS))
def test_a_key_column_that_is_not_utf8_is_named_too(base: Path, tmp_path: Path, column: str) -> None:
    """The task id or system itself not UTF-8: every query that lists keys read it (sqlite3 raised
    for the whole result); now that row is named (its key shown with the bad byte escaped) and the
    rest is scored, diagnosed, exported, shown."""
    run = tmp_path / column
    shutil.copytree(base, run)
    con = sqlite3.connect(run / "run.sqlite")
    try:
        assert con.execute(KEY_FORMS[column]).rowcount == 1
        con.commit()
    finally:
        con.close()
    for argv in (("score", str(run)), ("diagnose", str(run)), ("export", str(run), "--format", "madqa", "-o",
                                                               str(tmp_path / "out"))):
        proc = run_cli(*argv)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        lines = [line for line in proc.stderr.splitlines() if "could not be read:" in line]
        assert len(lines) == 1 and f"{column}: UnicodeDecodeError" in lines[0] and "xff" in lines[0], proc.stderr
    page = viewer(run).get("/")
    assert page.status_code == 200 and len(ROW.findall(page.text)) == 12 and len(MARKED.findall(page.text)) == 1


def test_a_transcript_that_inflates_past_the_cap_is_an_unreadable_row_not_a_memory_grab(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forged transcript blob (a zlib bomb) stops at MAX_DECODED_BYTES, a ValueError the store
    reads as an unreadable row; a cut stream stays zlib's own error; a whole one still decodes."""
    from deskbench.runs import transcript
    from deskbench.runs.store import UNREADABLE_ERRORS

    monkeypatch.setattr(transcript, "MAX_DECODED_BYTES", 1024)
    doc = transcript.TranscriptDoc(events=[])
    assert transcript.decode(transcript.CODEC, transcript.encode(doc)) == doc
    bomb = zlib.compress(b'{"events": [' + b" " * 10_000_000 + b"]}", 9)
    with pytest.raises(ValueError, match="decompresses past") as caught:
        transcript.decode(transcript.CODEC, bomb)
    assert isinstance(caught.value, UNREADABLE_ERRORS)
    with pytest.raises(zlib.error, match="truncated"):
        transcript.decode(transcript.CODEC, transcript.encode(doc)[:-4])
