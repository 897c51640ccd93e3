"""The calibration screen takes MADQA's three-way label (F.1): a partial for an item without a
category (the judge's correct / partial / incorrect scale), refused for a categorised one; the
results page shows the quadratic-weighted kappa."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli, write_operator_corpus
from test_web import TASKS, Client, serve

from deskbench.scoring.judge_calibration import CalibrationItem, read_labels
from deskbench.tracks.docqa.web.app import create_app
from deskbench.web.calibration import LABELS_FILE


def _item(name: str, verdict: float, category: str | None = None) -> CalibrationItem:
    return CalibrationItem(id=f"r/s/{name}", task_id=name, run="r", system="s", question=f"{name}?",
                           answer_variants=[["gold"]], prediction=["p"], judge_verdict=verdict,
                           verdict_source="judge", judge="j", category=category)


def test_web_screen_takes_a_partial_for_items_without_a_category(tmp_path: Path) -> None:
    write_operator_corpus(tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    items = tmp_path / "items.jsonl"
    items.write_text(_item("a", 0.5).model_dump_json() + "\n"
                     + _item("b", 1.0, category="qa").model_dump_json() + "\n")
    run_dir = tmp_path / "run"
    token = run_cli("serve", "add-user", "erin", "--out", str(run_dir)).stdout.strip()
    app = create_app(tmp_path / "corpus", tasks, run_dir, calibration=items)
    with serve(app) as port:
        c = Client(port)
        c.login(token)
        assert 'id="partial"' in c.request("GET", "/calibration/1")[2]
        assert 'id="partial"' not in c.request("GET", "/calibration/2")[2]
        assert c.request("POST", "/calibration/2/label", {"label": "partial", "csrf": c.csrf})[0] == 400
        assert c.request("POST", "/calibration/1/label", {"label": "partial", "csrf": c.csrf})[0] == 303
        html = c.request("GET", "/calibration/results?scope=all")[2]
        assert 'id="qwk"' in html
    saved = read_labels(run_dir / LABELS_FILE)
    assert [(lab.item_id, lab.label) for lab in saved] == [("r/s/a", "partial")]
