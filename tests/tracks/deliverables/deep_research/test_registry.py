"""Each deep-research agent is registered, records its own protocol (its provider's API and web
access, never the deliverable agent's "none (no --web)") and its prompt module in its identity."""

from __future__ import annotations

import importlib

import pytest

from deskbench.tracks.deliverables import deep_research
from deskbench.tracks.deliverables.agent import DELIVERABLE_AGENTS
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions
from deskbench.tracks.deliverables.run import agent_modules, agent_protocol
from deskbench.tracks.deliverables.track import DeliverablesTrack


@pytest.mark.parametrize("name", sorted(deep_research.AGENTS))
def test_a_deep_research_agent_says_what_it_runs(name: str) -> None:
    assert name in DELIVERABLE_AGENTS and name in DeliverablesTrack.agents
    notes = agent_protocol(name, DeliverableOptions(), external=False)
    web = [n for n in notes if n.aspect == "web access"]
    assert len(web) == 1 and "no --web" not in web[0].detail
    assert web[0].source == "paper"  # Table 5: each provider's own search, as the paper ran it
    module = agent_modules(name)
    assert module and importlib.import_module(module[0]).__name__.startswith("deskbench.tracks.deliverables.deep_research.")


def test_the_deliverable_agent_keeps_its_notes() -> None:
    notes = agent_protocol("deliverable-agent", DeliverableOptions(), external=False)
    assert any(n.aspect == "web access" and "no --web" in n.detail for n in notes)
    assert agent_modules("deliverable-agent") == ()
