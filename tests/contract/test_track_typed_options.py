"""A track's run, score and compare options are a typed model in its folder (contract/options.py):
the CLI builds the flags from it (cli/track_flags.py), `prepare` gets a validated instance, and a
flag of another track is refused in one line naming the track (runs/track_options.py). The
fourth track, tests/echo_track, declares `--suffix` in echo_track/options.py and nowhere else."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from echo_track import TRACK, EchoSubmission, EchoTask
from echo_track.options import EchoRunOptions
from pydantic import Field
from typer.main import get_command
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.cli.track_flags import builtin_source, merged
from deskbench.contract.options import TrackOptions, flag_specs
from deskbench.contract.registry import get_track, register_track, unregister_track
from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.runs.store import RunStore
from deskbench.runs.track import RunRequest, execute_run, ready
from deskbench.runs.track_options import own_options, track_options
from deskbench.tracks.analytics.options import AnalyticsRunOptions
from deskbench.tracks.docqa.options import DocQARunOptions

REPO = Path(__file__).resolve().parents[2]
TASKS = [EchoTask(id="e0", text="abc", expected="ABC"), EchoTask(id="e1", text="Hi", expected="HI!")]


@pytest.fixture
def echo() -> Iterator[None]:
    register_track(TRACK)
    yield
    unregister_track("echo")


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    return path


def test_the_fourth_track_declares_its_own_flag_and_run_takes_it(echo: None, tmp_path: Path) -> None:
    assert own_options("run", "echo") == {"--limit", "--suffix"}  # from its model, in its folder
    help_text = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "250"}).output
    # in its own panel, as a built-in track's flags are (cli/panels.py), its "echo: " prefix dropped there
    assert "--suffix" in help_text and "─ echo track ─" in help_text and "Text every answer ends with" in help_text
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--tasks", str(_tasks(tmp_path)), "--agent", "echo-upper", "--out",
                                      str(out), "--suffix", "!", "--quiet", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["echo-upper"]["accuracy"] == 0.5  # "ABC!" is wrong, "HI!" right
    answers = {e.task_id: e.submission.answer for e in RunStore(out, create=False).episodes()
               if isinstance(e.submission, EchoSubmission)}
    assert answers == {"e0": "ABC!", "e1": "HI!"}


def test_the_fourth_tracks_flag_is_refused_on_docqa(echo: None, tmp_path: Path) -> None:
    tasks = tmp_path / "docqa.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "question": "Which year?", "answer_variants": ["2020"]}) + "\n")
    result = CliRunner().invoke(app, ["run", "--tasks", str(tasks), "--agent", "guess", "--out", str(tmp_path / "r"),
                                      "--suffix", "!"])
    assert isinstance(result.exception, UserError), result.output
    assert str(result.exception) == (
        "--suffix is not an option of the docqa track (it takes: --command, --corpus, --image-retriever, --limit, "
        "--max-steps, --max-sub-calls, --preset, --protocol, --retriever, --retriever-download, --text-retriever, "
        "--timeout, --top-k, --unsafe-local, --url, --view; and the options "
        "of every track)")
    assert not (tmp_path / "r").exists()


def test_without_the_fourth_track_its_flag_does_not_exist(tmp_path: Path) -> None:
    run = get_command(app).commands["run"]  # type: ignore[attr-defined]
    assert "--suffix" not in {o for p in run.params for o in p.opts}
    result = CliRunner().invoke(app, ["run", "--tasks", str(_tasks(tmp_path)), "--out", str(tmp_path / "r"),
                                      "--suffix", "!"])
    assert result.exit_code == 2 and "No such option: --suffix" in result.output


def test_an_installed_track_plugins_flag_works_from_the_command_line(echo: None, tmp_path: Path) -> None:
    """In a fresh process nothing has loaded the tracks: the flags come from the built-in tracks'
    table, and an installed track plugin (an entry point) adds its own (registered here only to
    read the run back)."""
    site = tmp_path / "site" / "deskbench_echo_track-0.1.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: deskbench-echo-track\nVersion: 0.1\n")
    (site / "entry_points.txt").write_text("[deskbench.tracks]\necho = echo_track:TRACK\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO / "tests")])}
    proc = subprocess.run([sys.executable, "-m", "deskbench.cli", "run", "--tasks", str(_tasks(tmp_path)), "--agent",
                           "echo-lower", "--out", str(tmp_path / "run"), "--suffix", "!", "--quiet", "--json"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["echo-lower"]["accuracy"] == 0.0
    episodes = RunStore(tmp_path / "run", create=False).episodes()
    assert sorted(e.submission.answer for e in episodes if isinstance(e.submission, EchoSubmission)) == ["abc!", "hi!"]


def test_prepare_gets_a_validated_instance_of_the_tracks_model() -> None:
    docqa = get_track("docqa")
    params = {"top_k": 3, "corpus": Path("c"), "max_rounds": 20, "unsafe_local": False, "tasks": Path("t.jsonl")}
    options = track_options("run", docqa, params)  # another track's values (max_rounds) are not its
    assert options == DocQARunOptions(top_k=3, corpus=Path("c"))
    request = RunRequest(tasks=Path("t.jsonl"), out=Path("o"), options=options)
    assert request.options_as(DocQARunOptions).top_k == 3
    assert RunRequest(tasks=Path("t"), out=Path("o")).options_as(AnalyticsRunOptions).max_rounds == 20  # defaults
    with pytest.raises(TypeError):
        request.options_as(AnalyticsRunOptions)
    shipped = request.shippable()
    assert shipped.options_as(DocQARunOptions).corpus == Path("c").resolve()


def test_a_value_the_model_refuses_is_one_line_naming_the_flag() -> None:
    class Strict(TrackOptions):
        level: Annotated[int, Field(ge=1, description="a level")] = 1

    class StrictTrack(type(TRACK)):  # type: ignore[misc]
        name = "strict"
        run_options = Strict

    with pytest.raises(UserError, match=r"^--level 0 is not valid for the strict track: Input should be greater "
                                        r"than or equal to 1; see deskbench run --help$"):
        track_options("run", StrictTrack(), {"level": 0})


def test_two_tracks_that_spell_one_flag_differently_are_a_developers_error() -> None:
    class Other(TrackOptions):
        limit: Annotated[str, Field(description="not a number")] = "all"

    class OtherTrack(type(TRACK)):  # type: ignore[misc]
        name = "other"
        run_options = Other

    register_track(OtherTrack())
    try:
        with pytest.raises(TypeError, match=r"run --limit: the docqa and other tracks declare it differently"):
            merged("run")
    finally:
        unregister_track("other")


def test_a_field_no_flag_can_take_is_named() -> None:
    class Odd(TrackOptions):
        pairs: dict[str, int] = {}

    with pytest.raises(TypeError, match=r"^odd run pairs: a flag takes bool, int, float, str, Path or a list of str"):
        flag_specs(Odd, "odd run")
    assert [s.flag for s in flag_specs(EchoRunOptions, "echo run")] == ["--limit", "--suffix"]


def test_the_built_in_flag_table_is_what_the_models_say() -> None:
    """cli/track_flags_builtin.py (read when no track is loaded: `run --help` without pydantic) is
    written from the models; regenerate it with `python -m deskbench.cli.track_flags`."""
    written = (REPO / "src" / "deskbench" / "cli" / "track_flags_builtin.py").read_text(encoding="utf-8")
    assert written == builtin_source(), "run `python -m deskbench.cli.track_flags` to rewrite it"


def test_the_runner_does_the_bookkeeping_a_prepare_no_longer_repeats(echo: None, tmp_path: Path) -> None:
    """echo's prepare opens its store and says each system's identity (PreparedSystem.config); the
    runner (runs/track.py ready) files the tasks, records the identity and counts what is done."""
    tasks, out = _tasks(tmp_path), tmp_path / "run"
    request = RunRequest(tasks=tasks, out=out, agents=["echo-upper"], options=EchoRunOptions(suffix="!"))
    prep = TRACK.prepare(request)
    assert RunStore(out, create=False).all_tasks() == []  # prepare filed nothing
    ready(prep)
    assert RunStore(out, create=False).all_tasks() == TASKS and prep.systems[0].already_done == 0
    execute_run(prep)
    again = ready(TRACK.prepare(request))
    assert again.systems[0].already_done == 2 and ready(again) is again
    other = CliRunner().invoke(app, ["run", "--tasks", str(tasks), "--agent", "echo-upper", "--out", str(out),
                                     "--suffix", "?"])  # another configuration of the same system: refused
    assert isinstance(other.exception, UserError) and "already holds a echo-upper run with another configuration" in str(
        other.exception)


def test_a_run_of_another_track_is_refused_before_prepare_writes_into_it(echo: None, operator_corpus: Corpus,
                                                                         tmp_path: Path) -> None:
    """docqa's prepare writes its system's corpus and settings into the run; the runner files the
    tasks after it, so a run of another track is refused before prepare touches it."""
    out = tmp_path / "run"
    ran = CliRunner().invoke(app, ["run", "--tasks", str(_tasks(tmp_path)), "--agent", "echo-upper", "--out", str(out),
                                   "--quiet"])
    assert ran.exit_code == 0, ran.output
    before = _meta(out)
    docqa = tmp_path / "docqa.jsonl"
    docqa.write_text(json.dumps({"id": "t1", "question": "Which year?", "answer_variants": ["2020"]}) + "\n")
    result = CliRunner().invoke(app, ["run", "--tasks", str(docqa), "--agent", "lexical", "--corpus",
                                      str(operator_corpus.root), "--out", str(out)])
    assert isinstance(result.exception, UserError), result.output
    assert str(result.exception) == f"{out} holds a echo run; use a new --out directory for docqa tasks"
    assert _meta(out) == before  # nothing written into it (docqa's corpus and settings of its system)


def _meta(run: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(run / "run.sqlite") as conn:
        return sorted(conn.execute("SELECT key, value FROM meta").fetchall())
