"""`--agent external --url`: an agent running as a service, POSTed once per task, answering over
the episode's MCP server with the official client library (tests/external_service.py); a
refusing service, or one that drops the connection, is the episode's error, in one line (one not
listening on this machine is refused before the run: tests/test_first_hour_failfast.py)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from deskbench.runs.identity import stored_identities
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from tests.conftest import run_cli
from tests.mcp.test_mcp_external import TASKS, corpus_and_tasks


@pytest.fixture(scope="module", autouse=True)
def _mcp_sdk() -> None:
    """Skipped without the MCP SDK, checked when these tests run; tests/external_service.py needs
    it and is imported by the tests that start a service, not at every worker's collection."""
    pytest.importorskip("mcp")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return corpus_and_tasks(tmp_path_factory.mktemp("url"))


def _run(setup: tuple[Path, Path], out: Path, *flags: str) -> tuple[int, str, str]:
    corpus, tasks = setup
    proc = run_cli("run", "--agent", "external", *flags, "--tasks", str(tasks), "--corpus", str(corpus),
                   "--out", str(out), "--json", timeout=240)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("mode", ["answer", "ack"])  # answers before its 200, or after its 202
def test_a_service_answering_over_mcp_is_stored_and_scored(setup: tuple[Path, Path], tmp_path: Path,
                                                            mode: str) -> None:
    from tests.external_service import service
    out = tmp_path / "run"
    with service(mode) as svc:
        code, stdout, stderr = _run(setup, out, "--url", svc.url)
    assert code == 0, stderr
    assert svc.errors == []
    assert sorted(r["task_id"] for r in svc.requests) == ["q1", "q2"]
    for request in svc.requests:  # the request shape docs/formats.md documents
        assert set(request) == {"task_id", "question", "mcp_url"}
        assert str(request["mcp_url"]).startswith("http://127.0.0.1:")
        assert request["question"] == next(t["question"] for t in TASKS if t["id"] == request["task_id"])
    episodes = {e.task_id: e for e in RunStore(out, create=False).episodes("external")}
    for task_id, doc, page, answer in (("q1", "harbour.pdf", 2, "Ingrid"), ("q2", "fleet.pdf", 1, "Nordkapp")):
        ep = episodes[task_id]
        assert ep.status == "ok", ep.error
        assert [s.name for s in ep.trajectory if isinstance(s, ToolCallStep)] == [
            "search_documents", "get_page", "provide_answer"]
        assert ep.submission is not None
        assert ep.submission.answer == [answer]  # type: ignore[attr-defined]
        assert [(c.document, c.page) for c in ep.submission.citations] == [(doc, page)]  # type: ignore[attr-defined]
    report = json.loads(stdout)["external"]
    assert report["accuracy"] == pytest.approx(1.0), report
    scoring = RunStore(out, create=False).latest_scoring()
    assert scoring is not None  # the scores are stored as a scoring, as any run's


def test_a_service_answering_500_is_the_episode_error(setup: tuple[Path, Path], tmp_path: Path) -> None:
    from tests.external_service import FAIL_BODY, service
    out = tmp_path / "run"
    with service("fail") as svc:
        code, _, stderr = _run(setup, out, "--url", svc.url, "--limit", "1")
    assert code == 0, stderr
    (ep,) = RunStore(out, create=False).episodes("external")
    assert ep.status == "error"
    error = ep.error or ""
    assert f"POST {svc.url} answered 500" in error, error
    assert FAIL_BODY[:300] in error and FAIL_BODY[:301] not in error  # the body's first 300 characters


def test_a_service_that_drops_the_connection_is_the_episode_error(setup: tuple[Path, Path], tmp_path: Path) -> None:
    stop = threading.Event()
    with socket.socket() as sock:  # accepts every connection and closes it at once: no HTTP answer
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.settimeout(0.2)

        def drop() -> None:
            while not stop.is_set():
                try:
                    conn, _ = sock.accept()
                except OSError:
                    continue
                conn.close()

        thread = threading.Thread(target=drop, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/episode"
        out = tmp_path / "run"
        try:
            code, _, stderr = _run(setup, out, "--url", url, "--limit", "1")
        finally:
            stop.set()
            thread.join()
    assert code == 0, stderr
    (ep,) = RunStore(out, create=False).episodes("external")
    assert ep.status == "error"
    error = ep.error or ""
    assert error.startswith(f"POST {url} failed: ") and "\n" not in error, error  # aiohttp's error, one line


@pytest.mark.parametrize("flags", [("--url", "http://127.0.0.1:9/x", "--command", "agent {question}"), ()])
def test_exactly_one_of_command_and_url(setup: tuple[Path, Path], tmp_path: Path, flags: tuple[str, ...]) -> None:
    code, _, stderr = _run(setup, tmp_path / "run", *flags)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "exactly one of --command" in lines[0] and "--url" in lines[0], stderr
    assert not (tmp_path / "run").exists()  # refused before anything is created


def test_a_url_that_is_not_http_is_one_line(setup: tuple[Path, Path], tmp_path: Path) -> None:
    code, _, stderr = _run(setup, tmp_path / "run", "--url", "ftp://example.org/agent")
    assert code == 2
    assert stderr.strip().splitlines() == [
        "error: --url 'ftp://example.org/agent' is not an http(s) URL with a host; give e.g. "
        "http://127.0.0.1:8080/episode"]


def test_formats_md_documents_the_request() -> None:
    from deskbench.agents.service import ServiceRequest

    text = (Path(__file__).parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    section = text.split("#### ServiceRequest\n", 1)[1]
    assert all(f"`{field}`" in section for field in ServiceRequest.model_fields)


def test_timeout_limits_a_sleeping_agent_and_is_part_of_the_configuration(setup: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    import sys
    import time

    script = tmp_path / "sleeper.py"
    script.write_text("import time; time.sleep(3600)\n")
    command = f"{sys.executable} {script}"
    out = tmp_path / "run"
    started = time.monotonic()
    code, _, stderr = _run(setup, out, "--command", command, "--timeout", "2", "--limit", "1")
    assert code == 0, stderr
    assert time.monotonic() - started < 300  # not the hour's sleep, nor the 600 s default
    store = RunStore(out, create=False)
    (ep,) = store.episodes("external")
    assert ep.status == "limit" and "within 2 s" in (ep.error or ""), ep.error
    assert stored_identities(store)["external"].config.settings["timeout"] == 2
    for flags in (("--timeout", "3"), ()):  # another timeout, or the default 600, is another system
        code, _, stderr = _run(setup, out, "--command", command, *flags, "--limit", "2")
        assert code == 2, stderr
        assert "timeout: 2.0 -> " in stderr and "Traceback" not in stderr, stderr
    assert len(RunStore(out, create=False).episodes("external")) == 1  # nothing ran under the other timeout


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_timeout_that_is_not_positive_is_one_line(setup: tuple[Path, Path], tmp_path: Path, value: str) -> None:
    code, _, stderr = _run(setup, tmp_path / "run", "--command", "agent", "--timeout", value)
    assert code == 2
    assert stderr.strip().splitlines() == [f"error: --timeout {float(value)!r} is not valid; give the seconds an "
                                           "episode may take, more than 0"]
