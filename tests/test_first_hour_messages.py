"""Issue 31, item 5: messages that point at the right fix. A path that does not exist is named as
missing, with the ones nearby that do; an agent of another track is one line naming both tracks;
a folder of PDFs, a run directory, a corpus or an empty file given as --tasks is named as what it
is; a corpus typo is no advice to ingest into the typo and leaves no run folder behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.generate.demo import bundled_dir
from deskbench.runs.lock import run_lock
from deskbench.runs.store import Episode, RunStore
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

DEMO = bundled_dir()
DOCQA_TASKS = DEMO / "docqa" / "tasks.jsonl"
ANALYTICS_TASKS = DEMO / "analytics" / "tasks.jsonl"
PACKAGES = DEMO / "deliverables"
PDFS = DEMO / "docqa" / "pdfs"
TASK = DocQATask(id="t1", question="Which year?", answer_variants=[["2020"]])


def _error(args: list[str]) -> str:
    """The UserError a command ends with (in process: the CLI prints it as one line, exit 2)."""
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, UserError), (result.exception, result.output)
    return str(result.exception)


def _one_line(*args: str, cwd: Path) -> str:
    """The CLI's stderr for a refused command: exit code 2, one line, no traceback."""
    proc = run_cli(*args, cwd=cwd)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture
def beside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operator_corpus: Corpus) -> Path:
    """A folder as a user's: runs/lexical (a run), corpus (a corpus), the working directory."""
    RunStore(tmp_path / "runs" / "lexical").save_tasks([TASK])
    (tmp_path / "corpus").symlink_to(operator_corpus.root, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_score_of_a_run_directory_typo_names_it_missing_and_the_runs_nearby(beside: Path) -> None:
    line = _one_line("score", "runs/nope", cwd=beside)
    assert line == ("error: runs/nope does not exist (run directories nearby: runs/lexical); give a run directory "
                    "(the --out of 'deskbench run') or a predictions file")
    assert "did you mean runs/lexical?" in _error(["score", "runs/lexicl"])


@pytest.mark.parametrize("command", [["view"], ["info"], ["diagnose"], ["report"], ["export", "--out", "x"],
                                     ["compare", "runs/lexical"], ["score"]])
def test_every_command_taking_a_run_names_a_missing_one(beside: Path, command: list[str]) -> None:
    message = _error([command[0], "runs/lexicl", *command[1:]])
    assert message.startswith("runs/lexicl does not exist (did you mean runs/lexical?)"), message


def test_a_folder_of_runs_or_a_corpus_given_as_a_run_is_named(beside: Path) -> None:
    assert _error(["info", "runs"]) == ("runs is not a deskbench run (no run.sqlite) but holds runs: runs/lexical; "
                                        "give one of them")
    assert _error(["diagnose", "corpus"]).startswith("corpus is a corpus, not a run directory")


@pytest.mark.parametrize("corpus", [[], ["--corpus", "corpus"]])
def test_a_docqa_agent_on_analytics_tasks_names_both_tracks(beside: Path, corpus: list[str]) -> None:
    message = _error(["run", "--tasks", str(ANALYTICS_TASKS), "--agent", "bm25-agent", "--model", "local",
                      *corpus, "--out", "runs/r1"])
    assert message == (f"these are analytics tasks ({ANALYTICS_TASKS}); bm25-agent is a docqa agent; the analytics "
                       "agents are: analyst-agent, external (or a plugin of the analytics track)")
    assert not (beside / "runs" / "r1").exists()


def test_an_agent_of_another_track_is_named_on_every_track(beside: Path) -> None:
    assert _error(["run", "--tasks", str(DOCQA_TASKS), "--agent", "analyst-agent", "--out", "r"]).startswith(
        f"these are docqa tasks ({DOCQA_TASKS}); analyst-agent is an analytics agent; the docqa agents are: bm25-agent")
    assert _error(["run", "--tasks", str(PACKAGES), "--agent", "lexical", "--out", "r"]).startswith(
        f"these are deliverables tasks ({PACKAGES}); lexical is a docqa agent; the deliverables agents are: "
        "deliverable-agent, external")
    unknown = _error(["run", "--tasks", str(DOCQA_TASKS), "--agent", "nosuch", "--out", "r"])
    assert unknown.startswith("unknown agent 'nosuch'; choose one of: bm25-agent") and unknown.count("external") == 1


def test_the_tasks_decide_the_track_before_the_agent() -> None:
    from deskbench.contract.registry import tracks_of_tasks

    assert [t.name for t in tracks_of_tasks(ANALYTICS_TASKS)] == ["analytics"]
    assert [t.name for t in tracks_of_tasks(DOCQA_TASKS)] == ["docqa"]
    assert [t.name for t in tracks_of_tasks(PACKAGES)] == ["deliverables"]


def test_analytics_tasks_with_a_bad_value_are_still_analytics_tasks(tmp_path: Path) -> None:
    from deskbench.contract.registry import tracks_of_tasks

    row = json.loads(ANALYTICS_TASKS.read_text().splitlines()[0]) | {"difficulty_steps": "many"}
    (tmp_path / "t.jsonl").write_text(json.dumps(row) + "\n")
    assert [t.name for t in tracks_of_tasks(tmp_path / "t.jsonl")] == ["analytics"]  # its reader names the field


@pytest.mark.parametrize("tasks", [PDFS, PDFS / "birch-diner-menu.pdf"])
def test_pdfs_given_as_tasks_are_named_with_the_commands_that_fit(beside: Path, tasks: Path) -> None:
    message = _error(["run", "--tasks", str(tasks), "--corpus", "corpus", "--out", "runs/r2"])
    kind = "a folder of PDFs" if tasks.is_dir() else "a PDF file"
    assert message == (f"--tasks {tasks} is {kind}, not tasks: ingest it with deskbench ingest {tasks} --corpus "
                       "CORPUS and give the questions as --tasks FILE.jsonl --corpus CORPUS (deskbench init DIR "
                       f"--from {tasks} does both and writes questions to edit)")
    assert not (beside / "runs" / "r2").exists()


def test_a_corpus_typo_names_the_corpus_nearby_and_leaves_no_run_folder(beside: Path) -> None:
    line = _one_line("run", "--tasks", str(DOCQA_TASKS), "--corpus", "corpsu/", "--agent", "lexical",
                     "--out", "runs/typo", cwd=beside)
    assert line == ("error: --corpus corpsu does not exist (did you mean corpus?); make one with: deskbench ingest "
                    "PDFS --corpus DIR")
    assert not (beside / "runs" / "typo").exists()
    assert _error(["search", "fee", "--corpus", "corpsu"]).startswith("corpsu does not exist (did you mean corpus?)")
    assert _error(["info", "--corpus", "corpsu"]).startswith("corpsu does not exist (did you mean corpus?)")


@pytest.mark.parametrize("command", [["view", "runs/lexical"], ["report", "runs/lexical", "--output", "r.html"],
                                     ["export", "runs/lexical", "--out", "x"], ["mcp", "--out", "runs/m"]])
def test_a_corpus_typo_is_named_by_every_command_that_takes_one(beside: Path, command: list[str]) -> None:
    if command[0] == "mcp":
        pytest.importorskip("mcp")  # without the extra, mcp says so first
    message = _error([*command, "--corpus", "corpsu"])
    assert "corpsu does not exist (did you mean corpus?); make one with: deskbench ingest PDFS --corpus DIR" in message
    assert not (beside / "runs" / "m").exists() and not (beside / "r.html").exists()


def test_a_run_directory_given_as_a_corpus_is_named(beside: Path) -> None:
    message = _error(["run", "--tasks", str(DOCQA_TASKS), "--corpus", "runs/lexical", "--agent", "lexical",
                      "--out", "runs/r3"])
    assert message.startswith("--corpus runs/lexical is a run directory, not a corpus; give the corpus the run searched")
    assert not (beside / "runs" / "r3").exists()
    assert _error(["ingest", str(PDFS), "--corpus", "runs/lexical"]).startswith(
        "runs/lexical is a run directory, not a corpus")


def test_a_run_directory_or_a_corpus_given_as_tasks_is_named(beside: Path) -> None:
    assert _error(["run", "--tasks", "runs/lexical", "--corpus", "corpus", "--agent", "lexical",
                   "--out", "runs/r4"]) == (
        "--tasks runs/lexical is a run directory, not tasks: to resume it, give the tasks it ran (deskbench info "
        "runs/lexical names them) with --out runs/lexical; to score it: deskbench score runs/lexical")
    assert _error(["run", "--tasks", "corpus", "--agent", "lexical", "--out", "runs/r4"]).startswith(
        "--tasks corpus is a corpus, not tasks: give it as --corpus corpus and the questions as --tasks FILE.jsonl")
    assert not (beside / "runs" / "r4").exists()


def test_a_file_or_a_corpus_given_as_out_is_refused(beside: Path) -> None:
    (beside / "notes.txt").write_text("mine")
    assert _error(["run", "--tasks", str(DOCQA_TASKS), "--corpus", "corpus", "--agent", "lexical",
                   "--out", "notes.txt"]) == "--out notes.txt is a file; give a folder for the run (e.g. runs/NAME)"
    shutil.copytree(beside / "corpus", beside / "mine")  # a corpus of one's own (the shared one stays untouched)
    assert _error(["run", "--tasks", str(DOCQA_TASKS), "--corpus", "corpus", "--agent", "lexical",
                   "--out", "mine"]).startswith("--out mine is a corpus, not a run directory")
    assert not (beside / "mine" / "run.sqlite").exists()


def test_an_empty_or_missing_tasks_file_is_one_line(beside: Path) -> None:
    (beside / "tasks.jsonl").write_text("\n\n")
    assert _error(["run", "--tasks", "tasks.jsonl", "--corpus", "corpus", "--agent", "lexical",
                   "--out", "runs/r5"]).startswith("--tasks tasks.jsonl is empty: give one task a line")
    assert not (beside / "runs" / "r5").exists()
    for agent in ("lexical", "analyst-agent", "deliverable-agent"):
        assert _error(["run", "--tasks", "task.jsonl", "--agent", agent, "--out", "runs/r5"]) == (
            "--tasks task.jsonl does not exist (did you mean tasks.jsonl?); give a tasks JSONL or a deliverables "
            "package folder")


def test_ingest_of_a_missing_pdf_is_one_line_and_makes_no_corpus(beside: Path) -> None:
    (beside / "pdfs").mkdir()
    (beside / "pdfs" / "report.pdf").write_bytes((PDFS / "birch-diner-menu.pdf").read_bytes())
    line = _one_line("ingest", "pdfs/reprot.pdf", "--corpus", "new-corpus", cwd=beside)
    assert line == ("error: pdfs/reprot.pdf does not exist (did you mean pdfs/report.pdf?); give PDF files or "
                    "folders that exist")
    assert not (beside / "new-corpus").exists()


def test_init_from_a_typo_names_the_pdfs_nearby(beside: Path) -> None:
    (beside / "pdfs").mkdir()
    (beside / "pdfs" / "report.pdf").write_bytes((PDFS / "birch-diner-menu.pdf").read_bytes())
    assert _error(["init", "set", "--from", "pdf"]) == (
        "--from pdf: no such file or folder (did you mean pdfs?); give the folder holding your PDFs")
    assert not (beside / "set").exists()


def test_a_run_stopped_before_its_first_episode_leaves_no_folder(tmp_path: Path) -> None:
    """What `run` made before a check in the run's start failed (the store, its tasks) goes with it."""
    with pytest.raises(UserError), run_lock(tmp_path / "r"):
        RunStore(tmp_path / "r").save_tasks([TASK])
        raise UserError("a requirement checked when the run starts")
    assert not (tmp_path / "r").exists()
    with pytest.raises(KeyboardInterrupt), run_lock(tmp_path / "kept"):  # an episode stored: the run is kept
        store = RunStore(tmp_path / "kept")
        store.save_tasks([TASK])
        store.record(Episode(task_id="t1", system="s", status="ok", submission=DocQASubmission(id="t1", answer=["x"])))
        raise KeyboardInterrupt
    assert (tmp_path / "kept" / "run.sqlite").is_file()
    (tmp_path / "mine").mkdir()  # a folder the user made is never removed
    with pytest.raises(UserError), run_lock(tmp_path / "mine"):
        raise UserError("refused")
    assert (tmp_path / "mine").is_dir()
