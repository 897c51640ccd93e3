"""The store and the filesystem (issue 22, item 3, and the fault suite's store rows): each probe met
where a user meets it, the real CLI in a subprocess, with a bound on wall time and peak RSS
(tests/hostile_watch.py). Before, these gave tracebacks, lost or mixed files, or did work twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from hostile_watch import bounded_cli

from deskbench.runs.names import folder_name
from deskbench.runs.outputs import episode_dir
from deskbench.runs.store import RunStore

GUESS_REPLY = {"kind": "text", "text": '{"answer": ["x"], "citations": []}'}


def _tasks(path: Path, ids: list[str], *, bom: bool = False) -> Path:
    lines = [json.dumps({"id": i, "question": f"question {i}?", "answer_variants": [["x"]],
                         "evidence": [{"document": "a.pdf", "page": 1}]}) for i in ids]
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + ("\n".join(lines) + "\n").encode())
    return path


def _run_argv(tasks: Path, out: Path) -> list[str]:
    return ["run", "--tasks", str(tasks), "--out", str(out), "--agent", "guess", "--model", "openai/gpt-4.1",
            "--concurrency", "2", "--quiet"]


def _env(fake: FakeOpenAI, tmp: Path) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test", "DESKBENCH_CACHE_DIR": str(tmp / "cache")}


# -- episode folders ------------------------------------------------------------------------------


def test_task_ids_that_slug_alike_get_their_own_folders(tmp_path: Path) -> None:
    """`fg/1` and `fg_1` both became outputs/<system>/fg_1/0: the second episode cleared the
    first's files, and the first was scored on the second's file."""
    ids = ["fg/1", "fg_1", "fg 1", "fg:1", ".fg_1", "FG_1", "é", "ü", ""]
    dirs = {episode_dir(tmp_path, "analyst-agent:openai/gpt-4.1", i, 0) for i in ids}
    assert len(dirs) == len(ids)
    assert folder_name("fg/1").startswith("fg_1-") and folder_name("fg/1") != folder_name("fg_1")
    assert all(len(folder_name(i * 500)) < 80 for i in ("a", "/"))  # a long id stays a legal name
    # systems too: `a:b` and `a_b` are two systems, two folders
    assert episode_dir(tmp_path, "a:b", "t", 0).parent.parent != episode_dir(tmp_path, "a_b", "t", 0).parent.parent


def test_colliding_ids_keep_each_episodes_files(tmp_path: Path) -> None:
    """What the analyst agent does to its folder (clears a cut-short episode's) run for both ids:
    the first episode's file survives the second's start."""
    from deskbench.agents.code_loop import Deliverables

    first = Deliverables(episode_dir(tmp_path, "s", "fg/1", 0))
    (first.result / "answer.csv").write_text("first\n")
    Deliverables(episode_dir(tmp_path, "s", "fg_1", 0))
    assert (first.result / "answer.csv").read_text() == "first\n"


# -- one writer per run directory ----------------------------------------------------------------


def test_a_second_run_on_one_out_stops_in_one_line_and_no_call_is_repeated(tmp_path: Path) -> None:
    """Two `deskbench run` on one fresh --out: before, a traceback (`database is locked`,
    `UNIQUE tasks.id`) in 2 of 7 trials and the work done twice (84 model calls for 60 tasks)."""
    ids = [f"q{i}" for i in range(12)]
    tasks = _tasks(tmp_path / "tasks.jsonl", ids)
    out = tmp_path / "run"
    held = threading.Event()  # the first run's answers wait until the second has been refused

    def script(b: dict[str, object], n: int) -> dict[str, str]:
        held.wait(300)
        return GUESS_REPLY

    with FakeOpenAI(script=script) as fake:
        env = {**os.environ, **_env(fake, tmp_path)}
        first = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *_run_argv(tasks, out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 300  # a hang guard only: a loaded machine starts it late
        while not fake.requests:  # the first run is writing: its episodes are in flight
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.02)
        second = bounded_cli(*_run_argv(tasks, out), env=_env(fake, tmp_path))
        held.set()
        second.held(seconds=20)
        _, first_err = first.communicate(timeout=300)  # a hang guard only
        calls = len(fake.requests)
    assert first.returncode == 0, first_err
    assert second.returncode == 2, second
    assert second.stderr.strip().splitlines() == [
        f"error: {out}: run PID {first.pid} is writing there; wait for it to end and run again (it resumes), "
        "or give another --out"]
    assert calls == len(ids)  # every task's one model call, none twice
    assert len(RunStore(out).done("guess:openai/gpt-4.1")) == len(ids)
    # the lock dies with its holder: a later run on the same --out resumes (nothing left to do)
    with FakeOpenAI(script=lambda b, n: GUESS_REPLY) as fake:
        again = bounded_cli(*_run_argv(tasks, out), env=_env(fake, tmp_path))
        assert again.returncode == 0, again
        assert not fake.requests


# -- a new corpus, created atomically; a store that is not one -----------------------------------


def _pdfs(root: Path) -> Path:
    from conftest import write_text_pdf

    write_text_pdf(root / "pdfs" / "alpha.pdf", ["Mountain car winter rates", "Harbour authority report"])
    return root / "pdfs"


def _ingest_ok(pdfs: Path, corpus: Path) -> None:
    run = bounded_cli("ingest", str(pdfs), "--corpus", str(corpus), "--quiet")
    run.held()
    assert run.returncode == 0, run
    found = bounded_cli("search", "--corpus", str(corpus), "--json", "harbour")
    assert found.returncode == 0 and json.loads(found.stdout)[0]["document"] == "alpha.pdf", found


@pytest.mark.parametrize("after_ms", [0, 3, 15, 60])
def test_an_ingest_killed_while_creating_the_corpus_leaves_nothing_half_made(tmp_path: Path, after_ms: int) -> None:
    """kill -9 in the first milliseconds of a new corpus: before, a 0 or 4,096-byte pages.sqlite,
    and every later ingest failed with a traceback `no such table: documents` (7 of 12 kills)."""
    pdfs = _pdfs(tmp_path)
    parent = tmp_path / "corpora"
    parent.mkdir()
    corpus = parent / "c"
    proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", "ingest", str(pdfs), "--corpus", str(corpus),
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300  # a hang guard only
    while not any(parent.iterdir()) and proc.poll() is None:  # the corpus's first file or folder
        assert time.monotonic() < deadline
        time.sleep(0.0005)
    time.sleep(after_ms / 1000)
    proc.kill()
    proc.wait()
    assert not corpus.exists() or (corpus / "pages.sqlite").stat().st_size > 4096 or proc.returncode == 0
    _ingest_ok(pdfs, corpus)
    assert [p.name for p in parent.iterdir()] == ["c"]  # the killed process's temporary folder swept


@pytest.mark.parametrize("size", [0, 4096])
def test_a_half_made_corpus_from_before_is_rebuilt(tmp_path: Path, size: int) -> None:
    """What an older deskbench left when killed: a table-less pages.sqlite, nothing stored."""
    import sqlite3

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "pages.sqlite").touch()
    if size:
        con = sqlite3.connect(corpus / "pages.sqlite")
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE t(x)")
        con.execute("DROP TABLE t")
        con.close()
    (corpus / "docs").mkdir()
    search = bounded_cli("search", "--corpus", str(corpus), "harbour")
    assert search.returncode == 2 and search.stderr.strip().splitlines() == [
        f"error: {corpus / 'pages.sqlite'} has no tables: the corpus's creation was interrupted; "
        "run 'deskbench ingest' on it again to rebuild it"], search
    _ingest_ok(_pdfs(tmp_path), corpus)


@pytest.fixture(scope="module")
def good_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(pdfs, corpus): a corpus ingested and searched once by the CLI within the bounds; each
    damage is done to a copy of it."""
    root = tmp_path_factory.mktemp("good-corpus")
    pdfs = _pdfs(root)
    _ingest_ok(pdfs, root / "c")
    return pdfs, root / "c"


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_page_store_is_one_line_and_exit_2(tmp_path: Path, damage: str,
                                                     good_corpus: tuple[Path, Path]) -> None:
    pdfs, good = good_corpus
    corpus = tmp_path / "c"
    shutil.copytree(good, corpus)
    db = corpus / "pages.sqlite"
    data = db.read_bytes()
    db.write_bytes(b"this is not a database, " * 200 if damage == "garbage" else data[: len(data) // 2])
    for argv in (["search", "--corpus", str(corpus), "harbour"], ["ingest", str(pdfs), "--corpus", str(corpus)]):
        run = bounded_cli(*argv)
        run.held(seconds=20)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1, run
        assert lines[0].startswith(f"error: {db} is not a readable page store (") and "Traceback" not in run.stderr
    assert db.read_bytes()[:24] == (b"this is not a database, " if damage == "garbage" else data[:24])  # left as found


# -- the run store: corrupt, a full disk; the tasks file: a BOM, a duplicate id -------------------


def _one_line(run: object, exit_code: int = 2) -> str:
    """The one error line (a run prints its model settings on stderr first), never a traceback."""
    stderr: str = run.stderr  # type: ignore[attr-defined]
    lines = [line for line in stderr.strip().splitlines() if line.startswith("error:")]
    assert run.returncode == exit_code and len(lines) == 1 and "Traceback" not in stderr, run  # type: ignore[attr-defined]
    assert stderr.rstrip().endswith(lines[0]), run
    return lines[0]


def test_a_bom_is_accepted_and_a_duplicate_id_is_named(tmp_path: Path) -> None:
    """Before: a BOM gave `invalid JSON (expected value at line 1 column 1)`, a duplicate id a
    traceback (`UNIQUE tasks.id`)."""
    with FakeOpenAI(script=lambda b, n: GUESS_REPLY) as fake:
        bom = bounded_cli(*_run_argv(_tasks(tmp_path / "bom.jsonl", ["a", "b"], bom=True), tmp_path / "r1"),
                          env=_env(fake, tmp_path))
        bom.held()
        assert bom.returncode == 0, bom
        assert len(RunStore(tmp_path / "r1").done("guess:openai/gpt-4.1")) == 2
        dup = _tasks(tmp_path / "dup.jsonl", ["a", "b", "a"])
        run = bounded_cli(*_run_argv(dup, tmp_path / "r2"), env=_env(fake, tmp_path))
        run.held()
        assert _one_line(run) == (f"error: {dup}:3: task id 'a' is already on line 1; give each task its own id; "
                                  "fix the line, or pass --skip-invalid to skip bad lines")
        assert len(fake.requests) == 2  # nothing ran for the refused file


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(tasks, run): a run of 30 tasks stored by the CLI; each damage is done to a copy of it."""
    root = tmp_path_factory.mktemp("good-run")
    tasks = _tasks(root / "tasks.jsonl", [f"q{i}" for i in range(30)])
    with FakeOpenAI(script=lambda b, n: {"kind": "text", "text": json.dumps({"answer": ["x" * 2000 + str(n)]})}) as fake:
        assert bounded_cli(*_run_argv(tasks, root / "run"), env=_env(fake, root)).returncode == 0
    return tasks, root / "run"


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_run_store_is_one_line_and_exit_2(tmp_path: Path, damage: str, good_run: tuple[Path, Path]) -> None:
    tasks, good = good_run
    shutil.copytree(good, tmp_path / "run")
    with FakeOpenAI(script=lambda b, n: {"kind": "text", "text": "no call is expected"}) as fake:
        db = tmp_path / "run" / "run.sqlite"
        data = db.read_bytes()
        assert len(data) > 50_000
        db.write_bytes(b"not a database " * 100 if damage == "garbage" else data[: len(data) // 2])
        for argv in (["score", str(tmp_path / "run")], ["info", str(tmp_path / "run")], _run_argv(tasks, tmp_path / "run")):
            run = bounded_cli(*argv, env=_env(fake, tmp_path))
            run.held(seconds=20)
            assert _one_line(run).startswith(f"error: {db} is not a readable run store ("), run
            assert "Traceback" not in run.stderr
        assert not fake.requests  # the run refused before any episode


@pytest.fixture
def small_disk(tmp_path: Path):  # noqa: ANN201 -> Iterator[Path]
    """A 3 MB tmpfs of our own (needs root; these machines run the tests as root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_one_line_and_the_stored_episodes_stay(tmp_path: Path, small_disk: Path) -> None:
    """Before: a traceback (`database or disk is full`), exit 1."""
    ids = [f"q{i}" for i in range(60)]
    tasks = _tasks(tmp_path / "tasks.jsonl", ids)
    out = small_disk / "run"
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (3 * 2**20 - 700 * 2**10))  # about 700 KB left
    big = lambda b, n: {"kind": "text", "text": json.dumps({"answer": [os.urandom(8000).hex()]})}  # noqa: E731
    with FakeOpenAI(script=big) as fake:
        full = bounded_cli(*_run_argv(tasks, out), env=_env(fake, tmp_path))
        full.held()
        line = _one_line(full)
        assert line.startswith(f"error: {out}: the disk is full (") and "free space and run the same command" in line
        stored = int(line.split("again: the ")[1].split(" episodes")[0])
        assert 0 < stored < len(ids)
        first_calls = len(fake.requests)
        filler.unlink()
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        again = bounded_cli(*_run_argv(tasks, out), env=_env(fake, tmp_path))
        again.held()
        assert again.returncode == 0, again
        assert len(fake.requests) - first_calls == len(ids) - stored  # the stored ones are not run again
    assert len(RunStore(out).done("guess:openai/gpt-4.1")) == len(ids)


# -- output file names that are not UTF-8 ---------------------------------------------------------


def test_an_output_file_name_that_is_not_utf8_keeps_the_episode(bwrap: str, tmp_path: Path) -> None:
    """Before: the analyst episode that wrote `r\\xff.csv` lost its three executed calls (the name
    could not be stored) and `--json` printed invalid UTF-8."""
    from deskbench.tracks.analytics.generate.tasks import generate_analytics
    from deskbench.tracks.analytics.tasks import read_tasks

    generate_analytics(tmp_path / "tasks", tasks=1, seed=5)
    code = "open(b'/mnt/result/r\\xff' + str({n}).encode() + b'.csv', 'wb').write(b'a,b\\n1,2\\n')"
    script = lambda b, n: ({"kind": "tool", "name": "execute_code",  # noqa: E731
                            "arguments": json.dumps({"code": code.format(n=n)})} if n <= 3
                           else {"kind": "text", "text": "done"})
    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        run = bounded_cli("run", "--agent", "analyst-agent", "--tasks", str(tmp_path / "tasks" / "tasks.jsonl"),
                          "--out", str(out), "--model", f"openai-compat/scripted@{fake.base_url}", "--limit", "1",
                          "--concurrency", "1", "--quiet", "--json", env={"OPENAI_API_KEY": "sk-test"})
        run.held(seconds=60)
        assert run.returncode == 0, run
        assert len(fake.requests) == 4
    json.loads(run.stdout.encode("utf-8"))  # valid UTF-8, valid JSON
    task = read_tasks(tmp_path / "tasks" / "tasks.jsonl").items[0]
    (ep,) = [e for e in RunStore(out).episodes() if e.task_id == task.id]
    assert ep.status == "ok", ep.error
    executed = [s for s in ep.trajectory if getattr(s, "name", None) == "execute_code"]
    assert len(executed) == 3  # the three executed calls are kept
    names = [f.name for f in ep.submission.files]  # type: ignore[union-attr]
    assert names == ["r\\xff1.csv", "r\\xff2.csv", "r\\xff3.csv"]
    result = out / ep.submission.files_dir  # type: ignore[union-attr]
    assert (result / "r\\xff1.csv").read_bytes() == b"a,b\n1,2\n"
    kept = [p for p in (result.parent / "calls" / "1").iterdir()]
    assert [os.fsencode(p.name) for p in kept] == [b"r\xff1.csv"]  # the bytes name kept as written
    scored = bounded_cli("score", str(out), "--json")
    assert scored.returncode == 0, scored
    json.loads(scored.stdout.encode("utf-8"))
