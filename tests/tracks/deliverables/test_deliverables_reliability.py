"""deliverables' pass^k (ACCEPT a success) and the consistency of the verifiers' outcomes across
attempts (outcomes.py deliverables_attempts over scoring/attempts.py), on constructed items with
the figures computed by hand in the comments; score prints them."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from deskbench.tracks.deliverables.outcomes import deliverables_attempts, verifier_key
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES


def item(task: str, attempt: int, vrs: float | None, accept: bool | None, verdicts: dict[str, str],
         system: str = "alpha") -> DeliverableItemScore:
    return DeliverableItemScore.model_validate({
        "task_id": task, "system": system, "attempt": attempt, "prompt_class": "ldp", "status": "ok",
        "verifiers": [{"id": v, "status": s, "evidence": ""} for v, s in verdicts.items()],
        "v": 0.0, "passed": 0, "failed": 0, "unobservable": 0, "judged": 0,
        "scores": None if vrs is None else dict.fromkeys(RUBRIC_CODES, 2), "vrs_relaxed": vrs, "vrs_strict": vrs,
        "reasoning_mean": None if vrs is None else 2.0, "accept": accept, "auto_reject": None if vrs is None else False})


def _items() -> list[DeliverableItemScore]:
    """t1 accepted twice, same verifiers; t2 accepted once, verifiers differ; t3 one attempt ungraded."""
    ok = {"v1": "pass", "v2": "pass"}
    return [item("t1", 0, 90.0, True, ok), item("t1", 1, 80.0, True, {"v2": "pass", "v1": "pass"}),
            item("t2", 0, 85.0, True, ok), item("t2", 1, 40.0, False, {"v1": "pass", "v2": "fail"}),
            item("t3", 0, 50.0, False, ok), item("t3", 1, None, None, ok),
            item("t1", 0, 10.0, False, ok, system="beta")]  # beta ran once: no attempts block


def test_pass_hat_and_verifier_consistency_by_hand() -> None:
    got = deliverables_attempts(_items())
    assert list(got) == ["alpha"]
    m = got["alpha"]
    r = m.reliability
    # pass^2 over t1 (2 of 2) and t2 (1 of 2): (1 + 0) / 2; t3 has one graded attempt, left out
    # pass^1: t1 1, t2 1/2, t3 0/1 -> 1/2; solved (t1, t2): 0 tasks 0 of 2, t2 1 of 2, t1 2 of 2
    assert (r.pass_hat, r.curve, r.solved, r.n_tasks) == (0.5, [0.5, 0.5], [0, 1, 1], 2)
    # verifiers agree on t1 and t3 (unscored attempts keep their answer), not t2
    assert (r.consistency, r.n_consistency) == (pytest.approx(2 / 3), 3)
    # pass@2 (best VRS_0 / 100): t1 0.9, t2 0.85, t3 0.5; avg@2: 0.85, 0.625, 0.5
    assert m.passk == pytest.approx((0.9 + 0.85 + 0.5) / 3) and m.avgk == pytest.approx((0.85 + 0.625 + 0.5) / 3)
    assert not m.complete
    assert verifier_key(_items()[0]) == verifier_key(_items()[1]) == "v1=pass; v2=pass"


def test_score_prints_the_attempts_block() -> None:
    from deskbench.tracks.deliverables.scoring.deliverables_print import print_summary
    from deskbench.tracks.deliverables.scoring.deliverables_summary import summarize

    items = _items()
    report = summarize(items, [])
    report.attempts = deliverables_attempts(items)
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=400, highlight=False))
    text = buf.getvalue()
    assert "attempts of alpha (k=2, 3 tasks scored): VRS_0/100 pass@1 75.0%" in text
    assert "reliability (k=2): pass^2 50.0 over 2 tasks with 2 scored attempts" in text
