"""People recorded by the web app are systems like any other: `deskbench score`, `report` and
`analyse agreement` see them, one by one or pooled into MADQA's single Human row.

Hand-computed: four questions in two batches (Aquarius: q1, q2; Orion: q3, q4).
  alice (both batches): right, right, right, wrong  -> 3/4
  bob   (both batches): right, wrong, right, wrong  -> 2/4
  carol (Orion only):                 wrong, right  -> 1/2, answered after alice
alice vs bob over 4 items: p_o = 3/4, p_a = 3/4, p_b = 1/2, p_e = 3/8 + 1/8 = 1/2,
kappa = (3/4 - 1/2) / (1/2) = 1/2; both right 2, only alice 1, only bob 0, neither 1.
alice vs carol over q3, q4: alice (1, 0), carol (0, 1): p_o = 0, p_e = 1/2, kappa = -1.
Pooled `human` (earliest answer per question: alice answers every question first): 3/4.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, write_operator_corpus

from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.web.app import create_app
from tests.web.test_web import TASKS, Client, serve

MORE = [
    {"id": "web/3", "question": "In which year was the company behind the bikes report incorporated?",
     "answer_variants": [["1998"]], "evidence": [{"document": "beta.pdf", "page": 1}]},
    {"id": "web/4", "question": "What is listed for the winter season?",
     "answer_variants": [["Mountain car rental rates"]], "evidence": [{"document": "alpha.pdf", "page": 1}]},
]
RIGHT = {"web/1": "a fee", "web/2": "Bell 412", "web/3": "1998", "web/4": "Mountain car rental rates"}
N = {"web/1": 1, "web/2": 2, "web/3": 3, "web/4": 4}


def answer(c: Client, task: str, right: bool) -> None:
    n = N[task]
    assert c.request("POST", f"/q/{n}/search", {"csrf": c.csrf, "query": "report"})[0] == 303
    assert c.request("POST", f"/q/{n}/submit", {"csrf": c.csrf, "answer": RIGHT[task] if right else "no idea"})[0] == 303


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("humans")
    write_operator_corpus(root)
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in [*TASKS, *MORE]))
    run_dir = root / "run"
    out = ("--out", str(run_dir))
    assert run_cli("serve", "batches", *out, "--tasks", str(tasks), "--batch-size", "2").returncode == 0
    tokens = {"alice": run_cli("serve", "add-user", "alice", *out, "--batch", "Aquarius", "--batch", "Orion"),
              "bob": run_cli("serve", "add-user", "bob", *out, "--batch", "Aquarius", "--batch", "Orion"),
              "carol": run_cli("serve", "add-user", "carol", *out, "--batch", "Orion")}
    with serve(create_app(root / "corpus", tasks, run_dir)) as port:
        users = {}
        for name, proc in tokens.items():
            assert proc.returncode == 0, proc.stderr
            users[name] = Client(port)
            users[name].login(proc.stdout.strip())
        for task, right in (("web/1", 1), ("web/2", 1), ("web/3", 1), ("web/4", 0)):
            answer(users["alice"], task, bool(right))
        for task, right in (("web/1", 1), ("web/2", 0), ("web/3", 1), ("web/4", 0)):
            answer(users["bob"], task, bool(right))
        for task, right in (("web/3", 0), ("web/4", 1)):
            answer(users["carol"], task, bool(right))
    # an agent in the same run: the no-model lexical baseline
    proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(root / "corpus"), "--agent", "lexical", *out)
    assert proc.returncode == 0, proc.stderr
    return {"root": root, "run": run_dir}


def test_score_sees_each_annotator_and_the_pool(run: dict) -> None:
    proc = run_cli("score", str(run["run"]), "--json")
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(proc.stdout)
    assert {"human:alice", "human:bob", "human:carol", "lexical"} <= set(reports), list(reports)
    acc = {k: r["accuracy"] for k, r in reports.items()}
    assert (acc["human:alice"], acc["human:bob"], acc["human:carol"]) == (0.75, 0.5, 0.5)
    pooled = json.loads(run_cli("score", str(run["run"]), "--json", "--pool-humans").stdout)
    assert "human" in pooled and not any(k.startswith("human:") for k in pooled)
    assert pooled["human"]["accuracy"] == 0.75 and pooled["human"]["n"] == 4
    single = json.loads(run_cli("score", str(run["run"]), "--system", "human", "--json").stdout)
    assert set(single) == {"human"} and single["human"]["accuracy"] == 0.75


def test_agreement_has_a_human_row(run: dict, tmp_path: Path) -> None:
    out = tmp_path / "agreement.json"
    proc = run_cli("analyse", "agreement", str(run["run"]), "--output", str(out), "--plot", str(tmp_path / "k.png"))
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert set(rep["humans"]) == {"human:alice", "human:bob", "human:carol"}
    assert "lexical" in rep["systems"] and "lexical" not in rep["humans"]
    pairs = {(p["a"], p["b"]): p for p in rep["pairs"]}
    ab = pairs.get(("human:alice", "human:bob")) or pairs[("human:bob", "human:alice")]
    assert ab["kappa"] == pytest.approx(0.5) and ab["n_items"] == 4
    flip = ab["a"] != "human:alice"
    assert (ab["both_correct"], ab["only_b" if flip else "only_a"], ab["only_a" if flip else "only_b"], ab["neither"]) == (2, 1, 0, 1)
    ac = pairs.get(("human:alice", "human:carol")) or pairs[("human:carol", "human:alice")]
    assert ac["kappa"] == pytest.approx(-1.0) and ac["n_items"] == 2
    i, j = rep["systems"].index("human:alice"), rep["systems"].index("human:bob")
    assert rep["kappa"][i][j] == pytest.approx(0.5) and rep["n_items"][i][j] == 4
    lex = [p for p in rep["pairs"] if "lexical" in (p["a"], p["b"]) and "human:alice" in (p["a"], p["b"])]
    assert len(lex) == 1 and lex[0]["n_items"] == 4
    assert lex[0]["both_correct"] + lex[0]["only_a"] + lex[0]["only_b"] + lex[0]["neither"] == 4
    assert (tmp_path / "k.png").stat().st_size > 1000

    pooled = tmp_path / "pooled.json"
    assert run_cli("analyse", "agreement", str(run["run"]), "--output", str(pooled), "--pool-humans").returncode == 0
    rep = json.loads(pooled.read_text())
    assert rep["humans"] == ["human"] and sorted(rep["systems"]) == ["human", "lexical"]
    [pair] = rep["pairs"]
    assert pair["n_items"] == 4 and pair["both_correct"] + pair["only_a"] + pair["only_b"] + pair["neither"] == 4


def test_report_lists_people_with_their_effort(run: dict, tmp_path: Path) -> None:
    html_path = tmp_path / "report.html"
    proc = run_cli("report", str(run["run"]), "--output", str(html_path))
    assert proc.returncode == 0, proc.stderr
    html = html_path.read_text()
    for name in ("human:alice", "human:bob", "human:carol", "lexical"):
        assert name in html, name
    pooled = tmp_path / "pooled.html"
    assert run_cli("report", str(run["run"]), "--output", str(pooled), "--pool-humans").returncode == 0
    text = pooled.read_text()
    assert "human:alice" not in text and ">human<" in text
    # people's trajectories carry their searches: effort = 1 search per question
    store = RunStore(run["run"], create=False)
    [ep] = [e for e in store.episodes("human:bob") if e.task_id == "web/2"]
    assert ep.submission.iterations == 1 and ep.submission.search_history == ["report"]
