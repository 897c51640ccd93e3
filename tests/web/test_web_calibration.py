"""Judge calibration screens (deskbench serve --calibration ITEMS): access, CSRF, no verdict on the
labelling screen, a person labels every item in Debian's headless Chromium, the results page's
q0/q1/m0/m1 equal the hand-computed ones, and the downloaded JSON is what `deskbench calibrate
compute --json` prints and what `deskbench score --judge-calibration` reads.
DESKBENCH_DOCS_SCREENSHOT=1 also refreshes docs/web-calibration.png."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli, watched_page, write_operator_corpus
from test_web import TASKS, Client, serve, serve_command

from deskbench.scoring.judge_calibration import read_calibration, read_labels
from deskbench.tracks.docqa.web.app import create_app
from deskbench.web.calibration import LABELS_FILE


def _item(n: int, verdict: float, prediction: list[str], source: str = "judge") -> dict:
    return {"id": f"run/sys-a/q{n}", "task_id": f"q{n}", "run": "run", "system": "sys-a",
            "question": f"Question number {n}: what is the harbour fee?", "answer_variants": [[f"gold {n}"], ["alt"]],
            "prediction": prediction, "judge_verdict": verdict, "verdict_source": source,
            "judge": "judge-model-XYZ", "judge_reason": f"JUDGE-REASON-{n}"}


# (item, the person's label): verdicts 1, 0, 0, 1, 0.5, 0 against correct, correct, incorrect,
# incorrect, correct, incorrect. Human-correct: q1 (v=1), q2 (v=0), q5 (v=0.5) -> m1 = 3,
# tp = 1.5, fn = 1.5, q1 = 0.5. Human-incorrect: q3 (0), q4 (1), q6 (0) -> m0 = 3, tn = 2, fp = 1,
# q0 = 2/3.
ITEMS = [
    (_item(1, 1.0, ["gold 1"], "exact"), "correct"),
    (_item(2, 0.0, ["<script>alert(1)</script>"]), "correct"),
    (_item(3, 0.0, ["wrong <b>bold</b>"]), "incorrect"),
    (_item(4, 1.0, ["plausible"]), "incorrect"),
    (_item(5, 0.5, ["half"]), "correct"),
    (_item(6, 0.0, ["nope"]), "incorrect"),
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("webcal")
    write_operator_corpus(root)
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    items = root / "items.jsonl"
    items.write_text("".join(json.dumps(i) + "\n" for i, _ in ITEMS))
    run_dir = root / "run"
    tokens = {u: run_cli("serve", "add-user", u, "--out", str(run_dir)).stdout.strip() for u in ("erin", "finn")}
    app = create_app(root / "corpus", tasks, run_dir, calibration=items)
    with serve(app) as port:
        yield {"root": root, "port": port, "run": run_dir, "tokens": tokens, "items": items}


def test_no_session_and_no_csrf_are_refused(setup: dict) -> None:
    c = Client(setup["port"])
    for path in ("/calibration/1", "/calibration/results", "/calibration/results.json"):
        assert c.request("GET", path)[0] == 401, path
    status, headers, _ = c.request("GET", "/calibration", headers={"Accept": "text/html"})
    assert status == 303 and headers["location"] == "/login"
    assert c.request("POST", "/calibration/1/label", {"label": "correct", "csrf": "x"})[0] == 401
    c.login(setup["tokens"]["finn"])
    assert c.request("POST", "/calibration/1/label", {"label": "correct"})[0] == 403
    assert c.request("POST", "/calibration/1/label", {"label": "correct", "csrf": "wrong"})[0] == 403
    assert c.request("POST", "/calibration/1/label", {"label": "maybe", "csrf": c.csrf})[0] == 400
    assert c.request("POST", "/calibration/99/label", {"label": "correct", "csrf": c.csrf})[0] == 404
    assert not (setup["run"] / LABELS_FILE).exists()  # nothing refused was saved


def test_labelling_screen_hides_the_verdict_and_escapes(setup: dict) -> None:
    c = Client(setup["port"])
    c.login(setup["tokens"]["finn"])
    for n, (item, _) in enumerate(ITEMS, 1):
        status, _, html = c.request("GET", f"/calibration/{n}")
        assert status == 200
        assert item["question"] in html and "gold " + str(n) in html
        for secret in (item["judge_reason"], "judge-model-XYZ", "sys-a", "verdict", "exact"):
            assert secret not in html, (n, secret)
    html = c.request("GET", "/calibration/2")[2]
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold" not in c.request("GET", "/calibration/3")[2]


def test_a_person_labels_every_item_in_chromium(setup: dict, browser) -> None:  # noqa: ANN001
    base = f"http://127.0.0.1:{setup['port']}"
    page, problems = watched_page(browser, base, viewport={"width": 1100, "height": 800}, accept_downloads=True)
    page.goto(base + "/calibration")
    assert page.url == base + "/login"
    page.fill("#token", setup["tokens"]["erin"])
    page.click("#login button[type=submit]")
    page.wait_for_url(base + "/")
    page.goto(base + "/calibration")
    assert "0 of 6 labelled" in page.locator("#progress").inner_text()
    page.click("#start")
    for n, (item, label) in enumerate(ITEMS, 1):
        page.wait_for_url(f"{base}/calibration/{n}")
        assert f"item {n} of 6" in page.locator("#progress").inner_text()
        assert f"{n - 1} of 6 labelled" in page.locator("#progress").inner_text()
        assert page.locator("#prediction").inner_text().strip() == "\n".join(item["prediction"])
        if n == 2:
            shot = page.screenshot(full_page=True)
            if os.environ.get("DESKBENCH_DOCS_SCREENSHOT"):
                docs = Path(__file__).resolve().parents[2] / "docs"
                docs.mkdir(exist_ok=True)
                (docs / "web-calibration.png").write_bytes(shot)
        page.click(f"#{label}")
    page.wait_for_url(base + "/calibration/results")
    assert page.locator("#q1").inner_text() == "0.5000"
    assert page.locator("#q0").inner_text() == "0.6667"
    assert page.locator("#m1").inner_text() == "3" and page.locator("#m0").inner_text() == "3"
    assert page.locator("#tp-fn").inner_text() == "1.5 / 1.5"
    assert page.locator("#tn-fp").inner_text() == "2 / 1"
    with page.expect_download() as info:
        page.click("#download")
    downloaded = setup["root"] / "downloaded.json"
    info.value.save_as(downloaded)
    page.goto(base + "/calibration")
    assert "6 of 6 labelled" in page.locator("#progress").inner_text()
    assert problems == []
    page.close()

    # saved at once as HumanLabels of erin, one per click, readable by `calibrate compute`
    labels_path = setup["run"] / LABELS_FILE
    labels = read_labels(labels_path)
    assert [(lab.item_id, lab.labeller, lab.label) for lab in labels] == \
        [(i["id"], "erin", lab) for i, lab in ITEMS]
    cal = read_calibration(downloaded)  # what `deskbench score --judge-calibration FILE` reads
    assert (cal.q1, cal.m1, cal.m0, cal.tp, cal.fn, cal.tn, cal.fp) == (0.5, 3, 3, 1.5, 1.5, 2, 1)
    assert cal.q0 == pytest.approx(2 / 3) and cal.labellers == ["erin"] and cal.judge == "judge-model-XYZ"
    q0, q1, m0, m1 = cal.for_score(str(downloaded))
    assert (q1, m0, m1) == (0.5, 3, 3) and q0 == pytest.approx(2 / 3)
    proc = run_cli("calibrate", "compute", str(setup["items"]), str(labels_path), "--json")
    assert proc.returncode == 0, proc.stderr
    assert downloaded.read_text() == proc.stdout  # byte for byte what the CLI prints

    # finn's labels are separate ("mine"); under "all" his disagreement with erin leaves item 4 out
    c = Client(setup["port"])
    c.login(setup["tokens"]["finn"])
    assert c.request("POST", "/calibration/4/label", {"label": "correct", "csrf": c.csrf})[0] == 303
    mine = json.loads(c.request("GET", "/calibration/results.json?scope=mine")[2])
    assert mine["labellers"] == ["finn"] and (mine["m1"], mine["m0"], mine["q1"]) == (1, 0, 1.0)
    every = json.loads(c.request("GET", "/calibration/results.json?scope=all")[2])
    assert every["labellers"] == ["erin", "finn"] and every["n_disagreed"] == 1 and every["m0"] == 2
    assert c.request("GET", "/calibration/results.json?scope=../x")[0] == 400


def test_bad_items_file_is_refused(setup: dict, tmp_path: Path) -> None:
    from deskbench.errors import UserError

    unjudged = tmp_path / "items.jsonl"
    unjudged.write_text(json.dumps({**ITEMS[0][0], "judge_verdict": None, "verdict_source": None}) + "\n")
    with pytest.raises(UserError, match="no item carries a judge verdict"):
        create_app(setup["root"] / "corpus", setup["root"] / "tasks.jsonl", tmp_path / "run", calibration=unjudged)


def test_calibration_alone_needs_no_corpus_or_tasks(setup: dict, tmp_path: Path) -> None:
    """`deskbench serve --out RUNDIR --calibration ITEMS`: the items carry everything shown."""
    run_dir = tmp_path / "cal"
    token = run_cli("serve", "add-user", "gail", "--out", str(run_dir)).stdout.strip()
    with serve_command("--out", str(run_dir), "--calibration", str(setup["items"])) as (port, status, _):
        assert status == 200
        c = Client(port)
        assert c.request("GET", "/calibration/1")[0] == 401
        c.login(token)
        assert "Judge calibration" in c.request("GET", "/")[2]
        assert "gold 1" in c.request("GET", "/calibration/1")[2]
        assert c.request("POST", "/calibration/1/label", {"label": "correct", "csrf": c.csrf})[0] == 303
        assert c.request("GET", "/q/1")[0] == 404  # no annotator screens in this mode
    [line] = (run_dir / LABELS_FILE).read_text().splitlines()
    assert json.loads(line)["labeller"] == "gail"
