"""Each built-in track names the agents it runs without importing them (claims() must stay cheap);
the names must be exactly its registry's, or `deskbench run --agent` would go to the wrong track."""

from __future__ import annotations

from deskbench.contract.registry import get_track
from deskbench.tracks.analytics.agent import ANALYTICS_AGENTS
from deskbench.tracks.deliverables.agent import DELIVERABLE_AGENTS
from deskbench.tracks.docqa.agents.registry import AGENTS


def test_track_agent_names_match_their_registries() -> None:
    assert get_track("docqa").agents == tuple(AGENTS)
    assert get_track("analytics").agents == tuple(ANALYTICS_AGENTS)
    assert get_track("deliverables").agents == tuple(DELIVERABLE_AGENTS)


def test_an_unknown_agent_lists_every_track_s_agents() -> None:
    import pytest

    from deskbench.errors import UserError
    from deskbench.tracks.docqa.agents.registry import make_agent

    with pytest.raises(UserError) as exc:
        make_agent("nope")
    for name in ("bm25-agent", "analyst-agent", "deliverable-agent"):
        assert name in str(exc.value)
