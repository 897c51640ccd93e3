"""Issue 34, item 4: the test command is fast and the same everywhere.

pytest-xdist with --durations in scripts/test.sh; markers set by the fixtures that need the thing;
one llama.cpp server per session that `--model local` reuses; CLI calls in-process that answer as
a fresh interpreter would; the new test tools pinned.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO, needs, run_cli, run_cli_process
from fake_openai import FakeOpenAI

from deskbench.models.local_llama import URL_ENV, LocalChat
from deskbench.models.types import ChatRequest, Message

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_local_chat_talks_to_the_server_named_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's server is used as it is: no llama.cpp process is started or stopped."""
    with FakeOpenAI(script=lambda body, n: {"kind": "text", "text": "hello from the session's server"}) as fake:
        monkeypatch.setenv(URL_ENV, fake.base_url)
        chat = LocalChat()

        async def go() -> str:
            try:
                reply = await chat.complete(ChatRequest(messages=[Message(role="user", content="Say hello.")],
                                                        max_tokens=8))
                return reply.message.text()
            finally:
                await chat.aclose()

        assert asyncio.run(go()) == "hello from the session's server"
        assert chat._server is None and len(fake.requests) == 1


@pytest.fixture
@needs("sandbox")
def needs_a_sandbox() -> str:
    return "a fixture that declares the sandbox marker"


@pytest.fixture
def through_another(needs_a_sandbox: str) -> str:
    return needs_a_sandbox


def test_a_fixture_marks_the_tests_that_use_it(through_another: str, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("sandbox") is not None
    assert request.node.get_closest_marker("slow") is None


def test_the_markers_are_registered_and_strict() -> None:
    options = PYPROJECT["tool"]["pytest"]["ini_options"]
    names = {line.split(":")[0] for line in options["markers"]}
    assert names == {"model", "browser", "ray", "sandbox", "slow"}
    assert "--strict-markers" in options["addopts"].split()


def test_the_test_command_runs_in_parallel_and_shows_durations() -> None:
    script = (REPO / "scripts" / "test.sh").read_text()
    line = next(x for x in script.splitlines() if x.startswith(".venv/bin/python -m pytest "))
    words = shlex.split(line.split("||")[0])
    assert words[words.index("-n") + 1] == "$workers"
    assert 'workers="${DESKBENCH_TEST_WORKERS:-' in script and "sched_getaffinity" in script  # the CPUs it may use
    assert words[words.index("--dist") + 1] == "loadfile"  # a file's module fixtures built once
    assert "--no-loadscope-reorder" in words  # the files in conftest's order (longest_files_first)
    assert "--durations=25" in words
    assert "len(os.sched_getaffinity(0)) + 1" in script  # a worker more than CPUs: tests wait on processes
    assert "\nunset PYTHONDONTWRITEBYTECODE\n" in script  # cached bytecode for every interpreter the suite starts


class _Item:
    """What longest_files_first reads of a pytest item."""

    def __init__(self, nodeid: str, *marks: str) -> None:
        self.nodeid, self.marks = nodeid, marks

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_the_files_that_start_ray_go_first_then_the_files_with_most_tests() -> None:
    from conftest import longest_files_first

    items = [_Item("tests/a.py::t1"), _Item("tests/a.py::t2"),
             _Item("tests/b.py::t1"), _Item("tests/b.py::t2"), _Item("tests/b.py::t3"),
             _Item("tests/ray_one.py::t1", "ray"), _Item("tests/ray_one.py::t2"),
             _Item("tests/c.py::t1"),
             _Item("tests/ray_two.py::t1", "ray", "slow"), _Item("tests/ray_two.py::t2", "ray"),
             _Item("tests/d.py::t1"), _Item("tests/d.py::t2")]
    got = [i.nodeid for i in longest_files_first(items)]  # type: ignore[arg-type]
    assert got == ["tests/ray_two.py::t1", "tests/ray_two.py::t2", "tests/ray_one.py::t1", "tests/ray_one.py::t2",
                   "tests/b.py::t1", "tests/b.py::t2", "tests/b.py::t3",
                   "tests/a.py::t1", "tests/a.py::t2", "tests/d.py::t1", "tests/d.py::t2", "tests/c.py::t1"]


def test_the_test_command_runs_the_guard_rails_and_fails_on_any() -> None:
    """ruff and mypy --strict run before pytest; a finding in either fails the command even when
    pytest passes, and pytest's own exit code (5: no tests) is the command's when it fails."""
    script = (REPO / "scripts" / "test.sh").read_text()
    lines = [x.strip() for x in script.splitlines()]
    assert ".venv/bin/ruff check --no-cache src tests || status=1" in lines
    assert ".venv/bin/mypy src/deskbench || status=1" in lines
    assert any(x.startswith(".venv/bin/python -m pytest ") and x.endswith("|| status=$?") for x in lines)
    assert lines[-1] == 'exit "$status"'
    assert PYPROJECT["tool"]["mypy"]["strict"] is True


def test_the_new_tools_are_in_the_test_extra() -> None:
    extra = {r.split(">")[0].split("=")[0] for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    assert {"pytest-xdist", "mypy", "ruff"} <= extra


def test_the_response_cache_is_the_sessions_own() -> None:
    cache = Path(os.environ["DESKBENCH_CACHE_DIR"])
    assert not cache.is_relative_to(Path.home() / ".cache")


@pytest.mark.parametrize("args", [("score", "/nonexistent-run"), ("run", "--help"), ("no-such-command",)])
def test_a_cli_call_in_process_answers_as_a_fresh_interpreter(args: tuple[str, ...], tmp_path: Path) -> None:
    inside, outside = run_cli(*args, cwd=tmp_path), run_cli_process(*args, cwd=tmp_path)
    assert (inside.returncode, inside.stdout, inside.stderr) == (outside.returncode, outside.stdout, outside.stderr)


def test_a_cli_call_in_process_leaves_the_process_as_it_found_it(tmp_path: Path) -> None:
    """The module a command imported from its working folder (as `python -m` finds it there) is
    forgotten after it: the next test's folder may hold another file of the same name."""
    (tmp_path / "local_agent_module.py").write_text("X = 1\n")
    (tmp_path / "t.jsonl").write_text('{"id": "a", "question": "q?", "answer_variants": [["x"]], "evidence": []}\n')
    before = (os.getcwd(), dict(os.environ), list(sys.path))
    proc = run_cli("run", "--agent", "local_agent_module:X", "--tasks", "t.jsonl", "--out", "run",
                   cwd=tmp_path, env={"DESKBENCH_SOMETHING": "1"})
    assert proc.returncode == 2 and "'local_agent_module:X'" in proc.stderr and "is not a class" in proc.stderr
    assert (os.getcwd(), dict(os.environ), list(sys.path)) == before
    assert "local_agent_module" not in sys.modules


def _bench_test_suite():  # noqa: ANN202 -> the benchmarks/bench_test_suite module
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_test_suite", REPO / "benchmarks" / "bench_test_suite.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_suite_timing_is_read_from_the_commands_own_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench_test_suite()
    result = tmp_path / "test_suite.json"
    monkeypatch.setattr(bench, "RESULT", result)
    log = tmp_path / "run1.log"
    log.write_text("ruff check src tests\nAll checks passed!\nmypy src/deskbench (strict)\n"
                   "Success: no issues found in 3 source files\n....\n"
                   "=== slowest 25 durations ===\n30.22s call     tests/cli/test_demo.py::test_demo\n"
                   "2.10s setup    tests/web/test_web.py::test_x\n"
                   "1863 passed, 5 skipped, 64 warnings in 757.47s (0:12:37)\n")
    slower = tmp_path / "run2.log"
    slower.write_text(log.read_text().replace("757.47s", "801.00s"))
    assert bench.main([str(log), str(slower), "--commit", "abc"]) == 0
    written = json.loads(result.read_text())
    first = written["runs"][0]
    assert (first["passed"], first["skipped"], first["failed"], first["pytest_seconds"]) == (1863, 5, 0, 757.47)
    assert first["slowest"][0] == {"seconds": 30.22, "phase": "call", "test": "tests/cli/test_demo.py::test_demo"}
    assert first["guard_rails"] == {"ruff": True, "mypy_strict": True}
    assert written["pytest_seconds"] == 801.0 and written["ratio_vs_anchor"] == round(2520 / 801.0, 2)
    assert written["all_green"] and written["same_tests_each_run"] and not written["target_met"]
    # a log that never reached pytest: one line, exit 2, the result left as it was
    before = result.read_text()
    (tmp_path / "setup_only.log").write_text("setup: building llama-cpp-python\n")
    assert bench.main([str(tmp_path / "setup_only.log"), "--commit", "abc"]) == 2
    assert bench.main([str(tmp_path / "missing.log"), "--commit", "abc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no pytest summary line" in err[0] and "is not a file" in err[1]
    assert result.read_text() == before


def test_a_ctrl_c_left_unanswered_fails_with_the_stacks_and_signal_masks() -> None:
    """conftest.ctrl_c: a process that ignores SIGINT is not waited on forever: the test fails
    saying its signal masks and where its threads were (faulthandler's dump on SIGABRT)."""
    import re
    import subprocess

    from conftest import ctrl_c

    ignoring = subprocess.Popen(
        [sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
         "print('ready', flush=True)\ndef waiting_here():\n    time.sleep(300)\nwaiting_here()"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert ignoring.stdout is not None and ignoring.stdout.readline() == "ready\n"
    with pytest.raises(AssertionError) as failed:
        ctrl_c(ignoring, timeout=1)
    message = str(failed.value)
    assert message.startswith("still running 1 s after Ctrl-C (State: ")
    ignored = int(re.search(r"SigIgn: ([0-9a-f]+)", message).group(1), 16)  # type: ignore[union-attr]
    assert ignored & (1 << (2 - 1))  # SIGINT (2) is in the ignored mask
    assert "waiting_here" in message  # the stack faulthandler dumped
    assert ignoring.poll() is not None
