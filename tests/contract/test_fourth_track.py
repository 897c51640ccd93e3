"""A fourth track needs one new folder and no edit elsewhere (tests/echo_track): registered, it
runs through `deskbench run` (the one runner: attempts, resume, progress), its tasks and
episodes are kept and read back by the run store, `score` and `compare` take it, `report` shows
its section (the shared default, or its own data and template), and a flag it does not declare
is an error naming it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from echo_track import TRACK, EchoSubmission, EchoTask, EchoTrack
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.contract.registry import register_track, tracks, unregister_track
from deskbench.contract.track import Track
from deskbench.errors import UserError
from deskbench.report.models import ReportSection, SectionData
from deskbench.report.sections import outcomes_section
from deskbench.runs.outcomes import OutcomeOptions
from deskbench.runs.store import RunStore

TASKS = [EchoTask(id=f"e{i}", text=text, expected=expected) for i, (text, expected) in enumerate(
    [("abc", "ABC"), ("Mixed", "MIXED"), ("x", "X"), ("Q", "q"), ("hello", "HELLO"), ("lo", "LO")])]
RIGHT = {"echo-upper": 5 / 6, "echo-lower": 1 / 6}  # upper misses e3 only; lower gets e3 only


@pytest.fixture
def echo() -> Iterator[None]:
    register_track(TRACK)
    yield
    unregister_track("echo")


def _cli(*args: str):  # -> click.testing.Result
    return CliRunner().invoke(app, list(args))


def test_a_fourth_track_runs_scores_and_compares(echo: None, tmp_path: Path) -> None:
    assert "echo" in tracks()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    out = tmp_path / "run"
    first = _cli("run", "--tasks", str(tasks), "--agent", "echo-upper", "--agent", "echo-lower", "--out", str(out),
                 "--quiet", "--json", "--attempts", "2")
    assert first.exit_code == 0, first.output
    shown = json.loads(first.stdout)  # the core's table: the echo track has no show_scores of its own
    assert {s: row["accuracy"] for s, row in shown.items()} == pytest.approx(RIGHT)
    assert {s: row["scored"] for s, row in shown.items()} == {"echo-upper": 12, "echo-lower": 12}  # 6 tasks, 2 attempts
    store = RunStore(out, create=False)
    assert store.track() == "echo" and store.all_tasks() == TASKS
    episodes = store.episodes()
    assert len(episodes) == 24 and all(isinstance(e.submission, EchoSubmission) for e in episodes)
    again = _cli("run", "--tasks", str(tasks), "--agent", "echo-upper", "--agent", "echo-lower", "--out", str(out),
                 "--quiet", "--json", "--attempts", "2")
    assert again.exit_code == 0 and "0 episodes run (0 errors), 12 already done" in again.stderr
    scored = _cli("score", str(out), "--json", "--system", "echo-upper")
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["echo-upper"]["accuracy"] == pytest.approx(RIGHT["echo-upper"])
    compared = _cli("compare", str(out), "--json")
    assert compared.exit_code == 0, compared.output
    c = json.loads(compared.stdout)
    assert c["track"] == "echo" and len(c["common_tasks"]) == 6
    (pair,) = c["pairs"]
    assert sorted((pair["a_only"], pair["b_only"])) == [1, 5] and pair["neither"] == 0  # upper alone right on 5 tasks
    diagnosed = _cli("diagnose", str(out), "--json")
    assert diagnosed.exit_code == 0, diagnosed.output
    assert {s["system"]: s["success_rate"] for s in json.loads(diagnosed.stdout)["systems"]} == {
        "echo-lower": 1.0, "echo-upper": 1.0}  # every episode answered: ok, whatever its score
    page = tmp_path / "report.html"
    reported = _cli("report", str(out), "--output", str(page))
    assert reported.exit_code == 0, reported.output
    html = page.read_text(encoding="utf-8")
    section = html[html.index('<section id="comparison-echo">'):]  # its leaderboard and pair, from its outcomes
    assert 'id="comparison-echo-common">6<' in section and "echo-upper" in section and "echo-lower" in section


def test_a_flag_the_fourth_track_does_not_declare_is_an_error(echo: None, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASKS[0].model_dump_json() + "\n")
    result = _cli("run", "--tasks", str(tasks), "--agent", "echo-upper", "--out", str(tmp_path / "r"),
                  "--max-rounds", "3")
    assert isinstance(result.exception, UserError)  # deskbench.cli.main turns it into one line and exit 2
    assert str(result.exception).startswith("--max-rounds is not an option of the echo track (it takes: --limit")


def _echo_run(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    out = tmp_path / "run"
    made = _cli("run", "--tasks", str(tasks), "--agent", "echo-upper", "--agent", "echo-lower", "--out", str(out), "--quiet")
    assert made.exit_code == 0, made.output
    return out


def test_the_fourth_track_has_its_report_section(echo: None, tmp_path: Path) -> None:
    """`report` asks the track for its section (Track.report_section): echo returns the shared
    default, its leaderboard and pairwise tests from its outcomes, with no edit in report/."""
    from deskbench.report.data import build_report

    report = build_report([_echo_run(tmp_path)])
    (section,) = report.sections
    assert (section.track, section.title, section.n_systems, section.template) == ("echo", TRACK.title, 2, None)
    (c,) = section.comparisons
    assert c.track == "echo" and c.method == TRACK.outcome_definition and len(c.common_tasks) == 6
    assert {r.system: r.n_correct for r in c.leaderboard} == {"echo-upper": 5, "echo-lower": 1}
    assert report.comparisons == [c]


class EchoCounts(SectionData):
    """A fourth track's own section data (drawn by tests/echo_track/report.html.j2)."""

    right: dict[str, int]


class RichEchoTrack(EchoTrack):
    """echo with a section of its own: its data and its template, shipped in its own package."""

    def report_section(self, stores: Sequence[RunStore], options: OutcomeOptions,
                       params: Mapping[str, object]) -> ReportSection:
        default = outcomes_section(self, stores, options)
        right = {r.system: r.n_correct for c in default.comparisons for r in c.leaderboard}
        return default.model_copy(update={"template": "echo_track:report.html.j2", "data": EchoCounts(right=right),
                                          "summary": f"{len(right)} echo system(s)."})


def test_a_fourth_track_renders_its_own_section_template(tmp_path: Path) -> None:
    register_track(RichEchoTrack())
    try:
        page = tmp_path / "report.html"
        reported = _cli("report", str(_echo_run(tmp_path)), "--output", str(page))
        assert reported.exit_code == 0, reported.output
        assert "(2 echo system(s))" in reported.output
    finally:
        unregister_track("echo")
    html = page.read_text(encoding="utf-8")
    body = html[html.index('<section id="echo-counts">'):html.index('<section id="comparison-echo">')]
    assert '<tr data-system="echo-upper"><td>echo-upper</td><td>5</td></tr>' in body
    assert "2 echo system(s).</p>" in html  # its words in the page's opening line


def test_a_track_must_subclass_the_contract_and_fill_its_abstract_members() -> None:
    class Lookalike:  # every member of a Track, but not one
        pass

    for member in ("name", "title", "task_type", "submission_type", "outcome_definition", "limit_category",
                   "run_options", "score_options", "compare_options"):
        setattr(Lookalike, member, getattr(TRACK, member))
    for method in ("claims", "task_json", "load_task", "outcomes", "scorer_options", "diagnose_output", "prepare",
                   "show_scores", "report_section"):
        setattr(Lookalike, method, getattr(EchoTrack, method))
    with pytest.raises(TypeError, match="does not subclass deskbench.contract.track.Track"):
        register_track(Lookalike())  # type: ignore[arg-type]

    del_prepare = {k: v for k, v in vars(EchoTrack).items() if k != "prepare"}
    Partial = type("Partial", (Track,), del_prepare)
    with pytest.raises(TypeError, match="prepare"):
        Partial()
