"""The Appendix C checks (C.2 priority re-derivation, C.3 citation validation, C.4 checks A, B
and C), each on a constructed grading workbook: a hybrid-corpus package, an episode whose
response cites recorded, unrecorded, unsupported and unauthorised sources, a grades CSV, the QC
worksheet filled in and imported, and the QC report."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from deliverable_responses import recompute, respond
from test_rubric import DEMO, FSP, GOOD_ROW, make_grade, write_csv

from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.outputs import OutputFileRecord
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.deliverables.grades import GradeStore
from deskbench.tracks.deliverables.scoring.rubric_csv import (
    GRADE_COLUMNS,
    import_grades,
    import_qc,
    qc_worksheet,
)
from deskbench.tracks.deliverables.scoring.rubric_qc import apply_qc
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import QCAction
from deskbench.tracks.deliverables.scoring.rubric_qc_checks import (
    check_a,
    check_b,
    check_c,
    citation_findings,
    priority_findings,
)
from deskbench.tracks.deliverables.scoring.rubric_qc_citations import (
    authorised_domains,
    recorded_sources,
    validate_citations,
)
from deskbench.tracks.deliverables.scoring.verifier_base import Status, VerifierResult
from deskbench.tracks.deliverables.tasks import (
    RUBRIC_CODES,
    AuthorizedSource,
    DeliverableSubmission,
    DeliverableTask,
    dump_task,
    load_package,
)
from deskbench.tracks.deliverables.verifier_specs import CitationDomainsSpec, RegexPresentSpec

SYSTEM = "sys-web"
CITED = (
    "\n\nFuel: VLSFO averaged USD 620 per ton over the period (https://shipandbunker.com/prices/av/global). "
    "Bunker demand rose 12% (https://shipandbunker.com/news/demand). "
    "Brent traded at USD 85 a barrel (https://www.eia.gov/brent). "
    "Per fuel_policy_final_v2.docx the reference price is USD 455.00 per ton.\n"
)
TRAJECTORY = [
    ToolCallStep(name="web_search", arguments={"query": "brent price"}, result={"backend": "recorded", "results": [
        {"title": "Brent", "url": "https://www.eia.gov/brent", "snippet": "Brent spot price: USD 85 per barrel"},
        {"title": "Demand", "url": "https://shipandbunker.com/news/demand", "snippet": "Bunker demand news"}]}),
    ToolCallStep(name="fetch", arguments={"url": "https://shipandbunker.com/prices/av/global"},
                 result={"url": "https://shipandbunker.com/prices/av/global", "status": 200,
                         "text": "Global 20 Ports Average VLSFO 620.00 USD/mt"}),
    ToolCallStep(name="fetch", arguments={"url": "https://shipandbunker.com/news/demand"},
                 result={"url": "https://shipandbunker.com/news/demand", "status": 200,
                         "text": "Bunker demand rose 9% year on year"}),
]


def hybrid_task(root: Path) -> DeliverableTask:
    """The demo FSP package, made hybrid: one authorised external source (a domain in its note), a
    citation_domains verifier and a verifier that passes when the response cites that source."""
    src = load_package(DEMO / FSP)
    folder = root / "pkg"
    shutil.copytree(DEMO / FSP, folder)
    task = src.model_copy(update={
        "corpus_discipline": "hybrid",
        "authorized_sources": [*src.authorized_sources, AuthorizedSource(
            name="Ship & Bunker VLSFO index", kind="external", note="shipandbunker.com, Global 20 Ports Average")],
        "verifiers": [*src.verifiers, CitationDomainsSpec(id="cited_domains", allowed=["shipandbunker.com"]),
                      RegexPresentSpec(id="cites_index", description="Cites the authorised fuel price source",
                                       pattern=r"shipandbunker\.com")]})
    (folder / "task.yaml").write_text(dump_task(task), encoding="utf-8")
    return load_package(folder)


@pytest.fixture
def workbook(tmp_path: Path) -> dict[str, Any]:
    """A run holding the episode, and the grades CSV ('the grading workbook') imported."""
    task = hybrid_task(tmp_path)
    run_dir = tmp_path / "run"
    store = RunStore(run_dir)
    store.save_tasks([task])
    files_dir = Path("outputs") / SYSTEM / task.id / "0"
    out = run_dir / files_dir
    assert task.directory is not None
    response = respond(task, recompute(task, task.directory), out, set()) + CITED
    files = [OutputFileRecord(name=p.name, size=p.stat().st_size, sha256=hashlib.sha256(p.read_bytes()).hexdigest())
             for p in sorted(out.iterdir())]
    store.record(Episode(task_id=task.id, system=SYSTEM, status="ok", trajectory=list(TRAJECTORY),
                         submission=DeliverableSubmission(id=task.id, response=response, files=files,
                                                          files_dir=files_dir.as_posix())))
    row = {**GOOD_ROW, "system": SYSTEM, "grader": "sme-ana",
           "DI": "3", "DI_justification": "All facts verified against the sources; 100% adherence.",
           "AR": "3", "AR_justification": "Strong logic: cause-effect from fuel price to the decision.",
           "RF": "2", "RF_justification": "Mostly relevant; low tangential content.",
           "EP": "3", "EP_justification": "Minor computational errors in the surcharge, under 5%.",
           "FD": "0", "FD_justification": "Partial format compliance: the memo lacks the Recommendation section.",
           "comment": "Reasoning is aligned with the brief. The calculations are wrong in places."}
    import_grades(GradeStore(run_dir), write_csv(tmp_path / "grades.csv", GRADE_COLUMNS, [row]))
    return {"run": run_dir, "task": task, "key": (task.id, SYSTEM, 0), "tmp": tmp_path}


def by_check(final: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for f in final.checks:
        out.setdefault(f.check, []).append(f)
    return out


def test_c3_citation_validation(workbook: dict[str, Any]) -> None:
    task: DeliverableTask = workbook["task"]
    ep = RunStore(workbook["run"], create=False).episodes(SYSTEM)[0]
    sub = ep.submission
    assert isinstance(sub, DeliverableSubmission)
    assert authorised_domains(task) == ["shipandbunker.com"]
    assert set(recorded_sources(ep.trajectory)) == {"https://eia.gov/brent", "https://shipandbunker.com/news/demand",
                                                    "https://shipandbunker.com/prices/av/global"}
    checks = {c.source: c for c in validate_citations(task, sub, workbook["run"] / sub.files_dir, ep.trajectory)}
    ok = checks["https://shipandbunker.com/prices/av/global"]
    assert (ok.exists, ok.supports, ok.authorised, ok.issues) == (True, True, True, [])
    demand = checks["https://shipandbunker.com/news/demand"]
    assert (demand.exists, demand.supports, demand.authorised) == (True, False, True)
    assert demand.issues == ["https://shipandbunker.com/news/demand states none of 12 (the figures of: Bunker demand "
                             "rose 12% (https://shipandbunker.com/news/demand).)"]
    brent = checks["https://www.eia.gov/brent"]  # a search hit: its snippet supports the figure
    assert (brent.exists, brent.supports, brent.authorised) == (True, True, False)
    assert brent.issues == ["eia.gov is not an authorised source (shipandbunker.com)"]
    doc = checks["fuel_policy_final_v2.docx"]
    assert (doc.kind, doc.exists, doc.supports, doc.authorised, doc.issues) == ("document", True, True, True, [])

    final = GradeStore(workbook["run"]).final_grade(workbook["key"])
    assert final is not None
    c3 = by_check(final)["C.3"]
    # the unsupported figure: an Edit to fail of the verifier that passed on that citation
    edit = next(f for f in c3 if "states none of 12" in f.finding)
    assert (edit.target, edit.action, edit.score) == ("verifier:cites_index", "edit", 0)
    assert edit.reason.startswith("citation invalid: https://shipandbunker.com/news/demand states none of 12")
    # the unauthorised host: on the domain verifier, which already fails: nothing to edit
    brent_f = next(f for f in c3 if "eia.gov is not an authorised source" in f.finding)
    assert brent_f.target == "verifier:cited_domains" and brent_f.action is None
    assert len(c3) == 2 and all(f.outcome == "open" for f in c3)


def test_an_agents_own_citation_list_is_no_recorded_source() -> None:
    """A deep-research agent's `citations` step lists what it cited: it adds the provider's quoted
    text to a source a search returned, and makes no unsearched URL exist."""
    steps = [ToolCallStep(name="web_search", result={"results": [{"url": "https://a.org/x", "title": "A"}]}),
             ToolCallStep(name="citations", result={"cited": [
                 {"url": "https://a.org/x", "cited_text": "Output rose 7.5% in 2025"},
                 {"url": "https://never.org/y", "cited_text": "made up 99%"}]})]
    sources = recorded_sources(steps)
    assert set(sources) == {"https://a.org/x"} and "7.5%" in sources["https://a.org/x"].text


@pytest.mark.parametrize(("response", "issue"), [
    ("Demand rose 40% (https://madeup.example.org/report).", "is not among the sources the run recorded"),
    ("Prices: https://shipandbunker.com/gone shows USD 700.", "did not resolve when fetched (HTTP 404)"),
    ("Per fuel_policy_v3.docx the price is USD 500.", "fuel_policy_v3.docx is not one of the task's files"),
    ("Per fuel_policy_final_v2.docx the price is USD 512.", "fuel_policy_final_v2.docx states none of 512"),
])
def test_c3_failures(workbook: dict[str, Any], response: str, issue: str) -> None:
    task: DeliverableTask = workbook["task"]
    steps = [ToolCallStep(name="fetch", result={"url": "https://shipandbunker.com/gone", "status": 404, "text": ""})]
    checks = validate_citations(task, DeliverableSubmission(id=task.id, response=response), None, steps)
    assert len(checks) == 1 and any(issue in i for i in checks[0].issues), checks


def test_c3_fabricated_list_proposes_a_reject_and_closed_corpus_authorises_nothing(
        workbook: dict[str, Any]) -> None:
    task: DeliverableTask = workbook["task"]
    text = " ".join(f"Figure {i}0% (https://invented{i}.example.com/p)." for i in range(1, 4))
    checks = validate_citations(task, DeliverableSubmission(id=task.id, response=text), None, [])
    assert [c.exists for c in checks] == [False] * 3
    results = [VerifierResult(id="cites_index", kind="regex_present", status="pass", evidence="e"),
               VerifierResult(id="cited_domains", kind="citation_domains", status="fail", evidence="e")]
    found = citation_findings(task, checks, results)
    reject = next(f for f in found if f.target == "row")
    assert reject.action == "reject" and reject.reason.startswith("fabricated citation list")
    assert "3 of 3 cited URLs were never searched or opened" in reject.finding
    # recorded by QC, the reject returns the row (C.1), as any fabricated citation QC reports
    grade = make_grade(3, task_id=task.id, system=SYSTEM)
    act = QCAction(task_id=task.id, system=SYSTEM, target="row", action="reject", reason=reject.reason,
                   reviewer="qc-bo")
    assert apply_qc(grade, [act], results, task=task, citations=checks).status == "returned"
    closed = task.model_copy(update={"corpus_discipline": "closed"})
    assert authorised_domains(closed) == ["shipandbunker.com"]  # the task's own allow-list still counts
    bare = closed.model_copy(update={"verifiers": [v for v in task.verifiers if v.id != "cited_domains"],
                                     "authorized_sources": task.authorized_sources[:-1]})
    assert authorised_domains(bare) == [] and authorised_domains(bare.model_copy(
        update={"corpus_discipline": "open"})) is None
    one = validate_citations(bare, DeliverableSubmission(id=task.id, response="See https://a.org/x."), None, [])
    assert one[0].authorised is False and "closed corpus: no external source" in one[0].issues[-1]


def test_c2_priority_rederivation(workbook: dict[str, Any]) -> None:
    task: DeliverableTask = workbook["task"]
    store = GradeStore(workbook["run"])
    final = store.final_grade(workbook["key"])
    assert final is not None
    c2 = by_check(final)["C.2"]
    classes = [(f.target, f.finding.split("(", 1)[1].split(")", 1)[0]) for f in c2]
    # the paper's order: final answer, traps, tight numerics, citation-dependent, output files
    assert classes[0] == ("verifier:decision", "1 final answer")
    assert [t for t, c in classes if c.startswith("2 trap")] == [  # the task's order within a class
        "verifier:fuel_surcharge", "verifier:spot_total", "verifier:no_placeholder_total"]
    assert ("verifier:fixed_cost", "3 tight numeric") in classes  # DI 3, AR 3, RF 2...: not uniform
    assert {t for t, c in classes if c == "4 citation-dependent"} == {
        "verifier:cites_final_policy", "verifier:cited_domains", "verifier:cites_index"}
    assert ("verifier:file_zbb_memo", "5 output file zbb_memo.docx") in classes
    assert all(f.required for f in c2) and len(c2) == len(task.verifiers)
    # the decision is re-derived inside the memo too
    assert "in zbb_memo.docx: " in c2[0].finding
    # a row confirm alone leaves the row pending until each is confirmed or edited (on a grade
    # that trips no other check: the workbook's has two check-A mismatches, a C.1 return)
    ep = RunStore(workbook["run"], create=False).episodes(SYSTEM)[0]
    store.save_grade(make_grade(2, task_id=task.id, system=SYSTEM).model_copy(
        update={"grader": "sme-cleo", "episode_stamp": ep.finished_at}))
    store.add_qc([QCAction(task_id=task.id, system=SYSTEM, target="row", action="confirm", reviewer="qc-bo")])
    final = store.final_grade(workbook["key"])
    assert final is not None and final.status == "pending"
    assert any(f.startswith("pending: C.2 verifiers to re-derive") and "decision" in f for f in final.flags)
    store.add_qc([QCAction(task_id=task.id, system=SYSTEM, target=f.target, action="confirm", reviewer="qc-bo")
                  for f in c2])
    final = store.final_grade(workbook["key"])
    assert final is not None and final.status == "reviewed"
    assert all(f.outcome == "confirmed" for f in by_check(final)["C.2"])


def test_c2_tight_numerics_three_to_five_and_all_when_uniform() -> None:
    from deskbench.tracks.deliverables.verifier_specs import NumericSpec

    base = load_package(DEMO / FSP)
    numerics = [NumericSpec(id=f"n{i}", label=f"L{i}", expected=100.0, rel_tol=0.001 * i) for i in range(1, 8)]
    task = base.model_copy(update={"verifiers": numerics, "traps": [], "required_outputs": []})
    results = [VerifierResult(id=v.id, kind="numeric", status="pass" if i % 2 else "fail", evidence="")
               for i, v in enumerate(numerics)]
    mixed = {"DI": 2, "AR": 3, "RF": 2, "EP": 1, "FD": 2}
    picked = [f.target for f in priority_findings(task, results, mixed)]
    assert picked == [f"verifier:n{i}" for i in range(1, 6)]  # the five tightest
    uniform = [f.target for f in priority_findings(task, results, dict.fromkeys(RUBRIC_CODES, 2))]
    assert uniform == [f"verifier:n{i}" for i in range(1, 8)]  # suspiciously uniform scores: all of them
    loose = [n.model_copy(update={"rel_tol": 0.1}) for n in numerics]
    picked = [f.target for f in priority_findings(task.model_copy(update={"verifiers": loose}), results, mixed)]
    assert len(picked) == 3  # none tight: still three recomputed


def test_c4_check_a_on_every_score(workbook: dict[str, Any]) -> None:
    final = GradeStore(workbook["run"]).final_grade(workbook["key"])
    assert final is not None
    a = {f.target: f for f in by_check(final)["C.4A"]}
    # EP 3 with score-2 wording; FD 0 with score-1 wording (the C.5 case); DI, AR, RF consistent
    assert set(a) == {"EP", "FD"}
    assert (a["EP"].action, a["EP"].score) == ("edit", 2) and "describes score 2 (minor computational errors)" in \
        a["EP"].finding
    assert (a["FD"].score, a["FD"].reason) == (1, "justification describes score 1, not score 0 (C.5)")
    assert any(x.startswith("C.4A: EP 3 but the justification describes score 2") for x in final.flags)
    # two criteria mismatched: C.1 returns the row once QC has acted on it
    assert "should be returned (C.1): score-justification mismatches on FD, EP" in final.flags
    # negated wording is no mismatch; the rubric's own anchors count
    cells = {"AR": "No gaps in the logic; strong logic throughout.", "DI": "Mostly accurate; one minor error."}
    scores = {**dict.fromkeys(RUBRIC_CODES, 2), "AR": 3, "DI": 2}
    assert check_a(scores, {**dict.fromkeys(RUBRIC_CODES, "Adequate."), **cells}, []) == []
    found = check_a({**scores, "DI": 3}, {**dict.fromkeys(RUBRIC_CODES, "Adequate."), **cells}, [])
    assert [(f.target, f.score) for f in found] == [("DI", 2)]


def test_c4_check_b_ep_and_di(workbook: dict[str, Any]) -> None:
    task: DeliverableTask = workbook["task"]
    final = GradeStore(workbook["run"]).final_grade(workbook["key"])
    assert final is not None
    b = by_check(final)["C.4B"]
    # DI 3 while the domain verifier fails and two citations fail C.3
    assert [f.target for f in b] == ["DI"]
    assert b[0].finding == "check B: DI 3 with trap/source verifiers failing: cited_domains; 2 citation(s) failing C.3"

    def res(status: Status, ids: list[str], kind: str = "regex_present") -> list[VerifierResult]:
        return [VerifierResult(id=i, kind=kind, status=status, evidence="") for i in ids]

    sources = ["no_placeholder_total", "fuel_surcharge", "spot_total", "decision", "cites_final_policy",
               "cited_domains", "cites_index"]
    low = check_b(task, res("pass", sources), {**dict.fromkeys(RUBRIC_CODES, 2), "DI": 1})
    assert [f.finding.split(" with ")[0] for f in low] == ["check B: DI 1"]
    assert check_b(task, res("pass", sources), dict.fromkeys(RUBRIC_CODES, 2)) == []
    ep = check_b(None, res("pass", ["a", "b", "c", "d", "e"], "numeric"), {**dict.fromkeys(RUBRIC_CODES, 2), "EP": 0})
    assert [f.finding for f in ep] == ["check B: EP 0 with 100% of numeric verifiers passing"]


@pytest.mark.parametrize(("scores", "comment", "targets"), [
    ({"DI": 0}, "Reasoning is aligned with the brief.", ["DI"]),  # the paper's example
    ({"DI": 0}, "The data and sources are accurate.", ["DI"]),
    ({"EP": 3}, "Solid memo, but the calculations are wrong in two places.", ["EP"]),
    ({"DI": 0}, "Overall excellent, but the figures are fabricated.", []),  # the 0 is named
    ({"DI": 0}, "The sources are not accurate.", []),
    ({"FD": 3}, "No format errors; the memo is executive-ready.", []),
    ({}, "", []),
])
def test_c4_check_c_comment_against_scores(scores: dict[str, int], comment: str, targets: list[str]) -> None:
    found = check_c({**dict.fromkeys(RUBRIC_CODES, 2), **scores}, comment)
    assert [f.target for f in found] == targets, found


def test_worksheet_round_trip_and_the_qc_report(workbook: dict[str, Any]) -> None:
    """The CSV workflow: the worksheet lists every finding; the reviewer fills in actions on some
    lines; the import records them (blank lines skipped); the QC report shows what changed."""
    run_dir, tmp = workbook["run"], workbook["tmp"]
    store = GradeStore(run_dir)
    sheet = tmp / "qc-sheet.csv"
    n = qc_worksheet(store, sheet)
    rows = list(csv.DictReader(sheet.open(encoding="utf-8")))
    assert len(rows) == n and {r["check"] for r in rows} == {"C.2", "C.3", "C.4A", "C.4B", "C.4C"}
    for r in rows:
        r["reviewer"] = "qc-bo"
        if r["check"] == "C.2":
            r["action"] = "confirm"
        elif r["check"] == "C.3" and r["score"] == "0":
            r["action"] = "edit"  # the proposed 'citation invalid' edit, as proposed
        elif r["check"] == "C.4A" and r["target"] == "FD":
            r["action"], r["justification"] = "edit", "Partial format compliance: the Recommendation is missing."
    actions = import_qc(store, write_csv(tmp / "qc-done.csv", list(rows[0]), rows))
    assert len(actions) == sum(1 for r in rows if r["action"])
    final = store.final_grade(workbook["key"])
    assert final is not None and final.scores["FD"] == 1
    c3 = next(f for f in final.checks if f.check == "C.3" and f.target == "verifier:cites_index")
    assert c3.outcome.startswith("edited: pass -> fail (citation invalid: ")
    assert next(r for r in final.verifiers or [] if r.id == "cites_index").status == "fail"
    assert next(f for f in final.checks if f.check == "C.4A" and f.target == "FD").outcome.startswith("edited: 0 -> 1")
    assert next(f for f in final.checks if f.target == "EP" and f.check == "C.4A").outcome == "open"
    # the QC report: per check, findings and what QC did; the edits listed
    proc = run_cli("rubric", "show", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "QC checks (Appendix C)" in proc.stdout and "C.3 verifier:cites_index: edited: pass -> fail" in proc.stdout
    shown = json.loads(run_cli("rubric", "show", str(run_dir), "--json").stdout)
    assert {c["check"] for c in shown["grades"][0]["checks"]} == {"C.2", "C.3", "C.4A", "C.4B", "C.4C"}
    proc = run_cli("rubric", "qc-sheet", str(run_dir), "--output", str(tmp / "again.csv"))
    assert proc.returncode == 0 and "finding(s) to" in proc.stdout


def test_findings_on_the_web_qc_screen(workbook: dict[str, Any]) -> None:
    from urllib.parse import urlencode

    from deskbench.tracks.deliverables.web.grading import create_grading_app
    from deskbench.web.store import WebStore
    from tests.web.test_web import Client, serve

    run_dir, key = workbook["run"], workbook["key"]
    token = WebStore(run_dir).add_user("bob")
    q = urlencode({"task": key[0], "system": key[1], "attempt": key[2]})
    with serve(create_grading_app(run_dir)) as port:
        bob = Client(port)
        bob.login(token)
        status, _, html = bob.request("GET", f"/qc?{q}")
        assert status == 200
        checks = html.split('<section id="checks">')[1].split("</section>")[0]
        for name in ("C3", "C4A", "C4B", "C4C"):
            assert f'class="check check-{name}"' in checks
        assert "Apply: fail (citation invalid: https://shipandbunker.com/news/demand" in checks
        assert '<tr id="verifier-decision" class="rederive">' in html
        # the one-click proposal records the edit with its reason
        graded = GradeStore(run_dir).primary_grade(key)
        assert graded is not None
        shown = GradeStore(run_dir).final_grade(key)
        assert shown is not None
        reason = next(f.reason for f in shown.checks if f.check == "C.3" and f.target == "verifier:cites_index")
        form = {"csrf": bob.csrf, "task": key[0], "system": key[1], "attempt": "0", "grader": graded.grader,
                "graded_at": graded.created_at, "target": "verifier:cites_index", "action": "edit", "score": "0",
                "reason": reason}
        status, _, html = bob.request("POST", "/qc", form)
        assert status == 303, html[html.find("qc-error"):][:400]
        status, _, html = bob.request("GET", f"/qc?{q}")
        checks = html.split('<section id="checks">')[1].split("</section>")[0]
        assert "edited: pass -&gt; fail (citation invalid:" in checks


def test_a_worksheet_line_without_a_check_still_needs_an_action(workbook: dict[str, Any]) -> None:
    from deskbench.errors import UserError
    from deskbench.tracks.deliverables.scoring.rubric_csv import QC_COLUMNS

    row = {c: "" for c in QC_COLUMNS} | {"task_id": workbook["key"][0], "system": SYSTEM, "attempt": "0",
                                          "target": "DI", "reviewer": "qc-bo"}
    with pytest.raises(UserError, match="line 2, column action: empty"):
        import_qc(GradeStore(workbook["run"]), write_csv(workbook["tmp"] / "q.csv", QC_COLUMNS, [row]))
    assert import_qc(GradeStore(workbook["run"]), write_csv(workbook["tmp"] / "q2.csv", QC_COLUMNS,
                                                            [{**row, "check": "C.4A"}])) == []
