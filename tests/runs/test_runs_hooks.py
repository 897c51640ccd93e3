"""What `diagnose` and `export` say of a track's episodes comes from the track's hooks, not from
tables in the core keyed by track name: a track's own diagnose categories are counted and shown
in its order, and an export reads a task and an answer as the track says (the core's default, the
first user message and no answer, for a track that says nothing)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from echo_track import TRACK, EchoSubmission, EchoTask, EchoTrack
from pydantic import BaseModel
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.contract.export import Exporter, ExportOptions, TaskText
from deskbench.contract.registry import register_track, unregister_track
from deskbench.runs.diagnose import categories, diagnose
from deskbench.runs.export import export_run, formats
from deskbench.runs.export.samples import systems
from deskbench.runs.store import Episode


class PickyEcho(EchoTrack):
    """The echo track with a category of its own: an answer shorter than the text is `too_short`
    (and an empty one `silent`, a category it forgot to list)."""

    name = "picky-echo"
    limit_category = "turn_limit"

    def diagnose_output(self, episode: Episode, task: BaseModel | None) -> tuple[str, str]:
        sub = episode.submission
        assert isinstance(sub, EchoSubmission) and isinstance(task, EchoTask)
        if not sub.answer:
            return "silent", ""
        return ("ok", "") if len(sub.answer) >= len(task.text) else ("too_short", f"{len(sub.answer)} characters")

    def diagnose_categories(self) -> Sequence[str]:
        return ("too_short",)

    def export_task(self, task: BaseModel) -> TaskText | None:
        assert isinstance(task, EchoTask)
        return TaskText(f"echo {task.text!r}", [task.expected], {"length": len(task.text)})

    def export_answer(self, submission: BaseModel | None) -> str:
        return submission.answer if isinstance(submission, EchoSubmission) else ""

    def export_formats(self) -> Sequence[Exporter]:
        return (EchoLines(),)


class EchoLines:
    """An export format of the picky echo track's own: one line per episode, its answer."""

    name = "echo-lines"
    summary = "each episode's answer, a line each"

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        path = out / "answers.txt"
        path.write_text("".join(f"{s.answer}\n" for system in systems(run_dir) for s in system.samples))
        return [path]


@pytest.fixture
def picky() -> Iterator[None]:
    register_track(PickyEcho())
    yield
    unregister_track("picky-echo")


def _episode(task: EchoTask, answer: str, status: str = "ok", error: str | None = None) -> Episode:
    return Episode(task_id=task.id, system="echo-upper", attempt=0, status=status, error=error,  # type: ignore[arg-type]
                   submission=EchoSubmission(id=task.id, answer=answer) if status == "ok" else None,
                   started_at="2026-11-28T00:00:00Z", finished_at="2026-11-28T00:00:01Z")


def test_a_tracks_own_diagnose_categories_are_counted_in_its_order(picky: None) -> None:
    assert categories("picky-echo") == ("ok", "timeout", "content_policy", "context_overflow", "turn_limit",
                                        "budget_limit", "model_error", "too_short")
    tasks = [EchoTask(id=f"e{i}", text="hello", expected="HELLO") for i in range(5)]
    episodes = [_episode(tasks[0], "HELLO"), _episode(tasks[1], "HE"), _episode(tasks[2], ""),
                _episode(tasks[3], "", status="limit", error="out of turns"),
                _episode(tasks[4], "", status="error", error="read timeout after 60 s")]
    result = diagnose(episodes, {t.id: t for t in tasks}, track="picky-echo")
    (system,) = result.systems
    assert list(system.categories.items()) == [("ok", 1), ("timeout", 1), ("turn_limit", 1), ("too_short", 1),
                                               ("silent", 1)]  # an unlisted category is kept, after the listed
    assert system.success_rate == pytest.approx(1 / 5)
    assert {d.task_id: d.detail for d in result.episodes}["e1"] == "2 characters"


def test_the_built_in_tracks_categories_keep_their_order() -> None:
    files = ("no_output", "file_generation_failed:missing_library", "file_generation_failed:file_not_found",
             "file_generation_failed:wrong_header", "file_generation_failed:wrong_column",
             "file_generation_failed:wrong_api", "file_generation_failed:other", "file_not_produced")
    failed = ("ok", "timeout", "content_policy", "context_overflow")
    assert categories("docqa") == (*failed, "step_limit", "budget_limit", "model_error", "no_answer")
    assert categories("analytics") == (*failed, "round_limit", "budget_limit", "model_error", "no_answer", *files)
    assert categories("deliverables") == (*failed, "round_limit", "budget_limit", "model_error", *files)


def _exported(track: EchoTrack, tmp_path: Path) -> list[tuple[str, list[str], dict[str, object], str]]:
    """An echo run of `track` (registered alone: the store files echo tasks under it), exported;
    a track with its own export format also writes the run in it."""
    register_track(track)
    try:
        tmp_path.mkdir()
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text(EchoTask(id="e0", text="abc", expected="ABC").model_dump_json() + "\n")
        ran = CliRunner().invoke(app, ["run", "--tasks", str(tasks), "--agent", "echo-lower", "--out",
                                       str(tmp_path / "run"), "--quiet", "--json"])
        assert ran.exit_code == 0, ran.output
        if "echo-lines" in [e.name for e in track.export_formats()]:
            (written,) = export_run(tmp_path / "run", "echo-lines", tmp_path / "lines")
            assert written.read_text() == "abc\n"
        return [(s.task.input, s.task.target, s.task.gold, s.answer)
                for system in systems(tmp_path / "run") for s in system.samples]
    finally:
        unregister_track(track.name)


def test_an_export_reads_tasks_and_answers_as_the_track_says(tmp_path: Path) -> None:
    assert _exported(PickyEcho(), tmp_path / "picky") == [("echo 'abc'", ["ABC"], {"length": 3}, "abc")]
    assert _exported(TRACK, tmp_path / "plain") == [("", [], {}, "")]  # no hooks: the core's default


def test_the_madqa_format_is_docqas() -> None:
    from deskbench.contract.registry import get_track

    (madqa,) = get_track("docqa").export_formats()
    assert madqa.name == "madqa" and formats()["madqa"] is madqa and "inspect" in formats()
