"""The gap to the oracle: how much accuracy a system loses to finding the evidence itself; and, named
apart, MADQA's own Oracle Gap (human_oracle_gap, when a run holds human-oracle episodes).

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
from typing import TYPE_CHECKING

from pydantic import BaseModel

from deskbench.runs.identity import SystemIdentity
from deskbench.runs.scorings import StoredItem
from deskbench.tracks.docqa.tasks import HOP_TYPES, DocQATask

if TYPE_CHECKING:
    from deskbench.runs.store import RunStore

ORACLE = "oracle"
HUMAN_ORACLE = "human-oracle"  # tracks/docqa/humans.py KINDS: people given the gold pages
MADQA_RULE = ("MADQA's Oracle Gap (§5): the accuracy of people given the gold pages (human-oracle) minus the "
              "best agent's, each over the tasks both scored (people answer their batches), raw item scores; "
              "agents are the run's systems that are neither people nor deskbench's oracle agent")


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


class HumanOracleGap(BaseModel):
    """MADQA's Oracle Gap (§5, Table 3's Human Oracle Retriever row against the best agents: 99.4
    against 82.2, 17.2 points): people given the gold pages against the best agent of the run,
    paired over the tasks both scored (MADQA_RULE). `by_agent`: every agent's own pairing."""

    human_oracle: str  # the row: the pooled `human-oracle`, or the annotators' rows pooled here
    best: str  # the agent with the highest accuracy over the tasks it shares with the human oracle
    n: int
    human_oracle_accuracy: float
    best_accuracy: float
    gap: float  # human_oracle_accuracy - best_accuracy
    by_agent: dict[str, GapGroup]
    rule: str = MADQA_RULE
    run: str | None = None  # the run directory, where a report of several runs names it


def human_oracle_gap(items: Sequence[StoredItem], identities: Mapping[str, SystemIdentity],
                     ran: Mapping[str, set[str]], first: Mapping[str, str]) -> HumanOracleGap | None:
    """MADQA's Oracle Gap from a scoring's attempt-0 items, None without human-oracle answers or an
    agent. The human oracle's answer to a task is the pooled `human-oracle` row's when it was scored
    (`--pool-humans`), else that of the annotator `first` names (task id -> `human-oracle:NAME`, the
    earliest answer, as humans.episodes_of pools them)."""
    from deskbench.tracks.docqa.humans import is_human

    scores: dict[str, dict[str, float]] = {}
    for item in items:
        if (item.attempt == 0 and item.status == "scored" and item.score is not None
                and item.task_id in ran.get(item.system, set())):
            scores.setdefault(item.system, {})[item.task_id] = item.score
    if HUMAN_ORACLE in scores:
        human = scores[HUMAN_ORACLE]
    else:
        human = {tid: scores[name][tid] for tid, name in first.items() if tid in scores.get(name, {})}
    agents = [name for name in scores if not is_human(name)
              and (name not in identities or identities[name].config.agent != ORACLE)]
    if not human or not agents:
        return None
    by_agent = {name: _group([(human[tid], score) for tid, score in scores[name].items() if tid in human])
                for name in agents}
    paired = {name: g for name, g in by_agent.items() if g.n}
    if not paired:
        return None
    best = max(paired, key=lambda name: paired[name].accuracy or 0.0)  # the first of equals, in scoring order
    top = paired[best]
    assert top.oracle_accuracy is not None and top.accuracy is not None and top.gap is not None
    return HumanOracleGap(human_oracle=HUMAN_ORACLE, best=best, n=top.n, human_oracle_accuracy=top.oracle_accuracy,
                          best_accuracy=top.accuracy, gap=top.gap, by_agent=by_agent)


def first_human_oracle(store: RunStore) -> dict[str, str]:
    """Task id -> the `human-oracle:NAME` system whose attempt-0 answer counts for the pooled row."""
    from deskbench.tracks.docqa.humans import episodes_of

    return {ep.task_id: ep.system for ep in episodes_of(store, HUMAN_ORACLE)}
