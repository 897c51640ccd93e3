"""A track's scorer is built from a typed request (runs/outcomes.py ScorerRequest), as `prepare` gets
a RunRequest: --judge, the judge calls in flight and a validated instance of the track's own
`score_options` model, built once by the core for `score`, `compare` and `report`
(runs/track_outcomes.py scorer_request); a value the model refuses is one line naming the flag
(a UserError: exit 2). And deliverables' `prepare` leaves the run's bookkeeping (its packages
filed, where they came from, each system's identity, what is done) to the runner
(runs/track.py ready), as docqa, analytics and the echo track do."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import pytest
from click.testing import Result
from echo_track import EchoSubmission, EchoTask, EchoTrack
from pydantic import Field
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.contract.options import TrackOptions
from deskbench.contract.registry import get_track, register_track, unregister_track
from deskbench.errors import UserError
from deskbench.generate.demo import bundled_dir
from deskbench.report.data import build_report
from deskbench.runs.identity import stored_identities
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
from deskbench.runs.store import RunStore
from deskbench.runs.track import PreparedRun, RunRequest, ready
from deskbench.runs.track_outcomes import scorer_request
from deskbench.tracks.analytics.options import AnalyticsScoreOptions
from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges
from deskbench.tracks.deliverables.options import DeliverablesRunOptions, DeliverablesScoreOptions
from deskbench.tracks.deliverables.outcomes import DeliverablesScorer
from deskbench.tracks.docqa.options import DocQAScoreOptions
from deskbench.tracks.docqa.scoring.docqa import ScoreOptions

# upper is right on e0 only, lower on e1 only; ignoring case, both are right on all three
TASKS = [EchoTask(id="e0", text="abc", expected="ABC"), EchoTask(id="e1", text="Q", expected="q"),
         EchoTask(id="e2", text="hi", expected="Hi")]


class CaseOptions(TrackOptions):
    """The scoring flags of echo's variant below (`score` and `compare`)."""

    ignore_case: Annotated[bool, Field(description="echo: an answer differing only in case is right.")] = False
    min_length: Annotated[int, Field(ge=0, description="echo: an answer shorter than this is wrong.")] = 0


class CaseEchoTrack(EchoTrack):
    """echo whose scorer takes options of its own, and which keeps every request it was given."""

    score_options = CaseOptions
    compare_options = CaseOptions

    def __init__(self) -> None:
        self.seen: list[ScorerRequest] = []

    @contextmanager
    def scorer_options(self, request: ScorerRequest) -> Iterator[OutcomeOptions]:
        self.seen.append(request)
        yield OutcomeOptions(scorer=request.options_as(CaseOptions), concurrency=request.concurrency)

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        o = options.scorer
        assert isinstance(o, CaseOptions)  # what its own scorer_options built
        expected = {t.id: t.expected for t in store.all_tasks() if isinstance(t, EchoTask)}
        out = []
        for ep in store.episodes(system):
            answer = ep.submission.answer if isinstance(ep.submission, EchoSubmission) else ""
            want = expected[ep.task_id]
            right = len(answer) >= o.min_length and (answer.lower() == want.lower() if o.ignore_case else answer == want)
            out.append(ItemOutcome(task_id=ep.task_id, attempt=ep.attempt, system=system, status="scored",
                                   score=float(right), correct=right))
        return out


@pytest.fixture
def case_echo() -> Iterator[CaseEchoTrack]:
    track = CaseEchoTrack()
    register_track(track)
    yield track
    unregister_track("echo")


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def _run(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    out = tmp_path / "run"
    made = _cli("run", "--tasks", str(tasks), "--agent", "echo-upper", "--agent", "echo-lower", "--out", str(out),
                "--quiet")
    assert made.exit_code == 0, made.output
    return out


def test_score_compare_and_report_hand_the_scorer_the_tracks_own_options(case_echo: CaseEchoTrack,
                                                                         tmp_path: Path) -> None:
    out = _run(tmp_path)
    assert case_echo.seen[-1] == ScorerRequest(concurrency=16)  # from `run`: its run options are not the scorer's

    scored = _cli("score", str(out), "--json", "--ignore-case", "--judge-concurrency", "3")
    assert scored.exit_code == 0, scored.output
    assert case_echo.seen[-1] == ScorerRequest(concurrency=3, options=CaseOptions(ignore_case=True))
    assert {s: row["accuracy"] for s, row in json.loads(scored.stdout).items()} == {"echo-upper": 1.0,
                                                                                   "echo-lower": 1.0}
    plain = _cli("score", str(out), "--json")
    assert plain.exit_code == 0, plain.output
    assert case_echo.seen[-1].options == CaseOptions()  # validated once, the model's defaults
    assert json.loads(plain.stdout)["echo-upper"]["accuracy"] == pytest.approx(1 / 3)

    compared = _cli("compare", str(out), "--json", "--ignore-case", "--min-length", "3")
    assert compared.exit_code == 0, compared.output
    assert case_echo.seen[-1] == ScorerRequest(concurrency=16, options=CaseOptions(ignore_case=True, min_length=3))
    board = {r["system"]: r["n_correct"] for r in json.loads(compared.stdout)["leaderboard"]}
    assert board == {"echo-upper": 1, "echo-lower": 1}  # only "abc"/"ABC" is long enough

    report = build_report([out], judge=None, concurrency=2, ignore_case=True, corpus=None)  # `report`'s flags
    assert case_echo.seen[-1] == ScorerRequest(concurrency=2, options=CaseOptions(ignore_case=True))
    assert {r.system: r.n_correct for r in report.comparisons[0].leaderboard} == {"echo-upper": 3, "echo-lower": 3}


def test_a_score_option_the_model_refuses_is_one_line_naming_the_flag(case_echo: CaseEchoTrack,
                                                                      tmp_path: Path) -> None:
    out = _run(tmp_path)
    case_echo.seen.clear()
    for command in ("score", "compare"):
        result = _cli(command, str(out), "--min-length", "-1")
        assert isinstance(result.exception, UserError), result.output  # deskbench.cli.main: one line, exit 2
        assert str(result.exception) == ("--min-length -1 is not valid for the echo track: Input should be greater "
                                         f"than or equal to 0; see deskbench {command} --help")
    with pytest.raises(UserError, match=r"^--min-length -1 is not valid for the echo track: .*; see deskbench "
                                        r"score --help$"):
        build_report([out], min_length=-1)
    assert case_echo.seen == []  # refused before any scorer was built


@pytest.mark.parametrize(("track", "params", "flag"), [
    ("docqa", {"q0": "high"}, "--q0 'high'"),
    ("analytics", {"file_judge_all": "maybe"}, "--file-judge-all 'maybe'"),
    ("deliverables", {"reviewed_only": "maybe"}, "--reviewed-only 'maybe'"),
])
def test_each_built_in_tracks_bad_score_option_is_one_line(track: str, params: dict[str, object], flag: str) -> None:
    with pytest.raises(UserError) as caught:
        scorer_request(get_track(track), params)
    message = str(caught.value)
    assert message.startswith(f"{flag} is not valid for the {track} track: ") and "\n" not in message
    assert message.endswith("; see deskbench score --help")


def test_a_commands_parameters_become_the_tracks_score_options() -> None:
    """Each track takes its own fields from a command's parameters (another track's are not its),
    with --judge and the judge calls in flight beside them."""
    params: dict[str, object] = {"cache": False, "judge_cache": Path("j.sqlite"), "reviewed_only": True,
                                 "chart_judge": None, "corpus": Path("c")}
    docqa = scorer_request(get_track("docqa"), params, judge="openai/gpt-5-mini", concurrency=4)
    assert docqa == ScorerRequest(judge="openai/gpt-5-mini", concurrency=4,
                                  options=DocQAScoreOptions(cache=False, judge_cache=Path("j.sqlite")))
    assert scorer_request(get_track("deliverables"), params).options == DeliverablesScoreOptions(reviewed_only=True)
    assert scorer_request(get_track("analytics"), params).options == AnalyticsScoreOptions()


def test_each_built_in_tracks_scorer_reads_its_model_instance() -> None:
    reviewed = ScorerRequest(concurrency=3, options=DeliverablesScoreOptions(reviewed_only=True))
    with get_track("deliverables").scorer_options(reviewed) as built:
        assert built.concurrency == 3 and built.scorer == DeliverablesScorer(judge=None, reviewed_only=True)
    with get_track("docqa").scorer_options(ScorerRequest(options=DocQAScoreOptions(cache=False))) as built:
        assert built.scorer == ScoreOptions() and built.concurrency == 8
    with get_track("analytics").scorer_options(ScorerRequest()) as built:  # none given: the model's defaults
        assert isinstance(built.scorer, AnalyticsJudges)
        assert (built.scorer.qa, built.scorer.file, built.scorer.file_all) == (None, None, True)
    deferred = ScorerRequest(options=AnalyticsScoreOptions(file_judge_all=False))
    with pytest.raises(UserError, match=r"^--file-judge-deferred needs a File Judge model"):
        get_track("analytics").scorer_options(deferred).__enter__()
    with pytest.raises(TypeError, match="carries DocQAScoreOptions, not DeliverablesScoreOptions"):
        get_track("deliverables").scorer_options(ScorerRequest(options=DocQAScoreOptions())).__enter__()


@pytest.fixture
def packages(tmp_path: Path) -> Path:
    root = tmp_path / "packages"
    for name in ("dl-0002-rcp", "dl-0003-scp"):
        shutil.copytree(bundled_dir() / "deliverables" / name, root / name)
    return root


def _close(prep: PreparedRun) -> None:
    async def close() -> None:
        for model in {id(s.model): s.model for s in prep.systems if s.model is not None}.values():
            await model.aclose()

    asyncio.run(close())


def _request(packages: Path, out: Path, *, only_system: Sequence[str] = (), max_rounds: int = 20) -> RunRequest:
    models = [f"openai-compat/{m}@http://127.0.0.1:9/v1" for m in ("a", "b")]  # never called: nothing runs
    return RunRequest(tasks=packages, out=out, agents=["deliverable-agent"], models=models,
                      options=DeliverablesRunOptions(unsafe_local=True, only_task=("dl-0002-rcp",),
                                                     only_system=tuple(only_system), max_rounds=max_rounds))


def test_deliverables_prepare_leaves_the_bookkeeping_to_the_runner(packages: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    track = get_track("deliverables")
    prep = track.prepare(_request(packages, out))
    _close(prep)
    store = RunStore(out, create=False)
    assert store.all_tasks() == [] and store.meta("packages") is None and stored_identities(store) == {}
    names = ["deliverable-agent:openai-compat/a", "deliverable-agent:openai-compat/b"]
    assert [s.name for s in prep.systems] == names and all(s.config is not None for s in prep.systems)

    assert ready(prep) is prep and prep.booked
    store = RunStore(out, create=False)
    assert [t.id for t in store.all_tasks()] == ["dl-0002-rcp"]  # the packages run (--task)
    assert store.meta("packages") == str(packages.resolve())
    assert sorted(stored_identities(store)) == names
    assert [s.already_done for s in prep.systems] == [0, 0] and prep.warnings == []

    one = track.prepare(_request(packages, out, only_system=names[1:]))  # --system: only it runs
    _close(one)
    assert [s.name for s in one.systems] == names[1:]
    other = track.prepare(_request(packages, out, max_rounds=5))  # another configuration: refused by the runner
    _close(other)
    with pytest.raises(UserError, match=r"already holds a deliverable-agent:openai-compat/a run with another "
                                        r"configuration \(.*max_rounds"):
        ready(other)
