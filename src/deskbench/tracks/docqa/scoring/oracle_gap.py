"""The gap to the oracle: how much accuracy a system loses to finding the evidence itself.

Not MADQA's "Oracle Gap" (§5, Table 3): the paper's is the accuracy of humans given the gold pages
(the Human Oracle Retriever row, 99.4) minus that of the best agents (about 18 points). This one,
which the issue asks for, holds the model fixed: in a run that holds an `oracle` system (the same
model given the gold pages) and another system on that model, each such system gets the oracle's
accuracy minus its own, over the tasks both
scored (a task only one of them ran, or left unscored, is left out: only over what ran), overall
and by hop type. Accuracies here are raw mean item scores (1 / 0.5 / 0 with a judge, ANLS* >= 0.5
without), with no bias correction: the correction is for one system's accuracy, not a paired
difference. A system whose model has no oracle in the run, or more than one that cannot be told
apart by the view they were shown, gets none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from deskbench.runs.identity import SystemIdentity
from deskbench.runs.scorings import StoredItem
from deskbench.tracks.docqa.tasks import HOP_TYPES, DocQATask

ORACLE = "oracle"


class GapGroup(BaseModel):
    n: int  # tasks both scored
    oracle_accuracy: float | None = None
    accuracy: float | None = None
    gap: float | None = None  # oracle_accuracy - accuracy


class OracleGap(GapGroup):
    oracle: str  # the oracle system it is compared with
    by_hop_type: dict[str, GapGroup]


def oracle_of(system: str, identities: Mapping[str, SystemIdentity]) -> str | None:
    """The run's oracle system on `system`'s model (the one shown the same view when there are
    several); None for an oracle itself, a system with no model, or no oracle to pair it with."""
    me = identities.get(system)
    if me is None or me.config.agent == ORACLE or me.config.model is None:
        return None
    same_model = [name for name, ident in identities.items()
                  if ident.config.agent == ORACLE and ident.config.model == me.config.model]
    if len(same_model) > 1:
        view = me.config.settings.get("view")
        same_model = [n for n in same_model if identities[n].config.settings.get("view") == view]
    return same_model[0] if len(same_model) == 1 else None


def _group(pairs: Sequence[tuple[float, float]]) -> GapGroup:
    if not pairs:
        return GapGroup(n=0)
    oracle = sum(o for o, _ in pairs) / len(pairs)
    mine = sum(m for _, m in pairs) / len(pairs)
    return GapGroup(n=len(pairs), oracle_accuracy=oracle, accuracy=mine, gap=oracle - mine)


def oracle_gaps(items: Sequence[StoredItem], tasks: Sequence[DocQATask], identities: Mapping[str, SystemIdentity],
                ran: Mapping[str, set[str]]) -> dict[str, OracleGap]:
    """Each system's gap to its oracle, from the scoring's attempt-0 items of the tasks it ran
    (`ran`: the tasks each system has an episode for; `score` counts the others missing, 0)."""
    scores: dict[str, dict[str, float]] = {}
    for item in items:
        if (item.attempt == 0 and item.status == "scored" and item.score is not None
                and item.task_id in ran.get(item.system, set())):
            scores.setdefault(item.system, {})[item.task_id] = item.score
    hop = {t.id: t.hop_type for t in tasks}
    gaps = {}
    for system in scores:
        oracle = oracle_of(system, identities)
        if oracle is None or oracle not in scores:
            continue
        both = [(tid, scores[oracle][tid], score) for tid, score in scores[system].items() if tid in scores[oracle]]
        overall = _group([(o, m) for _, o, m in both])
        gaps[system] = OracleGap(**overall.model_dump(), oracle=oracle, by_hop_type={
            h: _group([(o, m) for tid, o, m in both if hop.get(tid) == h]) for h in HOP_TYPES})
    return gaps
