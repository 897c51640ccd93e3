"""`deskbench analyse ... --judge MODEL`: correctness as MADQA H.3 decides it (the judge's score
>= 0.5), the run's stored verdicts reused (a judge is never asked twice for a verdict the run
holds), ANLS* named when there is no judge, and `analyse failures` splitting correct answers into
exact and verbose (Figure 8). Every figure is worked out by hand in the comments.

The run: four tasks, two systems. The scripted judge (over the OpenAI wire) says correct for an
answer holding RIGHT, partial (main_issue verbosity_medium) for HALF, incorrect otherwise; every
such answer is far from its gold under ANLS* (0), so only the exact ones score without a judge.

    task (gold, evidence)                     agent:m                      guess:m
    t0 alpha   (alpha 1)           single     "alpha"      exact 1         "qqqq"       judge 0
    t1 bravo   (alpha 1, alpha 3)  cross_page "RIGHT ..."  judge 1         "RIGHT ..."  judge 1
    t2 charlie (alpha 2, beta 1)   cross_doc  "HALF ..."   judge 0.5       "xxxx"       judge 0
    t3 delta   (beta 1, beta 2)    cross_page "zzzz"       judge 0         "HALF ..."   judge 0.5

Judged correct (>= 0.5): agent [1, 1, 1, 0], guess [0, 1, 0, 1]. ANLS*: agent [1, 0, 0, 0], guess
all 0. The judge is asked for every non-exact answer: 3 of agent's, 4 of guess's = 7 calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI
from test_llm_judge import verdict

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.tracks.docqa.analysis.judged import Judging, ask_key
from deskbench.tracks.docqa.analysis.matrix import load_matrix
from deskbench.tracks.docqa.scoring.judge import Judgement
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, Evidence

PAST = "2025-01-01T00:00:00.000+00:00"  # episodes ended before any scoring of this test

TASKS = [
    DocQATask(id="t0", question="Question 0?", answer_variants=[["alpha"]], evidence=[Evidence(document="alpha.pdf", page=1)]),
    DocQATask(id="t1", question="Question 1?", answer_variants=[["bravo"]],
              evidence=[Evidence(document="alpha.pdf", page=1), Evidence(document="alpha.pdf", page=3)]),
    DocQATask(id="t2", question="Question 2?", answer_variants=[["charlie"]],
              evidence=[Evidence(document="alpha.pdf", page=2), Evidence(document="beta.pdf", page=1)]),
    DocQATask(id="t3", question="Question 3?", answer_variants=[["delta"]],
              evidence=[Evidence(document="beta.pdf", page=1), Evidence(document="beta.pdf", page=2)]),
]
AGENT, GUESS = "agent:m", "guess:m"
ANSWERS = {
    AGENT: {"t0": "alpha", "t1": "RIGHT: the answer is bravo, as stated", "t2": "HALF charlie, with other words",
            "t3": "zzzz"},
    GUESS: {"t0": "qqqq", "t1": "RIGHT bravo as the report states it", "t2": "xxxx",
            "t3": "HALF delta, and more words here"},
}


def script(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The judge: by the predicted answer's marker."""
    prompt = body["messages"][0]["content"]
    answer = next(line for line in prompt.splitlines() if line.startswith("Predicted Answer"))
    if "RIGHT" in answer:
        return verdict("correct")
    if "HALF" in answer:
        return verdict("partial", issue="verbosity_medium")
    return verdict("incorrect", issue="wrong_content")


def episode(system: str, tid: str, answer: str, finished: str = PAST) -> Episode:
    return Episode(task_id=tid, system=system, status="ok", started_at=PAST, finished_at=finished,
                   submission=DocQASubmission(id=tid, answer=[answer], citations=[]))


def make_run(path: Path, answers: dict[str, dict[str, str]] = ANSWERS, tasks: Sequence[DocQATask] = TASKS) -> Path:
    store = RunStore(path)
    store.save_tasks(list(tasks))
    for system, by_task in answers.items():
        for tid, answer in by_task.items():
            store.record(episode(system, tid, answer))
    store.close()
    return path


def judge_of(fake: FakeOpenAI, name: str = "judge-model") -> str:
    return f"openai-compat/{name}@{fake.base_url}"


def analyse(*args: str) -> tuple[dict[str, Any], str]:
    """`deskbench analyse ARGS`: the report it wrote to --output, and its stderr."""
    proc = run_cli("analyse", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(Path(args[args.index("--output") + 1]).read_text()), proc.stderr


def score(run: Path, judge: str, *more: str) -> None:
    proc = run_cli("score", str(run), "--judge", judge, "--no-cache", *more)
    assert proc.returncode == 0, proc.stderr


# -- agreement: the judge's verdicts, stored ones reused -----------------------------------------


def test_agreement_with_the_judge_reuses_the_stored_verdicts(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with FakeOpenAI(script=script) as fake:
        judge = judge_of(fake)
        plain, err = analyse("agreement", str(run), "--output", str(tmp_path / "a.json"))
        # ANLS*: agent [1,0,0,0], guess [0,0,0,0]: pa 1/4, pb 0; p_o 3/4, p_e = 0 * 1/4 + 1 * 3/4 = 3/4 -> kappa 0
        assert plain["kappa"][0][1] == pytest.approx(0.0)
        assert plain["scoring"]["scorer"] == "ANLS*" and "scored with ANLS* >= 0.5" in err
        assert not fake.requests

        score(run, judge)
        assert len(fake.requests) == 7  # the non-exact answers, once each
        judged, err = analyse("agreement", str(run), "--output", str(tmp_path / "j.json"), "--judge", judge)
        assert len(fake.requests) == 7  # every verdict came from the stored scoring: no call
        # judged: agent [1,1,1,0], guess [0,1,0,1]: p_o = 1/4 (t1 only); pa 3/4, pb 1/2;
        # p_e = 3/4 * 1/2 + 1/4 * 1/2 = 1/2 -> kappa (1/4 - 1/2) / (1 - 1/2) = -1/2
        assert judged["kappa"][0][1] == pytest.approx(-0.5)
        pair = judged["pairs"][0]
        assert (pair["both_correct"], pair["only_a"], pair["only_b"], pair["neither"]) == (1, 2, 1, 0)
        s = judged["scoring"]
        assert (s["scorer"], s["judge"], s["reused"], s["asked"], s["unscored"]) == ("judge", judge, 7, 0, 0)
        assert s["scorings"] == ["run#1"]
        assert f"scored with judge {judge}" in err and "7 verdicts reused from stored scoring run#1, 0 asked now" in err

        # another judge: nothing stored for it, every non-exact answer is asked
        other = judge_of(fake, "other-judge")
        again, _ = analyse("agreement", str(run), "--output", str(tmp_path / "o.json"), "--judge", other, "--no-cache")
        assert len(fake.requests) == 14 and (again["scoring"]["reused"], again["scoring"]["asked"]) == (0, 7)
        assert again["kappa"][0][1] == pytest.approx(-0.5)


def test_a_fully_judged_run_needs_no_judge_at_all(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with FakeOpenAI(script=script) as fake:
        judge = judge_of(fake)
        score(run, judge)
    # the judge's server is gone: any call would fail (and leave its item unscored)
    report, _ = analyse("agreement", str(run), "--output", str(tmp_path / "j.json"), "--judge", judge, "--no-cache")
    assert (report["scoring"]["reused"], report["scoring"]["asked"], report["scoring"]["unscored"]) == (7, 0, 0)
    assert report["kappa"][0][1] == pytest.approx(-0.5)


def test_a_rerun_episode_is_judged_again(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with FakeOpenAI(script=script) as fake:
        judge = judge_of(fake)
        score(run, judge)
        store = RunStore(run, create=False)  # agent's t3 run again after the scoring, with another answer
        store.record(Episode(task_id="t3", system=AGENT, status="ok", started_at=PAST,
                             submission=DocQASubmission(id="t3", answer=["HALF delta, in other words"])), replace=True)
        store.close()
        report, _ = analyse("agreement", str(run), "--output", str(tmp_path / "j.json"), "--judge", judge, "--no-cache")
        assert len(fake.requests) == 8  # one new verdict: t3's new answer
        assert (report["scoring"]["reused"], report["scoring"]["asked"]) == (6, 1)
    # agent now [1,1,1,1], guess [0,1,0,1]: pa 1, p_e = pb = 1/2, p_o = 1/2 -> kappa 0
    assert report["kappa"][0][1] == pytest.approx(0.0)


def test_the_judge_is_opened_only_when_a_verdict_is_missing(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    proc = run_cli("analyse", "agreement", str(run), "--output", str(tmp_path / "j.json"), "--judge", "nosuchprovider/x")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "nosuchprovider" in proc.stderr
    proc = run_cli("analyse", "agreement", str(run), "--output", str(tmp_path / "j.json"), "--judge", "j",
                   "--judge-concurrency", "0")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: --judge-concurrency 0 is not valid; use 1 or more"]


# -- the scorer in-process: a scripted judge, stored verdicts that no longer match ---------------


class ScriptedJudge:
    name = "scripted"

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def judge(self, question: str, predicted: str | Sequence[str], variants: Sequence[Sequence[str]]) -> Judgement:
        text = json.dumps(predicted)
        self.calls.append(question)
        if "RIGHT" in text:
            return Judgement("correct")
        return Judgement("partial", main_issue="list_format") if "HALF" in text else Judgement("incorrect")


def test_items_difficulty_with_a_scripted_judge(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    scripted = ScriptedJudge()
    judging = Judging(spec="scripted", opener=lambda: scripted)
    rm = load_matrix([run], judging=judging)
    assert rm.systems == [AGENT, GUESS]
    # rows: agent [1, 1, 0.5, 0], guess [0, 1, 0, 0.5]
    assert rm.values.tolist() == [[1.0, 1.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5]]
    assert sorted(scripted.calls) == sorted(["Question 1?", "Question 2?", "Question 3?",
                                             "Question 0?", "Question 1?", "Question 2?", "Question 3?"])
    assert (judging.summary().asked, judging.summary().reused) == (7, 0)
    plain = load_matrix([run])
    assert plain.values.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]


def test_a_stored_verdict_holds_only_for_the_same_inputs(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with FakeOpenAI(script=script) as fake:
        score(run, judge_of(fake))
    store = RunStore(run, create=False)
    subs = [DocQASubmission(id=t, answer=[a]) for t, a in ANSWERS[AGENT].items()]
    judging = Judging(spec=judge_of(fake))
    stored = judging.stored_verdicts(store, AGENT, TASKS, subs)
    # agent's three judged answers, keyed by what the judge was shown
    assert stored[ask_key("Question 2?", ["HALF charlie, with other words"], [["charlie"]])].verdict == "partial"
    assert len(stored) == 3
    # other gold (a task file changed since) or another answer: not the verdict's inputs
    moved = [t.model_copy(update={"answer_variants": [["CHARLIE"]]}) if t.id == "t2" else t for t in TASKS]
    assert len(judging.stored_verdicts(store, AGENT, moved, subs)) == 2
    changed = [s.model_copy(update={"answer": ["RIGHT other"]}) if s.id == "t1" else s for s in subs]
    assert len(judging.stored_verdicts(store, AGENT, TASKS, changed)) == 2
    # another judge, or the same one at another temperature: nothing stored for it
    assert Judging(spec="openai-compat/x@http://127.0.0.1:9/v1").stored_verdicts(store, AGENT, TASKS, subs) == {}
    from deskbench.models.settings import Sampling, use_sampling

    use_sampling("judge", Sampling(temperature=0.7))
    try:
        assert Judging(spec=judge_of(fake)).stored_verdicts(store, AGENT, TASKS, subs) == {}
        use_sampling("judge", Sampling(temperature=0.0))  # the judge's default, asked for: the same settings
        assert len(Judging(spec=judge_of(fake)).stored_verdicts(store, AGENT, TASKS, subs)) == 3
    finally:
        use_sampling("judge", Sampling())
    store.close()


def test_a_judge_that_cannot_open_stops_with_one_line(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")

    def broken() -> ScriptedJudge:
        raise UserError("no key for the judge: set JUDGE_KEY")

    with pytest.raises(UserError, match="no key for the judge"):
        load_matrix([run], judging=Judging(spec="j", opener=broken))
    assert asyncio.run(ScriptedJudge().judge("q", "RIGHT", [["a"]])).verdict == "correct"


# -- failures: correct split into exact and verbose (Figure 8) -----------------------------------


def test_failures_split_correct_into_exact_and_verbose_when_judged(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with FakeOpenAI(script=script) as fake:
        judge = judge_of(fake)
        score(run, judge)
        proc = run_cli("analyse", "failures", str(run), "--json", "--judge", judge)
        assert proc.returncode == 0, proc.stderr
        assert len(fake.requests) == 7
    rep = json.loads(proc.stdout)
    agent, guess = rep["systems"]
    # agent: t0 exact (1), t1 judge correct (1), t2 partial (0.5): 3 correct, 2 exact, 1 verbose;
    # t3 wrong, citing nothing: a retrieval failure (Doc F1 = 0)
    o = agent["overall"]
    assert (o["n"], o["correct"], o["exact"], o["verbose"]) == (4, 3, 2, 1)
    assert o["verbose_issues"] == {"verbosity_medium": 1} and o["counts"]["retrieval"] == 1
    # guess: t1 correct (exact 1), t3 partial (verbose 1); t0 and t2 retrieval failures
    o = guess["overall"]
    assert (o["correct"], o["exact"], o["verbose"], o["counts"]["retrieval"]) == (2, 1, 1, 2)
    # by hop type, agent: single t0 exact; cross_page t1 exact, t3 wrong; cross_doc t2 verbose
    hop = agent["by_hop_type"]
    assert (hop["cross_page"]["exact"], hop["cross_page"]["verbose"], hop["cross_doc"]["verbose"]) == (1, 0, 1)
    assert "agent:m: 3/4 correct (2 exact, 1 verbose)" in proc.stderr
    from deskbench.tracks.docqa.analysis.failures import FailuresReport, failures_figure

    fig = failures_figure(FailuresReport.model_validate(rep))  # Figure 8's split in the bars
    assert [t.get_text() for t in fig.legends[0].get_texts()][:2] == ["exact", "verbose"]
    plain = run_cli("analyse", "failures", str(run), "--json")
    o = json.loads(plain.stdout)["systems"][0]["overall"]
    assert (o["correct"], o["exact"], o["verbose"]) == (1, None, None)  # ANLS*: no split
    assert "scored with ANLS* >= 0.5" in plain.stderr


# -- every analysis that scores answers takes --judge --------------------------------------------


def test_drift_guessability_and_the_appendix_analyses_with_the_judge(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with FakeOpenAI(script=script) as fake:
        judge = judge_of(fake)
        score(run, judge)
        reports: dict[str, dict[str, Any]] = {}
        for cmd, extra in (("items", ()), ("splits", ("--test", "1", "--dev", "1")), ("drift", ()),
                           ("effort", ()), ("trajectories", ()), ("cost", ())):
            reports[cmd], err = analyse(cmd, str(run), "--output", str(tmp_path / f"{cmd}.json"), "--judge", judge, *extra)
            assert reports[cmd]["scoring"]["reused"] == 7 and reports[cmd]["scoring"]["asked"] == 0, cmd
            assert "7 verdicts reused" in err
        guess, _ = analyse("guessability", str(run), "--output", str(tmp_path / "g.json"), "--judge", judge)
        assert len(fake.requests) == 7  # none of them asked the judge
    # items: p_j = mean judged accuracy over both systems: t0 (1+0)/2, t1 1, t2 (0.5+0)/2, t3 (0+0.5)/2
    assert [i["difficulty"] for i in reports["items"]["items"]] == [0.5, 1.0, 0.25, 0.25]
    assert reports["items"]["system_accuracy"] == [pytest.approx(0.625), pytest.approx(0.375)]
    # drift: no search queries, every episode single-query: agent (1+1+0.5+0)/4, guess (0+1+0+0.5)/4
    assert [s["accuracy_single_query"] for s in reports["drift"]["systems"]] == [0.625, 0.375]
    assert [s["accuracy"] for s in reports["cost"]["systems"]] == [0.625, 0.375]
    # guessability of guess:m: (0 + 1 + 0 + 0.5) / 4; every question "Question N?" is of class other
    g = guess["systems"][0]
    assert (g["system"], g["guessability"], g["contamination"]) == (GUESS, 0.375, 0.375)
    assert guess["scoring"]["reused"] == 4  # guess:m's own verdicts only
    plain, err = analyse("guessability", str(run), "--output", str(tmp_path / "p.json"))
    assert plain["systems"][0]["guessability"] == 0.0 and plain["scoring"]["scorer"] == "ANLS*"
    assert "scored with ANLS* >= 0.5" in err


def test_multihop_with_the_judge(tmp_path: Path, operator_corpus: Corpus) -> None:
    run = make_run(tmp_path / "run")
    with FakeOpenAI(script=script) as fake:
        judge = judge_of(fake)
        score(run, judge)
        rep, err = analyse("multihop", str(run), "--corpus", str(operator_corpus.root), "--output",
                           str(tmp_path / "m.json"), "--judge", judge)
        assert len(fake.requests) == 7
    pooled = rep["systems"][-1]
    # same document (t1, t3): agent 1, 0; guess 1, 0.5 -> (1 + 0 + 1 + 0.5) / 4
    assert (pooled["system"], pooled["same_document"]["n"], pooled["same_document"]["accuracy"]) == (
        "all systems", 4, 0.625)
    # cross document (t2): agent 0.5, guess 0 -> 0.25
    assert pooled["cross_document"]["accuracy"] == 0.25
    assert rep["scoring"]["reused"] == 7 and "7 verdicts reused" in err  # every system's items are scored, t0 too
    plain, err = analyse("multihop", str(run), "--corpus", str(operator_corpus.root), "--output", str(tmp_path / "p.json"))
    assert plain["systems"][-1]["same_document"]["accuracy"] == 0.0 and "ANLS*" in err


def test_human_time_with_the_judge_and_pooled_annotators(tmp_path: Path) -> None:
    # ann answers t0 exactly (1) and t1 with HALF (0.5), each in 90 s (the 1-2 minute bin);
    # bob answers t2 wrongly (0) in 90 s
    run = make_run(tmp_path / "run", {"human:ann": {"t0": "alpha", "t1": "HALF bravo, and a bit more"},
                                       "human:bob": {"t2": "zzzz"}})
    store = RunStore(run, create=False)
    for ep in store.episodes("human:ann") + store.episodes("human:bob"):
        store.record(ep.model_copy(update={"finished_at": "2025-01-01T00:01:30.000+00:00"}), replace=True)
    store.close()
    with FakeOpenAI(script=script) as fake:
        judge = judge_of(fake)
        score(run, judge)  # per annotator (no pooling): stored under human:ann and human:bob
        assert len(fake.requests) == 2
        rep, err = analyse("human-time", str(run), "--output", str(tmp_path / "h.json"), "--judge", judge,
                           "--pool-humans")
        assert len(fake.requests) == 2  # the pooled row's verdicts are the annotators' stored ones
        pooled_judge = judge_of(fake, "pooled-judge")  # a scoring of the pooled row keeps them under "human"
        score(run, pooled_judge, "--pool-humans")
        assert len(fake.requests) == 4
        again, _ = analyse("human-time", str(run), "--output", str(tmp_path / "p.json"), "--judge", pooled_judge,
                           "--pool-humans")
        assert len(fake.requests) == 4 and again["scoring"]["reused"] == 2
    (human,) = rep["systems"]
    (b,) = [b for b in human["bins"] if b["n"]]
    # pooled human: t0 1, t1 0.5, t2 0 -> mean 0.5 in the 1-2 minute bin
    assert (human["system"], b["bin"], b["n"], b["accuracy"]) == ("human", "1-2", 3, 0.5)
    assert rep["scoring"]["reused"] == 2 and "2 verdicts reused" in err
