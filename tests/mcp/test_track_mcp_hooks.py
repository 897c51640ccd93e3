"""A track's MCP tools, judges and statistics stay in its folder (issue 34): `deskbench mcp`
reaches a track's tools through Track.mcp_tools (a fourth track serves its own, one without any
is refused in one line before the run directory is made), judge calibration takes any track's
items, and the core modules these came from import no track."""

from __future__ import annotations

import ast
import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from echo_track import EchoTrack

from deskbench.contract.mcp import McpRequest, McpServed, McpTools
from deskbench.contract.registry import register_track, unregister_track
from deskbench.errors import UserError
from deskbench.scoring.judge_calibration import CalibrationItem, HumanLabel, calibration_of

SRC = Path(__file__).resolve().parents[2] / "src" / "deskbench"


class Reached(Exception):
    """Raised by the test track's tools so the test sees the request without serving."""

    def __init__(self, request: McpRequest) -> None:
        super().__init__("reached")
        self.request = request


class EchoMcpTools(McpTools):
    serves_tasks: ClassVar[bool] = True

    def tasks(self, request: McpRequest) -> McpServed[Any]:
        raise Reached(request)


class EchoExternal(EchoTrack):
    """echo with an agent of its own over MCP (`deskbench mcp` stores its episodes as system
    'external', so the track must run that agent) and no MCP tools."""

    agents = (*EchoTrack.agents, "external")


class EchoWithTools(EchoExternal):
    def mcp_tools(self) -> McpTools:
        return EchoMcpTools()


@pytest.fixture
def echo_tasks(tmp_path: Path) -> Path:
    path = tmp_path / "echo.jsonl"
    path.write_text(json.dumps({"id": "e1", "text": "hi", "expected": "HI"}) + "\n")
    return path


@pytest.fixture
def with_track(request: pytest.FixtureRequest) -> Iterator[None]:
    register_track(request.param())
    yield
    unregister_track("echo")


@pytest.mark.parametrize("with_track", [EchoWithTools], indirect=True)
def test_a_fourth_track_serves_its_own_mcp_tools(with_track: None, echo_tasks: Path, tmp_path: Path) -> None:
    from deskbench.mcp.standalone import serve_tasks

    out = tmp_path / "run"
    with pytest.raises(Reached) as caught:
        asyncio.run(serve_tasks(echo_tasks, out, task="e1", transport="stdio", port=0, max_rounds=7))
    request = caught.value.request
    assert (request.source, request.task, request.max_rounds) == (echo_tasks, "e1", 7)
    assert request.store.dir == out and out.is_dir()


@pytest.mark.parametrize("with_track", [EchoExternal], indirect=True)
def test_a_track_without_mcp_tools_is_refused_before_the_run_dir(with_track: None, echo_tasks: Path,
                                                                  tmp_path: Path) -> None:
    from deskbench.mcp.standalone import serve_tasks

    out = tmp_path / "run"
    with pytest.raises(UserError, match=r"echo\.jsonl is echo's") as caught:
        asyncio.run(serve_tasks(echo_tasks, out, task=None, transport="stdio", port=0))
    assert "analytics and deliverables" in str(caught.value)  # the tracks that do serve tasks, from their hooks
    assert not out.exists()


def test_judge_calibration_takes_any_tracks_items() -> None:
    items = [CalibrationItem(id=f"r/s/{n}", task_id=str(n), run="r", system="s", question="q", track="echo",
                             category="loud" if n % 2 else "quiet", judge_verdict=float(n % 2 == 0),
                             verdict_source="judge") for n in range(4)]
    labels = [HumanLabel(item_id=i.id, labeller="ann", label="correct") for i in items]
    cal = calibration_of(items, labels)
    assert cal.track == "echo" and sorted(cal.by_category) == ["loud", "quiet"]
    with pytest.raises(UserError, match="calibrates echo evaluators"):
        cal.for_score()


@pytest.mark.parametrize("module", ["scoring/judge_calibration.py", "scoring/judges.py", "analysis/stats.py",
                                    "mcp/standalone.py", "mcp/code_session.py", "agents/code_loop.py"])
def test_these_core_modules_import_no_track(module: str) -> None:
    tree = ast.parse((SRC / module).read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert [n for n in names if n.startswith("deskbench.tracks")] == []


def test_no_track_imports_another_tracks_judge() -> None:
    """Shared judges live in the core (scoring/judges.py): no track reaches into another's scoring command."""
    found = []
    for path in (SRC / "tracks").rglob("*.py"):
        own = path.relative_to(SRC / "tracks").parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deskbench.tracks."):
                other = (node.module or "").split(".")[2]
                if other != own and any(a.name.startswith("_") for a in node.names):
                    found.append(f"{path.relative_to(SRC)} imports {node.module}: {[a.name for a in node.names]}")
    assert found == []
