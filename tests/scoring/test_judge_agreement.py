"""Judges held to account (scoring/judge_agreement.py, scoring/judge_log.py): Cohen's kappa and
Krippendorff's alpha against published examples, the agreement report on constructed verdicts
with the figures computed by hand, the version a judge's provider returned kept and a change
said in one line, and `deskbench score RUN --judge A --judge B` end to end on a docqa run with two
scripted judges (a stored scoring each, nothing asked twice on a second go)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_operator_corpus
from fake_openai import FakeOpenAI

from deskbench.errors import UserError
from deskbench.models.types import ChatRequest, ChatResponse, Message
from deskbench.runs.store import RunStore
from deskbench.scoring.judge_agreement import (
    JudgeItem,
    Level,
    agreement,
    check_judges,
    cohen_kappa,
    krippendorff_alpha,
    lines,
)
from deskbench.scoring.judge_log import (
    VERSIONS_META,
    episode,
    recorded,
    recording,
    returned_versions,
)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, values 1-5, missing values; the paper gives alpha nominal .743, ordinal .815, interval .849
N = None
KRIPPENDORFF_2011 = list(zip(
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N], strict=True))


@pytest.mark.parametrize(("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_krippendorff_alpha_matches_the_published_example(level: Level, published: float) -> None:
    assert krippendorff_alpha(KRIPPENDORFF_2011, level) == pytest.approx(published, abs=5e-4)


def test_krippendorff_alpha_edges() -> None:
    assert krippendorff_alpha([[1, 1], [2, 2], [3, None]]) == pytest.approx(1.0)  # perfect; a lone value is not pairable
    assert krippendorff_alpha([[1, 1], [1, 1]]) is None  # no variation: undefined
    assert krippendorff_alpha([[1, None], [None, 2]]) is None  # nothing pairable
    with pytest.raises(ValueError, match="need numbers"):
        krippendorff_alpha([["a", "b"], ["b", "b"]], "interval")


def test_cohen_kappa_matches_the_textbook_example() -> None:
    """Cohen's kappa on Wikipedia's example: 50 proposals, both yes 20, A yes B no 5, A no B yes 10,
    both no 15: p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = 0.4."""
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None  # chance agreement 1: undefined
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa(["x"], [])


C, W, U = JudgeItem(score=1.0, correct=True), JudgeItem(score=0.0, correct=False), JudgeItem()


def test_the_report_by_hand() -> None:
    """Three judges, two systems, three tasks. A: s1 C C W, s2 C W W; B: s1 C W W, s2 C C W;
    G (unscored s2/q3): s1 C C W, s2 C W -.
    A vs B: 6 items, same verdict on 4 (p_o 2/3); each judge 3 C and 3 W: p_e 1/2; kappa 1/3.
    A vs G: 5 items both scored, all the same: p_o 1, p_e (3*3 + 2*2)/25 = 13/25, kappa 1.
    B vs G: 5 items, same on q1 q3 of s1 and q1 of s2 (3): p_o 3/5; B C on (s1q1 s2q1 s2q2) = 3 of 5,
    G C on (s1q1 s1q2 s2q1) = 3 of 5: p_e 9/25 + 4/25 = 13/25; kappa (15/25 - 13/25) / (12/25) = 1/6.
    Alpha, nominal, from the coincidence matrix (ordered pairs of different judges' values in a unit,
    each weighted 1 / (values in the unit - 1)): units of 3 values weigh 1/2: s1q1 C C C -> o_CC 3;
    s1q2 C W C -> o_CC 1, o_CW 1, o_WC 1; s1q3 W W W -> o_WW 3; s2q1 C C C -> o_CC 3; s2q2 W C W ->
    o_WW 1, o_CW 1, o_WC 1; s2q3 W W - (2 values, weight 1) -> o_WW 2.
      o_CC = 7, o_WW = 6, o_CW = o_WC = 2; n_C = 9, n_W = 8, n = 17.
      alpha = 1 - (n - 1) * (o_CW + o_WC) / (2 * n_C * n_W) = 1 - 16 * 4 / 144 = 5/9."""
    verdicts = {
        "A": {("q1", "s1", 0): C, ("q2", "s1", 0): C, ("q3", "s1", 0): W,
              ("q1", "s2", 0): C, ("q2", "s2", 0): W, ("q3", "s2", 0): W},
        "B": {("q1", "s1", 0): C, ("q2", "s1", 0): W, ("q3", "s1", 0): W,
              ("q1", "s2", 0): C, ("q2", "s2", 0): C, ("q3", "s2", 0): W},
        "G": {("q1", "s1", 0): C, ("q2", "s1", 0): C, ("q3", "s1", 0): W,
              ("q1", "s2", 0): C, ("q2", "s2", 0): W, ("q3", "s2", 0): U},
    }
    r = agreement(verdicts, scorings={"A": 4, "B": 5, "G": None}, versions={"A": {"p/a": ["a-2026-01-01"]}})
    assert r.items == 6 and r.partly_unscored == 1
    assert r.alpha == pytest.approx(5 / 9) and r.alpha_scores is None  # binary scores: no interval alpha
    pairs = {p.judges: p for p in r.pairs}
    assert (pairs["A", "B"].n, pairs["A", "B"].agreement, pairs["A", "B"].kappa) == (6, pytest.approx(2 / 3),
                                                                                     pytest.approx(1 / 3))
    assert (pairs["A", "G"].n, pairs["A", "G"].kappa) == (5, pytest.approx(1.0))
    assert (pairs["B", "G"].n, pairs["B", "G"].kappa) == (5, pytest.approx(1 / 6))
    assert [(d.task_id, d.system, d.verdicts) for d in r.disagreements] == [
        ("q2", "s1", {"A": "correct", "B": "wrong", "G": "correct"}),
        ("q2", "s2", {"A": "wrong", "B": "correct", "G": "wrong"})]
    s1, s2 = r.systems
    assert s1.accuracy == {"A": pytest.approx(2 / 3), "B": pytest.approx(1 / 3), "G": pytest.approx(2 / 3)}
    assert s2.accuracy == {"A": pytest.approx(1 / 3), "B": pytest.approx(2 / 3), "G": pytest.approx(1 / 2)}
    assert (s1.rank, s2.rank) == ({"A": 1, "B": 2, "G": 1}, {"A": 2, "B": 1, "G": 2})
    assert s1.spread == pytest.approx(1 / 3) and r.ranking_moves
    text = "\n".join(lines(r))
    assert "Krippendorff's alpha (nominal, correct/wrong) 0.556" in text
    assert "A vs B: Cohen's kappa 0.333, same verdict on 4 of 6 items (66.7%)" in text
    assert "A: returned model p/a: a-2026-01-01 (scoring #4)" in text and "G: returned model no model call made" in text
    assert "ranking: moves between judges for s1, s2" in text
    assert "q2 (s1, attempt 0): A correct, B wrong, G correct" in text


def test_partial_scores_are_compared_as_levels_and_ties_share_a_rank() -> None:
    """Two judges' scores on three items, (1, .5), (.5, .5), (1, 1): two levels, so ordinal; with two
    levels every disagreement is as far as any other: o(1,.5) = o(.5,1) = 1, o(.5,.5) = 2, o(1,1) = 2;
    n_1 = 3, n_.5 = 3, n = 6; alpha = 1 - (6 - 1) * 2 / (2 * 3 * 3) = 4/9. Quadratic-weighted kappa
    on two levels is Cohen's: A (1, .5, 1), B (.5, .5, 1): p_o 2/3, p_e 2/3 * 1/3 + 1/3 * 2/3 = 4/9,
    kappa (2/3 - 4/9) / (5/9) = 2/5."""
    half = JudgeItem(score=0.5, correct=True)
    r = agreement({"A": {("q1", "s", 0): C, ("q2", "s", 0): half, ("q1", "t", 0): C},
                   "B": {("q1", "s", 0): half, ("q2", "s", 0): half, ("q1", "t", 0): C}})
    assert r.scores_level == "ordinal" and r.alpha_scores == pytest.approx(4 / 9)
    assert r.pairs[0].weighted_kappa == pytest.approx(2 / 5) and r.pairs[0].kappa is None  # all correct
    assert r.alpha is None  # every verdict is correct: no variation, alpha undefined
    assert [s.rank for s in r.systems] == [{"A": 1, "B": 1}, {"A": 1, "B": 1}] and not r.ranking_moves
    assert "ranking: the same under every judge" in lines(r)
    assert "on the scores (ordinal) 0.444" in lines(r)[0]


def test_many_score_levels_are_a_scale() -> None:
    """Six levels: interval. A (0, .2, .4), B (.2, .4, .6), one step apart everywhere: observed
    sum 6 * 0.04 = 0.24; values 0, .2 (x2), .4 (x2), .6, n = 6, expected sum over ordered pairs of
    n_c n_k (c - k)^2 = 2 * (2*.04 + 2*.16 + 1*.36 + 4*.04 + 2*.16 + 2*.04) = 2.64; alpha = 1 - 5 * 0.24 / 2.64."""
    def at(x: float) -> JudgeItem:
        return JudgeItem(score=x, correct=x >= 0.5)

    r = agreement({"A": {("a", "s", 0): at(0.0), ("b", "s", 0): at(0.2), ("c", "s", 0): at(0.4), ("d", "s", 0): at(0.8),
                         ("e", "s", 0): at(0.9)},
                   "B": {("a", "s", 0): at(0.2), ("b", "s", 0): at(0.4), ("c", "s", 0): at(0.6)}})
    assert r.scores_level == "interval" and r.pairs[0].weighted_kappa is None
    assert r.alpha_scores == pytest.approx(1 - 5 * 0.24 / 2.64)


def test_several_judges_are_refused_where_they_cannot_be_compared() -> None:
    with pytest.raises(UserError, match="given twice"):
        check_judges(["a", "b", "a"], run_dir=True, items_out=False, scorer=False)
    with pytest.raises(UserError, match="predictions file takes one --judge"):
        check_judges(["a", "b"], run_dir=False, items_out=False, scorer=False)
    with pytest.raises(UserError, match="--items-out writes one judge's items"):
        check_judges(["a", "b"], run_dir=True, items_out=True, scorer=False)
    with pytest.raises(UserError, match="--scorer"):
        check_judges(["a", "b"], run_dir=True, items_out=False, scorer=True)


class Versioned:
    """A judge model whose provider names the snapshot that answered."""

    def __init__(self, version: str) -> None:
        self.id, self.version = "p/judge", version

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(message=Message(role="assistant", content="correct"), model=self.version)

    async def aclose(self) -> None:
        return None


def _judge_once(store: RunStore, version: str) -> dict[str, set[str]]:
    model = recorded(Versioned(version), "llm_judge")

    async def go() -> None:
        with episode("q1"):
            await model.complete(ChatRequest(messages=[Message(role="user", content="judge this")]))

    with returned_versions() as seen, recording(store, "sys", 0):
        asyncio.run(go())
    return seen


def test_the_returned_version_is_kept_with_the_verdict_and_a_change_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = RunStore(tmp_path / "run")
    assert _judge_once(store, "judge-2026-01-01") == {"p/judge": {"judge-2026-01-01"}}
    call = store.judge_transcripts("q1", "sys")["llm_judge"].events[0]
    assert call.reply is not None and call.reply["model"] == "judge-2026-01-01"  # with the verdict
    assert store.meta(VERSIONS_META) == {"p/judge": ["judge-2026-01-01"]}
    _judge_once(store, "judge-2026-01-01")
    assert "answered as" not in capsys.readouterr().err  # the same version: nothing said
    _judge_once(store, "judge-2026-03-01")
    said = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(said) == 1 and "judge p/judge answered as judge-2026-03-01 this time" in said[0]
    assert "came from judge-2026-01-01" in said[0]
    assert store.meta(VERSIONS_META) == {"p/judge": ["judge-2026-03-01"]}


# -- end to end: a docqa run with two systems, scored by two scripted judges -------------------------------

TASKS = [("j1", "Which vehicle rental rates are given for the winter season (judges-1)?", "Mountain car"),
         ("j2", "Which helicopter model is listed besides the Bell 407 (judges-2)?", "Bell 412"),
         ("j3", "Which city is the operator's base (judges-3)?", "Zermatt")]
AGENTS = ("agent-x", "agent-y")
# (judge, agent, task) -> correct? judge-a: x C C W, y C W W; judge-b: x C W W, y C C W
# (the hand-computed case above without G: kappa 1/3, alpha 1 - 11 * 4 / (2 * 6 * 6) = 7/18)
SAYS = {("judge-a", "agent-x"): (True, True, False), ("judge-a", "agent-y"): (True, False, False),
        ("judge-b", "agent-x"): (True, False, False), ("judge-b", "agent-y"): (True, True, False)}


def _script(body: dict[str, Any], n: int) -> dict[str, Any]:
    asked = json.dumps(body["messages"], ensure_ascii=False)
    index = next(i for i, t in enumerate(TASKS) if t[1] in asked)
    if body["model"] in ("judge-a", "judge-b"):
        agent = next(a for a in AGENTS if f"answer of {a}" in asked)
        right = SAYS[body["model"], agent][index]
        return {"kind": "tool", "name": "submit_judgment", "arguments": json.dumps(
            {"judgment": "correct" if right else "incorrect", "main_issue": "none", "explanation": "scripted"})}
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(
        {"answer": [f"answer of {body['model']}"], "citations": [{"file": "alpha.pdf", "page": 1}]})}


def test_score_with_two_judges_end_to_end(tmp_path: Path) -> None:
    corpus = write_operator_corpus(tmp_path)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(
        {"id": i, "question": q, "answer_variants": [[g]], "evidence": [{"document": "alpha.pdf", "page": 1}]}) + "\n"
        for i, q, g in TASKS))
    out, env = tmp_path / "run", {"DESKBENCH_CACHE_DIR": str(tmp_path / "cache")}
    with FakeOpenAI(script=_script) as fake:
        for agent in AGENTS:  # two systems in one run, one at a time
            ran = run_cli("run", "--agent", "bm25-agent", "--tasks", str(tmp_path / "tasks.jsonl"), "--corpus",
                          str(corpus.root), "--view", "text", "--out", str(out), "--model",
                          f"openai-compat/{agent}@{fake.base_url}", "--concurrency", "1", "--quiet", env=env)
            assert ran.returncode == 0, ran.stderr
        judges = [f"openai-compat/{j}@{fake.base_url}" for j in ("judge-a", "judge-b")]
        flags = [arg for j in judges for arg in ("--judge", j)]
        shown = run_cli("score", str(out), *flags, env=env)
        assert shown.returncode == 0, shown.stderr
        asked, stored = len(fake.requests), len(RunStore(out, create=False).scorings())
        # a second go, the response cache gone: the stored scorings still hold, nothing is asked again
        got = run_cli("score", str(out), *flags, "--json", env={"DESKBENCH_CACHE_DIR": str(tmp_path / "other")})
        assert got.returncode == 0, got.stderr
        assert len(fake.requests) == asked and len(RunStore(out, create=False).scorings()) == stored
        again = run_cli("score", str(out), *flags, env={"DESKBENCH_CACHE_DIR": str(tmp_path / "other")})
        assert again.returncode == 0 and len(fake.requests) == asked
        assert again.stdout.count("still hold for every episode: read from the run, nothing asked again") == 2
        # other judge settings are another scoring: asked (12 verdicts), stored
        hot = run_cli("score", str(out), *flags, "--judge-temperature", "0.5", "--json",
                      env={"DESKBENCH_CACHE_DIR": str(tmp_path / "other")})
        assert hot.returncode == 0, hot.stderr
        assert len(fake.requests) == asked + 12 and json.loads(hot.stdout)["agreement"]["reused"] == []
        with sqlite3.connect(out / "run.sqlite") as con:  # one episode as if run again after every scoring
            assert con.execute("UPDATE episodes SET finished_at = '2999-01-01T00:00:00+00:00' WHERE task_id = 'j1'"
                               " AND system = ?", (f"bm25-agent:openai-compat/{AGENTS[0]}",)).rowcount == 1
        rerun = run_cli("score", str(out), *flags, "--json", env={"DESKBENCH_CACHE_DIR": str(tmp_path / "third")})
        assert rerun.returncode == 0, rerun.stderr
        assert json.loads(rerun.stdout)["agreement"]["reused"] == [] and len(fake.requests) == asked + 24
    a, b = judges
    sx, sy = (f"bm25-agent:openai-compat/{x}" for x in AGENTS)
    text = shown.stdout
    assert f"judge {a}" in text and f"judge {b}" in text and "judges compared" in text  # each judge's table, then
    assert "Krippendorff's alpha (nominal, correct/wrong) 0.389" in text
    assert f"{a} vs {b}: Cohen's kappa 0.333, same verdict on 4 of 6 items (66.7%)" in text
    assert f"j2 ({sx}, attempt 0): {a} correct, {b} wrong" in text
    assert f"ranking: moves between judges for {sx}, {sy}" in text
    doc = json.loads(got.stdout)
    assert set(doc["judges"]) == {a, b} and set(doc["judges"][a]) == {sx, sy}  # each as `score --json` gives it
    report = doc["agreement"]
    assert report["reused"] == [a, b]
    assert report["alpha"] == pytest.approx(7 / 18) and report["pairs"][0]["kappa"] == pytest.approx(1 / 3)
    assert len(report["disagreements"]) == 2
    rows = {s["system"]: s for s in report["systems"]}
    assert rows[sx]["accuracy"] == {a: pytest.approx(2 / 3), b: pytest.approx(1 / 3)}
    assert rows[sx]["rank"] == {a: 1, b: 2} and rows[sy]["rank"] == {a: 2, b: 1}
    assert f"{a}: returned model openai-compat/judge-a: judge-a (scoring #" in text  # what the provider's reply named
    judged = [s for s in RunStore(out, create=False).scorings() if s.settings.flags.get("judge")]
    assert [s.settings.flags["judge"] for s in judged] == [a, b] * 3  # a stored scoring per judge, per go that asked
    assert report["scorings"] == {a: judged[0].id, b: judged[1].id}  # the first go's, read back
    assert [s.settings.judge_sampling.get("temperature") for s in judged] == [None, None, 0.5, 0.5, None, None]
