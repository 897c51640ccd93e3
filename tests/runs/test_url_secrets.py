"""Credentials in a user-given URL are used, never kept or shown (issue 33): `run --agent external
--url http://user:PASSWORD@127.0.0.1:PORT/episode?token=TOKEN` sends them (the service double
sees the Basic authorization and the token), while the run folder (run.sqlite and everything
beside it), `deskbench info` and the episodes' errors hold neither; a resume with the same URL is
the same configuration. The double is tests/external_service.py's, its handler extended to keep
each request's Authorization header and path."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from deskbench.runs.identity import SystemConfig, stored_identities
from deskbench.runs.store import RunStore
from tests.conftest import run_cli
from tests.external_service import Handler, Service, service
from tests.mcp.test_mcp_external import corpus_and_tasks


@pytest.fixture(scope="module", autouse=True)
def _mcp_sdk() -> None:
    """Skipped without the MCP SDK, checked when these tests run (the service answers with it), not
    imported at every worker's collection."""
    pytest.importorskip("mcp")


PASSWORD = "pa55-SECRET-x7q"
TOKEN = "tok-SECRET-q9z"
LEAKS = (PASSWORD, TOKEN)


class Seeing(Handler):
    """The double's handler, keeping what each POST carried besides its body."""

    def do_POST(self) -> None:
        seen: list[tuple[str, str]] = self.server.seen  # type: ignore[attr-defined]
        seen.append((self.path, self.headers.get("Authorization", "")))
        super().do_POST()


@contextmanager
def seeing(mode: str) -> Iterator[Service]:
    with service(mode) as svc:
        svc.seen = []  # type: ignore[attr-defined]
        svc.RequestHandlerClass = Seeing
        yield svc


def with_credentials(svc: Service) -> str:
    port = svc.server_address[1]
    return f"http://agent:{PASSWORD}@127.0.0.1:{port}/episode?token={TOKEN}&lang=en"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return corpus_and_tasks(tmp_path_factory.mktemp("secrets"))


def _run(setup: tuple[Path, Path], out: Path, url: str, *flags: str) -> tuple[int, str, str]:
    corpus, tasks = setup
    proc = run_cli("run", "--agent", "external", "--url", url, "--tasks", str(tasks), "--corpus", str(corpus),
                   "--out", str(out), "--json", *flags, timeout=240)
    return proc.returncode, proc.stdout, proc.stderr


def _leaks_in_folder(out: Path) -> list[str]:
    """Files of the run folder holding a credential, and decoded transcripts/meta that do (a
    compressed body would hide it from a byte search)."""
    found = [str(p) for p in out.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in LEAKS)]
    store = RunStore(out, create=False)
    for ep in store.episodes("external"):
        text = ep.model_dump_json() + json.dumps(store.transcript(ep.task_id, ep.system, ep.attempt), default=str)
        found += [f"episode {ep.task_id}" for s in LEAKS if s in text]
    return found


def test_credentials_are_sent_but_never_stored_or_shown(setup: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    with seeing("answer") as svc:
        url = with_credentials(svc)
        code, stdout, stderr = _run(setup, out, url)
        assert code == 0, stderr
        again = _run(setup, out, url, "--limit", "2")  # a resume with the same URL: the same configuration
    assert again[0] == 0, again[2]
    basic = "Basic " + base64.b64encode(f"agent:{PASSWORD}".encode()).decode()
    assert len(svc.seen) == 2  # type: ignore[attr-defined]
    assert all(auth == basic and f"token={TOKEN}" in path for path, auth in svc.seen)  # type: ignore[attr-defined]
    assert not any(s in stdout + stderr + again[1] + again[2] for s in LEAKS)
    assert _leaks_in_folder(out) == []
    config = stored_identities(RunStore(out, create=False))["external"].config
    assert config.settings["url"] == f"http://***@127.0.0.1:{svc.server_address[1]}/episode?token=***&lang=en"
    for flags in (("--json",), ()):
        shown = run_cli("info", str(out), *flags)
        assert shown.returncode == 0, shown.stderr
        assert "***@127.0.0.1" in shown.stdout and not any(s in shown.stdout + shown.stderr for s in LEAKS)


def test_an_episode_error_names_the_service_without_its_credentials(setup: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    out = tmp_path / "run"
    with seeing("fail") as svc:
        url = with_credentials(svc)
        code, stdout, stderr = _run(setup, out, url, "--limit", "1")
    assert code == 0, stderr
    (ep,) = RunStore(out, create=False).episodes("external")
    shown = f"http://***@127.0.0.1:{svc.server_address[1]}/episode?token=***&lang=en"
    assert ep.status == "error" and f"POST {shown} answered 500" in (ep.error or ""), ep.error
    assert svc.seen and all(auth.startswith("Basic ") for _, auth in svc.seen)  # type: ignore[attr-defined]
    assert not any(s in stdout + stderr for s in LEAKS)
    assert _leaks_in_folder(out) == []


def test_a_run_stored_with_credentials_is_shown_and_resumed_without_them() -> None:
    """A configuration kept before credentials were stripped reads back without them, and equals
    the one a resume with the same URL builds (no refusal naming the password)."""
    raw = f"http://agent:{PASSWORD}@127.0.0.1:8080/episode?token={TOKEN}"
    old = SystemConfig.model_validate({"track": "docqa", "agent": "external", "settings": {"url": raw}})
    new = SystemConfig(track="docqa", agent="external", settings={"url": raw})
    assert not any(s in old.model_dump_json() for s in LEAKS) and old.differences(new) == []


@pytest.mark.parametrize(("given", "shown"), [
    ("http://user:pw@host/x", "http://***@host/x"),
    ("https://ghp_token@github.com/a/b.git", "https://***@github.com/a/b.git"),
    ("http://h/p?api_key=1&q=a&Access-Token=2&x_amz_signature=3&my_key=4#frag",
     "http://h/p?api_key=***&q=a&Access-Token=***&x_amz_signature=***&my_key=***#frag"),
    ("http://h/p?sig=s&signature=t&password=u&apikey=v&key=w&secret=x&token=y",
     "http://h/p?sig=***&signature=***&password=***&apikey=***&key=***&secret=***&token=***"),
    ("http://***@h/?token=***", "http://***@h/?token=***"),  # idempotent: a resume compares equal
    ("http://127.0.0.1:8080/episode?lang=en", "http://127.0.0.1:8080/episode?lang=en"),
])
def test_redact_url(given: str, shown: str) -> None:
    from deskbench.redact import redact_text, redact_url

    assert redact_url(given) == shown
    assert redact_text(f"POST {given} failed: 'x'") == f"POST {shown} failed: 'x'"


def test_a_report_links_to_the_viewer_without_credentials() -> None:
    """`report --viewer-url` writes its links into a file that travels: without userinfo or a token."""
    from deskbench.report.render import episodes

    link = str(episodes({"viewer_url": f"http://me:{PASSWORD}@127.0.0.1:8770/?token={TOKEN}"}, "3 errors",
                        system="external"))
    assert 'href="http://***@127.0.0.1:8770/?token=***' in link
    assert not any(s in link for s in LEAKS)


def test_the_readme_says_how_to_pass_the_question_safely_and_that_plugins_run_as_the_user() -> None:
    """The table's last row: nothing warned that `{question}` inside `sh -c '...'` is shell
    injection, or that `module:Class` plugins run unsandboxed with the user's privileges."""
    root = Path(__file__).parents[2]
    for page in (root / "README.md", root / "docs" / "plugins.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert "sh -c" in text and "shell code" in text, page
        assert "-- {question}" in text and "$DESKBENCH_QUESTION" in text, page
        assert "unsandboxed" in text or "not sandboxed" in text, page
        assert "privileges" in text and "trust" in text, page
