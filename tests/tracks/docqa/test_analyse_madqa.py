"""`analyse effort | failures | trajectories | cost | human-time | corpus-stats` (the MADQA
appendix analyses): every number worked out by hand in the comments beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from conftest import run_cli
from typer.testing import CliRunner

from deskbench.models.types import Usage
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import Citation, PageViewStep, ToolCallStep
from deskbench.tracks.docqa.analysis.corpus_stats import corpus_stats
from deskbench.tracks.docqa.analysis.cost import cost_figure, cost_report
from deskbench.tracks.docqa.analysis.effort import effort_report, system_effort
from deskbench.tracks.docqa.analysis.failures import failures_report
from deskbench.tracks.docqa.analysis.human_time import human_time_report, time_bin
from deskbench.tracks.docqa.analysis.scored import ScoredSystem, load_scored
from deskbench.tracks.docqa.analysis.trajectories import trajectory_report
from deskbench.tracks.docqa.cli.analyse_madqa import register
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, Evidence, ItemScore


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("noop")(lambda: None)  # two commands: typer keeps sub-command names
    register(app)
    return app


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(_app(), list(args))
    return result.exit_code, result.output


def _at(seconds: float) -> str:
    whole, frac = divmod(seconds, 1)
    return f"2025-01-01T00:{int(whole) // 60:02d}:{int(whole) % 60:02d}.{round(frac * 1000):03d}+00:00"


def episode(tid: str, *, steps: int | None = None, tokens: tuple[int, int] = (0, 0), seconds: float = 0.0,
            cost: float | None = 0.0, answer: str = "x", system: str = "s",
            trajectory: list | None = None, status: str = "ok") -> Episode:
    sub = DocQASubmission(id=tid, answer=[answer] if answer else [], steps=steps) if status == "ok" else None
    return Episode(task_id=tid, system=system, status=status, submission=sub, trajectory=trajectory or [],
                   usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1], cost_usd=cost),
                   started_at=_at(0), finished_at=_at(seconds))


def item(tid: str, acc: float | None, *, effort: float | None = None, doc_f1: float = 0.0, page_f1: float = 0.0,
         hop: str = "single", domain: str | None = None, status: str = "scored") -> ItemScore:
    return ItemScore(id=tid, status=status, hop_type=hop, domain=domain, accuracy=acc, effort=effort,  # type: ignore[arg-type]
                     doc_f1=doc_f1, page_f1=page_f1)


def task(tid: str, *pages: tuple[str, int], domain: str | None = None, category: str | None = None) -> DocQATask:
    return DocQATask(id=tid, question=f"{tid}?", answer_variants=[["yes"]], domain=domain, document_category=category,
                     evidence=[Evidence(document=d, page=p) for d, p in pages])


# -- effort (Tables 11-12) ----------------------------------------------------------------------

# t0..t3: steps 1 2 3 4; tokens (in, out) (100, 10) (300, 20) (200, 40) (400, 30); seconds 10 30 20 40
EFFORT = {"t0": (1, (100, 10), 10.0), "t1": (2, (300, 20), 30.0), "t2": (3, (200, 40), 20.0), "t3": (4, (400, 30), 40.0)}


def effort_system(accs: list[float], label: str = "a") -> ScoredSystem:
    tids = list(EFFORT)
    return ScoredSystem(
        label=label, tasks=[task(t, ("a.pdf", 1)) for t in tids],
        items=[item(t, a, effort=float(EFFORT[t][0])) for t, a in zip(tids, accs, strict=True)],
        episodes={t: episode(t, steps=s, tokens=tok, seconds=sec) for t, (s, tok, sec) in EFFORT.items()})


def test_kuiper_under_each_effort_measure_with_binary_correctness() -> None:
    # accuracy 1, 0.5, 0, 0 -> correct (>= 0.5) 1, 1, 0, 0; mean 0.5
    s = system_effort(effort_system([1.0, 0.5, 0.0, 0.0]))
    k = {c.measure: c.kuiper for c in s.kuiper}
    # steps 1 2 3 4: y 1 1 0 0 -> D 0 .5 1 .5 0 -> K 1
    # (on the raw 1, .5, 0, 0 - mean .375 - D would be 0 .625 .75 .375 0: K .75; binarised it is 1)
    assert k["steps"] == pytest.approx(1.0)
    # total tokens 110 320 240 430: order t0 t2 t1 t3, y 1 0 1 0 -> D 0 .5 0 .5 0 -> K .5
    assert k["tokens_total"] == pytest.approx(0.5)
    # generated 10 20 40 30: order t0 t1 t3 t2, y 1 1 0 0 -> K 1
    assert k["tokens_generated"] == pytest.approx(1.0)
    # seconds 10 30 20 40: order t0 t2 t1 t3, y 1 0 1 0 -> K .5
    assert k["time"] == pytest.approx(0.5)
    assert s.accuracy == pytest.approx(1.5 / 4) and s.n == 4
    rho = {(p.a, p.b): p.rho for p in s.spearman}
    # ranks: steps 1 2 3 4, total 1 3 2 4, generated 1 2 4 3, time 1 3 2 4; rho = 1 - 6 sum d^2 / (n (n^2 - 1))
    assert rho[("steps", "tokens_total")] == pytest.approx(1 - 6 * 2 / 60)  # d^2: 0 1 1 0
    assert rho[("steps", "tokens_generated")] == pytest.approx(1 - 6 * 2 / 60)  # 0 0 1 1
    assert rho[("tokens_total", "tokens_generated")] == pytest.approx(1 - 6 * 6 / 60)  # 0 1 4 1
    assert rho[("tokens_total", "time")] == pytest.approx(1.0)
    assert len(s.spearman) == 6 and all(p.n == 4 and p.reason is None for p in s.spearman)


def test_a_measure_the_run_did_not_record_is_not_computable_never_zero() -> None:
    base = effort_system([1.0, 1.0, 0.0, 0.0])
    no_tokens = ScoredSystem("human", base.tasks, base.items,
                             {t: episode(t, steps=s, seconds=sec) for t, (s, _, sec) in EFFORT.items()})
    some = dict(base.episodes)
    some["t2"] = episode("t2", steps=3, tokens=(0, 0), seconds=20.0)
    partial = ScoredSystem("partial", base.tasks, base.items, some)
    rep = effort_report([no_tokens, partial])
    h, p = rep.systems
    assert [(k.measure, k.kuiper, k.reason) for k in h.kuiper] == [
        ("steps", pytest.approx(1.0), None),
        ("tokens_total", None, "not computable: no token counts stored"),
        ("tokens_generated", None, "not computable: no output token counts stored"),
        ("time", pytest.approx(0.5), None)]
    assert p.kuiper[1].reason == "not computable: no token counts for 1 of 4 items" and p.kuiper[1].kuiper is None
    pair = next(x for x in h.spearman if (x.a, x.b) == ("steps", "tokens_total"))
    assert pair.rho is None and pair.reason == "tokens_total: not computable: no token counts stored"
    # an imported prediction: no episode timing, the tokens and seconds its submission reports
    imported = {t: Episode(task_id=t, system="rlm", status="ok", started_at=_at(0), finished_at=_at(0),
                           submission=DocQASubmission(id=t, answer=["x"], usage={
                               "input_tokens": tok[0], "output_tokens": tok[1], "seconds": sec}))
                for t, (_, tok, sec) in EFFORT.items()}
    rlm = system_effort(ScoredSystem("rlm", base.tasks, base.items, imported))
    assert [k.kuiper for k in rlm.kuiper] == pytest.approx([1.0, 0.5, 1.0, 0.5])  # as the episodes above
    # one token count for every item: a fixed budget, not a Kuiper of 0
    fixed = ScoredSystem("fixed", base.tasks, base.items,
                         {t: episode(t, steps=s, tokens=(50, 5), seconds=sec) for t, (s, _, sec) in EFFORT.items()})
    f = system_effort(fixed)
    assert (f.kuiper[1].kuiper, f.kuiper[1].reason) == (None, "not computable: every item has the same tokens_total (55)")
    assert f.kuiper[0].kuiper == pytest.approx(1.0)
    # every item correct: Kuiper is undefined under every measure, and says why
    flat = system_effort(effort_system([1.0, 1.0, 1.0, 1.0]))
    assert all(k.kuiper is None and k.reason and k.reason.startswith("not computable: accuracy is 1") for k in flat.kuiper)


def _store(run_dir: Path, tasks: list[DocQATask], episodes: list[Episode]) -> Path:
    store = RunStore(run_dir)
    store.save_tasks(tasks)
    for ep in episodes:
        store.record(ep)
    store.close()
    return run_dir


def test_effort_command_writes_the_json_and_a_plot(tmp_path: Path) -> None:
    tasks = [task(t, ("a.pdf", 1)) for t in EFFORT]
    answers = {"t0": "yes", "t1": "yes", "t2": "no", "t3": "no"}
    run = _store(tmp_path / "run", tasks, [episode(t, steps=s, tokens=tok, seconds=sec, answer=answers[t])
                                           for t, (s, tok, sec) in EFFORT.items()])
    code, out = cli("effort", str(run), "--output", str(tmp_path / "e.json"), "--plot", str(tmp_path / "e.png"))
    assert code == 0, out
    data = json.loads((tmp_path / "e.json").read_text())
    assert [k["kuiper"] for k in data["systems"][0]["kuiper"]] == pytest.approx([1.0, 0.5, 1.0, 0.5])
    assert (tmp_path / "e.png").read_bytes().startswith(b"\x89PNG")
    assert "s: Kuiper steps 1.0; tokens_total 0.5" in out
    assert load_scored([run])[0].episodes["t3"].usage.output_tokens == 30


# -- failures (Figures 16-19) -------------------------------------------------------------------

# (hop type, domain, accuracy, doc F1, page F1, answer); answer None = the episode failed
FAIL = {
    "t0": ("single", "fin", 1.0, 1.0, 1.0, "x"),  # correct, evidence page cited
    "t1": ("single", "fin", 0.0, 0.0, 0.0, "Not found."),  # retrieval (an answer, not a refusal)
    "t2": ("cross_page", "legal", 0.0, 1.0, 0.0, "x"),  # navigation
    "t3": ("cross_page", "legal", 0.0, 1.0, 0.5, "x"),  # comprehension
    "t4": ("cross_doc", "legal", 0.0, 0.0, 0.0, None),  # refusal: no submission
    "t5": ("cross_doc", None, 1.0, 0.0, 0.0, "x"),  # correct without citing evidence
    "t6": ("single", "fin", None, 1.0, 1.0, "x"),  # unscored (a failed judge call): in no count
}


def fail_system(label: str, wrong: bool = False) -> ScoredSystem:
    items, episodes = [], {}
    for tid, (hop, dom, acc, doc, page, ans) in FAIL.items():
        if wrong and acc is not None:
            acc, doc, page = 0.0, 0.0, 0.0
        status = "missing" if ans is None else "unscored" if acc is None else "scored"
        items.append(item(tid, acc if ans is not None else 0.0, doc_f1=doc, page_f1=page, hop=hop, domain=dom,
                          status=status))
        episodes[tid] = episode(tid, answer=ans or "", status="ok" if ans is not None else "error")
    return ScoredSystem(label, [task(t, ("a.pdf", 1)) for t in FAIL], items, episodes)


def test_failure_profiles_by_hop_type_domain_and_cascade() -> None:
    rep = failures_report([fail_system("b", wrong=True), fail_system("a")], top=1)
    b, a = rep.systems
    counts = {"retrieval": 1, "navigation": 1, "comprehension": 1, "refusal": 1}
    assert (a.overall.n, a.overall.correct, a.overall.counts) == (6, 2, counts)  # t6 unscored: left out
    assert (a.retrieval_rate, a.comprehension_rate) == (pytest.approx(1 / 6), pytest.approx(1 / 6))
    assert {k: (v.n, v.correct, v.counts["retrieval"], v.counts["navigation"], v.counts["comprehension"],
                v.counts["refusal"]) for k, v in a.by_hop_type.items()} == {
        "single": (2, 1, 1, 0, 0, 0), "cross_page": (2, 0, 0, 1, 1, 0), "cross_doc": (2, 1, 0, 0, 0, 1)}
    assert {k: (v.n, v.correct) for k, v in a.by_domain.items()} == {"fin": (2, 1), "legal": (3, 0), "(none)": (1, 1)}
    # funnel: 6 -> doc found t0 t2 t3 -> page found t0 t3 -> correct t0; t5 correct without a page
    assert a.cascade.model_dump() == {"n": 6, "doc_found": 3, "page_found": 2, "correct": 1, "correct_without_page": 1}
    # b: every scored answer wrong and uncited -> retrieval, t4 still a refusal
    assert b.overall.counts == {"retrieval": 5, "navigation": 0, "comprehension": 0, "refusal": 1}
    assert rep.top == ["a"] and rep.top_by_hop_type["single"] == a.by_hop_type["single"]
    both = failures_report([fail_system("b", wrong=True), fail_system("a")], top=2)
    assert both.top == ["a", "b"]
    single = both.top_by_hop_type["single"]  # a: correct + retrieval, b: 2 retrieval
    assert (single.n, single.correct, single.counts["retrieval"], single.accuracy) == (4, 1, 3, 0.25)
    assert both.top_by_domain["legal"].counts == {"retrieval": 2, "navigation": 1, "comprehension": 1, "refusal": 2}


def test_failures_command(tmp_path: Path) -> None:
    tasks = [task("t0", ("a.pdf", 1), domain="fin"), task("t1", ("a.pdf", 2), ("b.pdf", 1), domain="fin")]
    cites = {"t0": [Citation(document="a.pdf", page=1)], "t1": [Citation(document="a.pdf", page=3)]}
    eps = [Episode(task_id=t, system="s", status="ok", submission=DocQASubmission(id=t, answer=[a], citations=cites[t]))
           for t, a in (("t0", "yes"), ("t1", "no"))]
    run = _store(tmp_path / "run", tasks, eps)
    code, out = cli("failures", str(run), "--output", str(tmp_path / "f.json"), "--plot", str(tmp_path / "f.png"))
    assert code == 0, out
    s = json.loads((tmp_path / "f.json").read_text())["systems"][0]
    # t1: wrong, cites a.pdf (an evidence document) but page 3 (not evidence) -> navigation
    assert s["overall"]["counts"] == {"retrieval": 0, "navigation": 1, "comprehension": 0, "refusal": 0}
    assert s["by_hop_type"]["cross_doc"]["counts"]["navigation"] == 1 and s["cascade"]["page_found"] == 1
    assert "s: 1/2 correct" in out and (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")


# -- trajectories (Figures 22-23) ---------------------------------------------------------------

TRAJ_TASKS = [task("q1", ("a.pdf", 1)), task("q2", ("a.pdf", 2), ("a.pdf", 3)), task("q3", ("b.pdf", 1)),
              task("q4", ("c.pdf", 1))]


def _search(*pages: tuple[str, int]) -> ToolCallStep:
    return ToolCallStep(name="search_documents", arguments={"query": "q"}, result={"pages": [list(p) for p in pages]})


TRAJ = {
    "q1": [_search(("a.pdf", 1))],  # gold document and page at search 1
    "q2": [_search(("x.pdf", 1)), _search(("a.pdf", 2)), _search(("a.pdf", 3), ("a.pdf", 2))],  # doc at 2; pages 1/2 then 2/2
    "q3": [PageViewStep(document="b.pdf", page=1), _search(("x.pdf", 1)), _search(("x.pdf", 2))],  # a viewed page is not a result
    "q4": [],  # no search at all
}


def traj_system(label: str, trajectories: dict[str, list]) -> ScoredSystem:
    return ScoredSystem(label, TRAJ_TASKS, [item(t.id, 0.0) for t in TRAJ_TASKS],
                        {t: episode(t, trajectory=steps) for t, steps in trajectories.items()})


def test_evidence_found_by_iteration_and_recovery() -> None:
    rlm = {t: [ToolCallStep(name="repl", arguments={"code": "x"}, result={"stdout": "a.pdf"})] for t in TRAJ}
    rep = trajectory_report([traj_system("agent", TRAJ), traj_system("rlm", rlm)])
    assert rep.iterations == [1, 2, 3]  # the most searches of any episode
    a, r = rep.systems
    assert a.questions == 4 and a.reason is None
    assert a.document == pytest.approx([1 / 4, 2 / 4, 2 / 4])  # q1 at 1, q2 at 2, q3 q4 never
    # mean share of gold pages seen: N=1 (1 + 0 + 0 + 0) / 4, N=2 (1 + 1/2) / 4, N=3 (1 + 1) / 4
    assert a.page == pytest.approx([0.25, 0.375, 0.5])
    assert a.page_any == pytest.approx([0.25, 0.5, 0.5])
    # first search missed the gold document: q2 (found at 2) and q3 (never); q4 made no search
    assert (a.recovery_n, a.recovered, a.recovery_rate) == (2, 1, 0.5)
    q = {x.id: x for x in a.per_question}
    assert (q["q2"].doc_found_at, q["q2"].page_found_at, q["q2"].page_share) == (2, 2, [0.0, 0.5, 1.0])
    assert q["q3"].searches == 2 and q["q3"].doc_found_at is None
    assert r.reason == "not computable: its trajectories hold no search results (tool calls with result pages)"
    assert (r.document, r.recovery_rate) == ([], None)


def test_trajectories_command(tmp_path: Path) -> None:
    eps = [episode(t, trajectory=steps) for t, steps in TRAJ.items()]
    run = _store(tmp_path / "run", TRAJ_TASKS, eps)
    code, out = cli("trajectories", str(run), "--output", str(tmp_path / "t.json"), "--plot", str(tmp_path / "t.png"))
    assert code == 0, out
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["systems"][0]["document"] == pytest.approx([0.25, 0.5, 0.5])
    assert "s: gold document found at search 1 25.0%, by 3 50.0%; recovery 50.0% (n=2)" in out
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")


# -- cost (Figure 7) ----------------------------------------------------------------------------


def cost_system(label: str, costs: list[float | None], tokens: tuple[int, int] = (100, 10)) -> ScoredSystem:
    tids = [f"t{k}" for k in range(len(costs))]
    accs = [1.0, 1.0, 0.0, 0.5][: len(costs)]
    return ScoredSystem(label, [task(t, ("a.pdf", 1)) for t in tids],
                        [item(t, a) for t, a in zip(tids, accs, strict=True)],
                        {t: episode(t, cost=c, tokens=tokens) for t, c in zip(tids, costs, strict=True)})


def test_cost_and_accuracy_with_unknown_costs_kept_apart_from_zero() -> None:
    rep = cost_report([cost_system("paid", [0.01] * 4), cost_system("unpriced", [0.01, None, 0.01, 0.01]),
                       cost_system("human", [0.0] * 4, tokens=(0, 0)), cost_system("local", [0.0] * 4)])
    paid, unpriced, human, local = rep.systems
    # accuracy (1 + 1 + 0 + .5) / 4; correct (>= .5): 3; cost 4 x $0.01
    assert paid.accuracy == pytest.approx(0.625) and paid.cost_usd == pytest.approx(0.04)
    assert paid.cost_per_item == pytest.approx(0.01) and paid.cost_per_correct == pytest.approx(0.04 / 3)
    assert (paid.input_tokens, paid.output_tokens, paid.reason) == (400, 40, None)
    assert unpriced.cost_usd is None and unpriced.cost_per_item is None
    assert unpriced.reason == "cost unknown (?): a model without a price was called"
    assert human.cost_usd is None and human.reason == "not computable: no model usage recorded"
    assert local.cost_usd == 0.0 and local.reason is None  # a model priced at 0: a real $0
    fig = cost_figure(rep)
    note = " ".join(t.get_text() for t in fig.texts)
    assert "unpriced (?)" in note and "human (no model usage)" in note and "local" not in note
    assert len(fig.axes[0].collections) == 2  # paid and local are the only points


def test_cost_command(tmp_path: Path) -> None:
    tasks = [task("t0", ("a.pdf", 1)), task("t1", ("a.pdf", 1))]
    run = _store(tmp_path / "run", tasks, [episode("t0", answer="yes", cost=0.5, tokens=(10, 1)),
                                           episode("t1", answer="no", cost=None, tokens=(10, 1))])
    code, out = cli("cost", str(run), "--output", str(tmp_path / "c.json"), "--plot", str(tmp_path / "c.png"))
    assert code == 0, out
    s = json.loads((tmp_path / "c.json").read_text())["systems"][0]
    assert s["cost_usd"] is None and s["accuracy"] == 0.5
    assert "s: accuracy 50.0%, cost ? over 2 episodes" in out


# -- human response time ------------------------------------------------------------------------

# seconds and accuracy; t6 has no recorded time (start = end)
HUMAN = {"t0": (30, 1.0), "t1": (50, 0.0), "t2": (90, 1.0), "t3": (150, 1.0), "t4": (300, 0.5), "t5": (700, 0.0),
         "t6": (0, 1.0)}


def human_system(label: str = "human:alice") -> ScoredSystem:
    return ScoredSystem(label, [task(t, ("a.pdf", 1)) for t in HUMAN], [item(t, a) for t, (_, a) in HUMAN.items()],
                        {t: episode(t, seconds=s, system=label) for t, (s, _) in HUMAN.items()})


def test_human_response_time_against_accuracy() -> None:
    agent = cost_system("agent", [0.01] * 4)
    rep = human_time_report([agent, human_system()])
    (h,) = rep.systems  # agents are not analysed here
    assert (h.system, h.n, h.untimed) == ("human:alice", 6, 1)
    # seconds 30 50 90 150 300 700: median (90 + 150) / 2 = 120 s, mean 1320 / 6 = 220 s
    assert h.median_minutes == pytest.approx(2.0) and h.mean_minutes == pytest.approx(220 / 60)
    # quartiles, linear: position 1.25 -> 50 + .25 x 40 = 60 s; position 3.75 -> 150 + .75 x 150 = 262.5 s
    assert (h.q1_minutes, h.q3_minutes) == (pytest.approx(1.0), pytest.approx(262.5 / 60))
    # minutes .5 .83 | 1.5 | 2.5 | 5 | 11.7
    assert [(b.bin, b.n, b.accuracy) for b in h.bins] == [
        ("<1", 2, 0.5), ("1-2", 1, 1.0), ("2-4", 1, 1.0), ("4-10", 1, 0.5), ("10+", 1, 0.0)]
    # ranks: time 1..6; accuracy 1 0 1 1 .5 0 -> 5 1.5 5 5 3 1.5; sum dx dy = -6.5, sum dx^2 17.5, sum dy^2 15
    assert h.spearman_rho == pytest.approx(-6.5 / (17.5 * 15) ** 0.5)
    assert time_bin(1.0) == "1-2" and time_bin(0.0) == "<1" and time_bin(10.0) == "10+"


def test_human_time_command(tmp_path: Path) -> None:
    tasks = [task(t, ("a.pdf", 1)) for t in HUMAN]
    eps = [episode(t, seconds=s, system=sys_, answer="yes" if a else "no")
           for t, (s, a) in HUMAN.items() for sys_ in ("human:alice", "agent") if sys_ == "human:alice" or t == "t0"]
    run = _store(tmp_path / "run", tasks, eps)
    code, out = cli("human-time", str(run), "--output", str(tmp_path / "h.json"), "--plot", str(tmp_path / "h.png"),
                    "--pool-humans")
    assert code == 0, out
    (s,) = json.loads((tmp_path / "h.json").read_text())["systems"]
    assert s["system"] == "human" and s["n"] == 6 and s["median_minutes"] == pytest.approx(2.0)
    assert "human: median 2.0 min" in out
    agent_only = _store(tmp_path / "agents", tasks[:1], [episode("t0", seconds=5)])
    proc = run_cli("analyse", "human-time", str(agent_only), "--output", str(tmp_path / "x.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: the runs hold no human episodes (human:NAME or human-oracle:NAME); people answer through 'deskbench serve'"]


# -- corpus statistics (Tables 2 and 6) ---------------------------------------------------------

PAGE_COUNTS = {"a.pdf": 10, "b.pdf": 2, "c.pdf": 5, "d.pdf": 1, "e.pdf": 3}
CORPUS_TASKS = [
    task("q1", ("a.pdf", 1), domain="Financial", category="Annual Report"),
    task("q2", ("a.pdf", 3), ("a.pdf", 4), domain="Financial", category="Annual Report"),
    task("q3", ("a.pdf", 2), ("b.pdf", 1), domain="Financial", category="Annual Report"),
    task("q4", ("c.pdf", 1), domain="Legal", category="Verdict form"),
    task("q5", ("c.pdf", 2), domain="Legal", category="Fine"),  # c: one Verdict form, one Fine -> Fine (a-z)
    task("q6", ("d.pdf", 1), domain="Legal", category="Fine"),
    task("q7", ("z.pdf", 1), domain="Events", category="Poster"),  # z is not in the corpus
]


def test_corpus_statistics_by_domain_and_category() -> None:
    st = corpus_stats(CORPUS_TASKS, PAGE_COUNTS)
    assert (st.documents, st.pages, st.questions) == (5, 21, 7)
    # pages per document 10 2 5 1 3: mean 21 / 5, median 3, max 10
    assert (st.mean_pages, st.median_pages, st.max_pages) == (pytest.approx(4.2), 3.0, 10)
    assert st.hop_types == {"single": 5, "cross_page": 1, "cross_doc": 1}
    # Financial: a (10) and b (2); Legal: c (5) and d (1); e cited by nobody; Events: its document is missing
    assert [(r.domain, r.docs, r.pages, r.pages_per_doc, r.questions, r.questions_per_doc) for r in st.by_domain] == [
        ("Financial", 2, 12, 6.0, 3, 1.5), ("Legal", 2, 6, 3.0, 3, 1.5), ("Events", 0, 0, None, 1, None),
        ("(no question)", 1, 3, 3.0, 0, 0.0)]
    assert [(r.category, r.docs, r.pages, r.mean, r.median, r.max) for r in st.by_category] == [
        ("Annual Report", 2, 12, 6.0, 6.0, 10), ("Fine", 2, 6, 3.0, 3.0, 5), ("(no question)", 1, 3, 3.0, 3.0, 3)]
    assert st.mixed_labels == ["c.pdf"] and st.missing_documents == ["z.pdf"]


def test_corpus_stats_command(tmp_path: Path, operator_corpus) -> None:  # noqa: ANN001
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(t.model_dump_json() for t in [
        task("q1", ("alpha.pdf", 1), domain="Reports", category="Annual Report"),
        task("q2", ("beta.pdf", 2), domain="Reference", category="Catalog")]) + "\n")
    code, out = cli("corpus-stats", "--tasks", str(tasks), "--corpus", str(operator_corpus.root),
                    "--output", str(tmp_path / "c.json"), "--plot", str(tmp_path / "c.png"))
    assert code == 0, out
    data = json.loads((tmp_path / "c.json").read_text())
    assert (data["documents"], data["pages"], data["max_pages"]) == (2, 5, 3)  # alpha 3 pages, beta 2
    assert [(r["domain"], r["docs"], r["pages"]) for r in data["by_domain"]] == [("Reference", 1, 2), ("Reports", 1, 3)]
    assert "2 documents, 5 pages (median 2.5, mean 2.5, max 3), 2 questions" in out
    proc = run_cli("analyse", "corpus-stats", "--tasks", str(tasks), "--corpus", str(tmp_path), "--output", str(tmp_path / "x.json"))
    assert proc.returncode == 2 and "is not a deskbench corpus" in proc.stderr and "Traceback" not in proc.stderr


def test_failure_classes_are_the_reports() -> None:
    from deskbench.tracks.docqa.analysis import failures
    from deskbench.tracks.docqa.taxonomy import ERROR_CLASSES

    assert failures.ERROR_CLASSES is ERROR_CLASSES  # one home: the report's classes, in its order


def test_json_on_stdout_and_a_report_that_goes_nowhere(tmp_path: Path) -> None:
    run = _store(tmp_path / "run", [task("t0", ("a.pdf", 1))], [episode("t0", answer="yes", cost=0.25, tokens=(5, 1))])
    proc = run_cli("analyse", "cost", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # stdout is the JSON alone; the summary lines are on stderr
    assert list(data) == ["prices_as_of", "systems", "scoring"] and data["scoring"]["scorer"] == "ANLS*" and data["systems"][0]["cost_usd"] == 0.25
    assert "s: accuracy 100.0%, cost $0.2500 over 1 episodes" in proc.stderr
    proc = run_cli("analyse", "effort", str(run))
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: say where the report goes: --output FILE.json, or --json to print it"]
