"""`deskbench fetch dra` on a snapshot the test writes in the released layout (docs/deliverables-dra.md:
a dataset card naming the `tasks` config's `test` split and a `responses` config, one row per task
with 8 columns, each task's input files in a folder the row names). The tasks here are invented
for the test: the real corpus is gated and its terms forbid copying it.

Also the verifier prose itself, read as the authors' code reads it: the numbering (V-prefixed in
its stylistic variants, bare numbers only without any V, the invariants that make a parse
uncertain) and the target clauses (band, relative band, range, string, decision, negation and
structural-count guards, the last `=` of a shown working)."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli, run_cli_process
from hf_hub_double import GRANTED, SHA, FakeHub, hub_env
from openpyxl import Workbook

from deskbench.errors import UserError
from deskbench.tracks.deliverables.fetch import (
    DraFetchOptions,
    discipline,
    fetch_dra,
    required_outputs,
)
from deskbench.tracks.deliverables.scoring.verifiers import run_verifiers
from deskbench.tracks.deliverables.tasks import load_packages
from deskbench.tracks.deliverables.verifier_prose import read_target, spec_for, split_verifiers

CARD = {
    "license": "other",
    "extra_gated_prompt": "By requesting access you agree to the terms.",
    "configs": [
        {"config_name": "tasks", "default": True, "data_files": [{"split": "test", "path": "data/tasks-test.jsonl"}]},
        {"config_name": "responses", "data_files": [{"split": "dev", "path": "data/responses-dev.jsonl"}]},
    ],
}

LDP_VERIFIERS = """Verifiers
V1: Aerospace units = 4
V2 - Maximum total contribution = USD 300 (+/- 10)
V3 \u2013 Contribution per unit for Defense = 23.4575
V4: Decision = GO.
V5: Do NOT use the vendors' average time of 5.5 hours
V6: Document title = "Maximum Dollar Contribution 2014"
"""
SCP_VERIFIERS = """1. Output is valid JSON with keys in the prescribed order
2. Reduced unit cost = INR 90.64
3 Annual savings = 18.54 Cr (+/- 1%)
4) Savings percentage = 11.5 to 12.5 %
"""
CRP_VERIFIERS = """V1: States the export-only entry restriction
V3: Uses Mordor Intelligence as the only market report
"""


def _rows() -> list[dict[str, Any]]:
    base = {"domain": "Operations Research", "sanity_check": "Lazy AI Test. Averages the vendors' times. "
            "Expert Test. Takes the lowest vendor time and solves the integer program.",
            "solution_logic": "1. Lowest vendor time per department.\n2. Average 2010-2013 contributions.\n"
            "3. Solve the integer program: USD 300 -> Go."}
    return [
        {**base, "task_id": "T-LDP-01", "prompt_type": "LDP", "inputs_path": "inputs/T-LDP-01",
         "prompt": "Find the maximum total contribution for 2014. Do NOT browse the web; rely only on the internal "
         "files provided. Produce a Word document named Maximum Dollar Contribution 2014 with a Go / No-Go "
         "decision.", "verifiers": LDP_VERIFIERS},
        {**base, "task_id": "T-SCP-02", "prompt_type": "Structural Compliance Prompt", "inputs_path": "inputs/T-SCP-02",
         "prompt": "Report 'Reduced unit cost: INR x' and 'Annual savings: INR x Cr', and answer in strict JSON. "
         "You may use public sources.", "verifiers": SCP_VERIFIERS, "sanity_check": "The model will use INR 110 unadjusted."},
        {**base, "task_id": "T-CRP-03", "prompt_type": "CRP", "inputs_path": "inputs/T-CRP-03/brief.csv",
         "prompt": "Give a Yes or No decision using only the files provided by the client; market reports may be "
         "used from Mordor Intelligence only. Create a one-page PowerPoint deck and an Excel workbook of the "
         "channel economics.", "verifiers": CRP_VERIFIERS},
        {**base, "task_id": "T-BAD-04", "prompt_type": "FSP", "inputs_path": "../outside", "prompt": "x",
         "verifiers": "V1: y = 1"},
        {**base, "task_id": "T-GONE-05", "prompt_type": "FSP", "inputs_path": "inputs/missing", "prompt": "x",
         "verifiers": "V1: y = 1"},
        {**base, "task_id": "T-NOV-06", "prompt_type": "RCP", "inputs_path": "inputs/T-LDP-01", "prompt": "x",
         "verifiers": ""},
        {**base, "task_id": "T-FSP-07", "prompt_type": "FSP", "inputs_path": "inputs/T-FSP-07.zip",
         "prompt": "Decide between the fixed contract and the spot market.", "verifiers": "V1: Decision = SPOT"},
        {**base, "task_id": "T-ZIP-08", "prompt_type": "FSP", "inputs_path": "inputs/broken.zip", "prompt": "x",
         "verifiers": "V1: y = 1"},
        {**base, "task_id": "T-URL-09", "prompt_type": "FSP", "inputs_path": "https://drive.google.com/drive/folders/x",
         "prompt": "x", "verifiers": "V1: y = 1"},
        {**base, "task_id": "T LDP 01", "prompt_type": "RCP", "inputs_path": "inputs/T-SCP-02", "prompt": "x",
         "verifiers": "V1: y = 1"},
    ]


def write_release(root: Path) -> None:
    """The release's layout as this command expects it (docs/deliverables-dra.md)."""
    (root / "data").mkdir(parents=True)
    (root / "README.md").write_text("---\n" + yaml.safe_dump(CARD, sort_keys=False) + "---\n\n# DRA\n")
    (root / "data" / "tasks-test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    (root / "data" / "responses-dev.jsonl").write_text(json.dumps({"task_id": "T-LDP-01", "claude": "..."}) + "\n")
    for task in ("T-LDP-01", "T-SCP-02"):
        folder = root / "inputs" / task
        folder.mkdir(parents=True)
        wb = Workbook()
        wb.active.append(["Department", "Hours"])
        wb.active.append(["Drilling", 70])
        wb.save(folder / "Department Sub-Activity Constraint.xlsx")
        (folder / "notes.txt").write_text("hours by sub-step\n")
        (folder / ".DS_Store").write_bytes(b"\0")
    with zipfile.ZipFile(root / "inputs" / "T-FSP-07.zip", "w") as z:  # a zipped input folder
        z.writestr("T-FSP-07/carrier_rates.csv", "lane,rate\nA,1\n")
        z.writestr("T-FSP-07/policy/fuel_policy.txt", "USD 600 per ton\n")
        z.writestr("__MACOSX/T-FSP-07/._carrier_rates.csv", "x")
        z.writestr("T-FSP-07/sub/", "")
    (root / "inputs" / "broken.zip").write_bytes(b"PK not really")
    (root / "inputs" / "T-CRP-03").mkdir(parents=True)
    (root / "inputs" / "T-CRP-03" / "brief.csv").write_text("channel,margin\nexport,22\n")


@pytest.fixture(scope="module")
def fetched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("dra")
    write_release(root / "snap")
    summary = fetch_dra(DraFetchOptions(out=root / "out", source=root / "snap"))
    return root, summary


def test_rows_become_packages_and_the_others_are_skipped_with_their_reason(fetched: tuple[Path, Any]) -> None:
    root, summary = fetched
    assert [t.id for t in summary.tasks] == ["T-LDP-01", "T-SCP-02", "T-CRP-03", "T-FSP-07"]
    reasons = {s.id: s.reason for s in summary.skipped}
    assert reasons["T-BAD-04"] == "input path '../outside' points outside the snapshot; refused"
    assert reasons["T-GONE-05"].startswith("input path 'inputs/missing' is not in the snapshot")
    assert reasons["T-NOV-06"].startswith("no verifier could be read (the cell is empty")
    assert reasons["T LDP 01"] == "a second row with this id; the first is kept"  # both would be tasks/T-LDP-01
    assert reasons["T-ZIP-08"].startswith("broken.zip is not a readable zip")
    assert reasons["T-URL-09"].startswith("its inputs are a link (https://drive.google.com/drive/folders/x)")
    tasks = {t.id: t for t in load_packages(root / "out" / "tasks")}
    assert set(tasks) == {"T-LDP-01", "T-SCP-02", "T-CRP-03", "T-FSP-07"}
    assert sorted(tasks["T-FSP-07"].inputs) == ["carrier_rates.csv", "fuel_policy.txt"]  # unpacked, flat
    assert (root / "out" / "tasks" / "T-FSP-07" / "fuel_policy.txt").read_text() == "USD 600 per ton\n"
    ldp = tasks["T-LDP-01"]
    assert ldp.prompt_class == "LDP" and ldp.title == "Operations Research"
    assert sorted(ldp.inputs) == ["Department Sub-Activity Constraint.xlsx", "notes.txt"]  # hidden files left
    assert ldp.lazy_ai_test == "Averages the vendors' times." and ldp.expert_test.startswith("Takes the lowest")
    assert ldp.solution_logic[0] == "Lowest vendor time per department."
    assert [o.name for o in ldp.required_outputs] == ["Maximum Dollar Contribution 2014.docx"]
    assert ldp.golden.decision == "GO" and ldp.golden.answer == "Solve the integer program: USD 300 -> Go."
    assert tasks["T-SCP-02"].prompt_class == "SCP" and tasks["T-SCP-02"].lazy_ai_test == tasks["T-SCP-02"].expert_test
    crp = tasks["T-CRP-03"]
    assert crp.inputs == ["brief.csv"]
    assert sorted(o.format for o in crp.required_outputs) == ["pptx", "xlsx"]
    assert (root / "out" / ".gitignore").read_text().splitlines()[-1] == "*"  # never committed by accident
    report = json.loads((root / "out" / "fetch.json").read_text())
    assert [t["verifier_parse"] for t in report["tasks"]] == ["clean", "clean", "uncertain", "clean"]
    assert report["tasks"][2]["verifier_problems"] == ["numbering is not 1..2 without gaps: ['1', '3']"]
    assert {t["id"]: (t["corpus_discipline"], t["discipline_from"]) for t in report["tasks"]} == {
        "T-LDP-01": ("closed", "prompt"), "T-SCP-02": ("open", "prompt"), "T-CRP-03": ("hybrid", "prompt"),
        "T-FSP-07": ("open", "prompt")}


def test_verifier_prose_becomes_specs_that_score_a_response(fetched: tuple[Path, Any], tmp_path: Path) -> None:
    root, _ = fetched
    ldp = {t.id: t for t in load_packages(root / "out" / "tasks")}["T-LDP-01"]
    specs = {s.id: s.model_dump() for s in ldp.verifiers}
    assert list(specs) == ["V1", "V2", "V3", "V4", "V5", "V6"]
    # the prompt asks for "the maximum total contribution": that label is a reliable locator
    assert (specs["V2"]["kind"], specs["V2"]["label"], specs["V2"]["expected"], specs["V2"]["abs_tol"]) == (
        "numeric", "Maximum total contribution", 300.0, 10.0)
    # labels the prompt never gives the agent: a judge reads them, told the frozen target
    assert [specs[v]["kind"] for v in ("V1", "V3", "V4", "V5")] == ["llm_check"] * 4
    assert specs["V1"]["criterion"].startswith("Aerospace units = 4\nExpected: 4 (exact). Pass only if")
    assert "\nExpected: 23.4575 (+/- 0.117288). " in specs["V3"]["criterion"]  # no band: 0.5% of a fraction
    assert '\nExpected: "GO" (the same decision, any case). ' in specs["V4"]["criterion"]
    assert specs["V5"]["criterion"] == "Do NOT use the vendors' average time of 5.5 hours"  # no target: as written
    assert specs["V6"]["kind"] == "regex_present"
    assert specs["V6"]["pattern"] == r"(?<!\w)Maximum\ Dollar\ Contribution\ 2014(?!\w)"
    right = ("Aerospace units: 4\nMaximum total contribution: USD 305\nContribution per unit for Defense: 23.46\n"
             "Maximum Dollar Contribution 2014\nDECISION: GO\n")
    got = {r.id: r.status for r in run_verifiers(ldp.verifiers, right, tmp_path)}
    assert got == {"V1": "unobservable", "V2": "pass", "V3": "unobservable", "V4": "unobservable",
                   "V5": "unobservable", "V6": "pass"}  # no judge: the judged ones wait for one

    def reader(criterion: str, text: str) -> tuple[bool, str]:
        """A stand-in judge that reads the frozen target off the criterion, as a model would."""
        m = re.search(r"Expected: \"?([\w.]+)", criterion)
        return (m is not None and re.search(rf"(?<![\w.]){re.escape(m.group(1))}(?![\w])", text) is not None,
                "read")

    judged = {r.id: r.status for r in run_verifiers(ldp.verifiers, right, tmp_path, judge=reader)}
    assert (judged["V1"], judged["V4"], judged["V5"]) == ("pass", "pass", "fail")
    wrong = "Aerospace units: 5\nMaximum total contribution: USD 312\nContribution per unit for Defense: 23.9\n"
    got = {r.id: r.status for r in run_verifiers(ldp.verifiers, wrong, tmp_path, judge=reader)}
    assert (got["V1"], got["V2"], got["V3"], got["V4"], got["V6"]) == ("fail",) * 5
    scp = {t.id: t for t in load_packages(root / "out" / "tasks")}["T-SCP-02"]
    s = {v.id: v.model_dump() for v in scp.verifiers}
    assert [v["kind"] for v in s.values()] == ["llm_check", "numeric", "numeric", "llm_check"]
    assert s["V2"]["expected"] == 90.64  # "= INR 90.64": an amount (the authors' grammar reads a decision "INR 90")
    assert s["V3"]["abs_tol"] == pytest.approx(0.1854) and s["V3"]["unit"] == "crore"  # 1% of 18.54 Cr
    assert "\nExpected: a value from 11.5 to 12.5 %. " in s["V4"]["criterion"]


@pytest.mark.parametrize(("cell", "numbers", "status"), [
    ("V1: a\nV2 - b\nv3 \u2014 c\nV 4) d\n\"V5| e", [1, 2, 3, 4, 5], "clean"),
    ("Prompt-specific verifiers\nV1: a = 2.8 months\nV2: 8,700 trips", [1, 2], "clean"),
    ("1. first check\n2) second check\n3 third, at 2.8 months\n4 8,700 trips is body text", [1, 2, 3], "clean"),
    ("V1: a\nV1: b", [1, 1], "uncertain"),
    ("V1: a\nV2a: b\nV2b: c\nV3: d", [1, 2, 2, 3], "clean"),  # split children keep their letter
    ("V1: a\nV3: b\nV2: c", [1, 3, 2], "uncertain"),
    ("Some lead-in prose\nV1: a", [1], "uncertain"),
    ("V1: a\n2. bare numbers are body text when a V opener exists", [1], "clean"),
])
def test_the_numbering_is_split_as_the_authors_parser_splits_it(cell: str, numbers: list[int], status: str) -> None:
    parse = split_verifiers(cell)
    assert [r.index for r in parse.records] == numbers and parse.status == status, parse
    if "V2a" in cell:
        assert [spec_for(r, read_target(r.text))["id"] for r in parse.records] == ["V1", "V2a", "V2b", "V3"]


@pytest.mark.parametrize(("text", "kind", "value", "tol"), [
    ("Savings % = 12.36% (+/- 0.05pp)", "numeric", 12.36, 0.05),
    ("Revenue = 15,967.90 Mn (+/- 1%)", "numeric", 15967.9, 159.679),
    ("Net = Rs. (-138.3) Cr (+/- 0.5)", "numeric", -138.3, 0.5),
    ("Headcount = 4", "numeric", 4.0, 0.0),
    ("Adjusted multiple = median (V7 = 20.71x) x (1 - 25% discount) = 15.53x", "numeric", 15.53, 15.53 * 0.005),
    ("Total need = roughly 800,000 to 900,000", "numeric", 850000.0, 50000.0),
    ("Total need = $800,000 \u2013 $900,000", "presence", None, 0.0),  # two currency values: no single target
    ("Flag = \"MEETS_TARGET\"", "string", "MEETS_TARGET", 0.0),
    ("Decision = NO-GO.", "decision", "NO-GO", 0.0),
    ("Gas price used must be 3.047 USD/gal", "numeric", 3.047, 3.047 * 0.005),
    ("Price must NOT be 67.5", "presence", None, 0.0),
    ("Table must be exactly 7 rows", "presence", None, 0.0),
    ("Costs = 4.2 Cr and 5.1 Cr in the two years", "presence", None, 0.0),
])
def test_target_clauses_are_read_as_the_authors_grammar_reads_them(text: str, kind: str, value: object,
                                                                    tol: float) -> None:
    t = read_target(text)
    assert (t.kind, t.value) == (kind, value) and t.tol == pytest.approx(tol), t


def test_a_fail_if_clause_makes_a_judged_check_and_a_target_without_a_name_too() -> None:
    parse = split_verifiers("V1: Unit cost = INR 103 FAIL IF 110 is used\nV2: = 5")
    specs = [spec_for(r, read_target(r.text), "Report the unit cost.") for r in parse.records]
    assert read_target(parse.records[0].text).fail_if == "110 is used"
    assert [s["kind"] for s in specs] == ["llm_check", "llm_check"]


def test_discipline_and_outputs_read_off_the_prompt() -> None:
    assert discipline("Closed corpus", "anything") == ("closed", "column")
    assert discipline("", "Use only the files provided; no web.") == ("closed", "prompt")
    assert required_outputs("Present the cost table in Excel and write a Word doc titled Plan B.") == [
        {"name": "answer.xlsx", "format": "xlsx"}, {"name": "Plan B.docx", "format": "docx"}]
    assert required_outputs("The attached Excel file lists the costs.") == []  # an input, not a deliverable


def test_the_command_writes_packages_and_a_folder_that_is_no_snapshot_is_one_line(tmp_path: Path) -> None:
    write_release(tmp_path / "snap")
    done = run_cli("fetch", "dra", "--from", str(tmp_path / "snap"), "--out", str(tmp_path / "o"), "--limit", "2",
                   "--json")
    assert done.returncode == 0, done.stderr
    assert [t["id"] for t in json.loads(done.stdout)["tasks"]] == ["T-LDP-01", "T-SCP-02"]
    done = run_cli("fetch", "dra", "--from", str(tmp_path / "snap"), "--out", str(tmp_path / "o4"))
    assert done.returncode == 0 and "DRA from" in done.stdout and "4 packages" in done.stdout, done
    assert "skipped T-BAD-04: input path '../outside' points outside the snapshot; refused" in done.stderr
    assert "check T-CRP-03: verifier numbering uncertain" in done.stderr
    done = run_cli("fetch", "dra", "--from", str(tmp_path), "--out", str(tmp_path / "o2"))
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: --from") and "no README.md (dataset card) there" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    with pytest.raises(UserError, match="--limit 0 is not valid"):
        fetch_dra(DraFetchOptions(out=tmp_path / "o3", source=tmp_path / "snap", limit=0))


# -- the gated hub: the strict double of tests/hf_hub_double.py, serving this dataset -----------


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    write_release(tmp_path / "repo")
    with FakeHub(tmp_path / "repo", "deccan-ai/dra-bench", gated=True) as double:
        yield double


def _hub_run(tmp_path: Path, double: FakeHub, token: str | None, *args: str) -> Any:
    return run_cli_process("fetch", "dra", "--out", str(tmp_path / "out"), *args, env=hub_env(tmp_path, double, token))


def test_the_gated_hub_without_a_token_is_one_line_and_nothing_is_written(tmp_path: Path, hub: FakeHub) -> None:
    done = _hub_run(tmp_path, hub, None)
    assert done.returncode == 2, done
    assert done.stderr.strip() == (
        f"error: deccan-ai/dra-bench is gated and no Hugging Face token was found: accept its terms at {hub.url}"
        "/datasets/deccan-ai/dra-bench, then `hf auth login` (or `huggingface-cli login` with huggingface_hub "
        "before 1.0), or set HF_TOKEN; or give a snapshot you downloaded with --from DIR")
    assert not (tmp_path / "out" / "tasks").exists()


def test_with_a_granted_token_only_the_tasks_and_their_inputs_are_downloaded(tmp_path: Path, hub: FakeHub) -> None:
    done = _hub_run(tmp_path, hub, GRANTED, "--limit", "1", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [t["id"] for t in summary["tasks"]] == ["T-LDP-01"]
    assert summary["revision"] == SHA and summary["source"].endswith("/datasets/deccan-ai/dra-bench")
    snap = tmp_path / "out" / "snapshot"
    got = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file() and ".cache" not in p.parts)
    assert got == ["README.md", "data/tasks-test.jsonl", "inputs/T-LDP-01/.DS_Store",
                   "inputs/T-LDP-01/Department Sub-Activity Constraint.xlsx", "inputs/T-LDP-01/notes.txt"]
    assert all(auth == f"Bearer {GRANTED}" for method, path, auth, status in hub.log if "/resolve/" in path
               and not path.endswith("README.md"))
    tasks = load_packages(tmp_path / "out" / "tasks")
    assert [t.id for t in tasks] == ["T-LDP-01"] and len(tasks[0].inputs) == 2


def test_a_fetched_package_is_run_and_scored_by_the_track(bwrap: str, tmp_path: Path) -> None:
    """fetch -> run (deliverable-agent in the sandbox, a scripted model answering the task) -> score:
    the two mechanical verifiers pass, the four judged ones stay unobservable without --judge."""
    write_release(tmp_path / "snap")
    assert run_cli("fetch", "dra", "--from", str(tmp_path / "snap"), "--out", str(tmp_path / "o"), "--limit", "1",
                   "-q").returncode == 0
    script = tmp_path / "script.jsonl"
    answer = ("Aerospace units: 4\nMaximum total contribution: USD 305\nContribution per unit for Defense: 23.46\n"
              "Maximum Dollar Contribution 2014\nDECISION: GO")
    script.write_text(json.dumps({"question": "Find the maximum total contribution for 2014", "content": answer}) + "\n")
    run = run_cli("run", "--tasks", str(tmp_path / "o" / "tasks"), "--agent", "deliverable-agent", "--model",
                  f"scripted/{script}", "--out", str(tmp_path / "run"), "-q")
    assert run.returncode == 0, run.stderr
    score = run_cli("score", str(tmp_path / "run"), "--json")
    assert score.returncode == 0, score.stderr
    [row] = json.loads(score.stdout)["rows"]
    assert (row["verifiers"], row["judged"], row["unobservable"]) == (6, 4, 4)  # no --judge: four wait for one
    assert row["v"]["mean"] == pytest.approx(200 / 6)
