"""A fourth track shows its own view in the episode viewer from its one folder: tests/echo_track
declares `viewer_views` (echo_track/viewer.py: its task, answer, offline score and why an episode
has no model call) and `deskbench view`'s app renders them, with no edit in web/. And a track's
own screens for people are what `deskbench serve` serves, through its `web_screens` hook."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from echo_track import TRACK, EchoTask
from echo_track.viewer import NO_CALLS
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.contract.registry import register_track, unregister_track
from deskbench.contract.web import ServedApp, ServeRequest, WebScreens
from deskbench.errors import UserError
from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app
from tests.web.test_viewer import login

TASKS = [EchoTask(id="e0", text="abc", expected="ABC"), EchoTask(id="e1", text="Mixed", expected="mixed")]


@pytest.fixture
def echo() -> Iterator[None]:
    register_track(TRACK)
    yield
    unregister_track("echo")


@pytest.fixture
def client(echo: None, tmp_path: Path) -> TestClient:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    out = tmp_path / "run"
    made = CliRunner().invoke(app, ["run", "--tasks", str(tasks), "--agent", "echo-upper", "--out", str(out), "--quiet"])
    assert made.exit_code == 0, made.output
    c = TestClient(create_viewer_app([out]))
    login(c, WebStore(out).add_user("ann"))
    return c


def _text(page: str) -> str:
    """The page's visible text, one space between words."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_table_shows_the_fourth_tracks_questions_and_scores(client: TestClient) -> None:
    page = client.get("/").text
    rows = re.findall(r'<tr class="outcome-(\w+)" data-task="([^"]+)" data-system="([^"]+)">', page)
    assert sorted(rows) == [("correct", "e0", "echo-upper"), ("wrong", "e1", "echo-upper")]  # its own scorer
    text = _text(page)
    assert "Echo 'abc'" in text and "Echo 'Mixed'" in text  # its task view's question
    assert "wrong case" in text  # its error class of a wrong item, offered as a filter


def test_an_episode_page_shows_the_fourth_tracks_own_view(client: TestClient) -> None:
    r = client.get("/episode", params={"run": "run", "system": "echo-upper", "task": "e1", "attempt": 0})
    assert r.status_code == 200, r.text[:300]
    text = _text(r.text)
    assert "Echo 'Mixed'" in text and "mixed" in text  # question and gold
    assert "letters 5" in text  # a fact of its task
    assert "echoed: MIXED" in text  # its answer view
    assert "letters in the wrong case" in text  # its score's details
    assert NO_CALLS in text  # why the episode holds no model call, in its words
    assert "{&#34;" not in r.text and '{"id"' not in text  # nothing shown as raw JSON (the core's default)


class _EchoScreens(WebScreens):
    """A screen for people of the echo run at --out, given alone (as deliverables' grading is)."""

    def app(self, request: ServeRequest) -> ServedApp | None:
        if request.out is None or request.corpus is not None or request.run_track != "echo":
            return None
        screen = FastAPI()
        screen.get("/")(lambda: {"echo run": str(request.out)})
        return ServedApp(app=screen, what="echo review", warnings=["warning: echo screens are a test's"])


def test_serve_reaches_a_tracks_own_screens_through_its_hook(echo: None, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`deskbench serve --out RUN` asks every track's `web_screens` (contract/web.py) and serves the
    app of the one that answers; a track without screens leaves the command's own message."""
    import deskbench.cli.serve as serve

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASKS[0].model_dump_json() + "\n")
    out = tmp_path / "run"
    assert CliRunner().invoke(app, ["run", "--tasks", str(tasks), "--agent", "echo-upper", "--out", str(out),
                                    "--quiet"]).exit_code == 0
    without = CliRunner().invoke(app, ["serve", "--out", str(out)])
    assert isinstance(without.exception, UserError) and str(without.exception).startswith(
        "deskbench serve needs --corpus, --tasks")  # echo has no screens yet: as before
    served: list[tuple[FastAPI, str]] = []
    monkeypatch.setattr(serve, "_run", lambda web_app, out, host, port, what="", serving=None: served.append((web_app, what)))
    monkeypatch.setattr(TRACK, "web_screens", lambda: _EchoScreens(), raising=False)
    result = CliRunner().invoke(app, ["serve", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "warning: echo screens are a test's" in result.stderr
    ((web_app, what),) = served
    assert what == "echo review" and TestClient(web_app).get("/").json() == {"echo run": str(out)}
