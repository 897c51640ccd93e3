"""Running a command or a server in a subprocess with a bound on wall time and on the peak RSS
of every process of its tree (psutil samples every 20 ms): tests/test_hostile_files.py and
benchmarks/bench_hostile_files.py (which also runs the code before the limits, from a tree given
with PYTHONPATH) share it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import psutil

SECONDS = 30.0  # the wall-time bound of every probe
RSS_MB = 1536.0  # the peak RSS bound of any one process of the command


@dataclass
class Bounded:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mb: float  # the largest RSS any process of the tree reached
    peak_tree_mb: float  # the largest sum over the tree
    killed: bool = False  # stopped by the watch (past kill_after or kill_rss_mb)

    def held(self, seconds: float = SECONDS, rss_mb: float = RSS_MB) -> None:
        assert self.seconds < seconds, f"took {self.seconds:.1f} s (bound {seconds} s)"
        assert self.peak_rss_mb < rss_mb, f"peak RSS {self.peak_rss_mb:.0f} MB (bound {rss_mb} MB)"


def kill_tree(root: psutil.Process) -> None:
    try:
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


class TreeWatch:
    """Samples the RSS of a process and all its descendants every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = self.tree = 0.0

    def sample(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        sizes = []
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                sizes.append(p.memory_info().rss / 2**20)
        if sizes:
            self.peak = max(self.peak, max(sizes))
            self.tree = max(self.tree, sum(sizes))


def bounded_cli(*args: str, kill_after: float = 3 * SECONDS, env: dict[str, str] | None = None,
                kill_rss_mb: float = 6144.0) -> Bounded:
    """`deskbench ARGS` in a subprocess, timed and watched; killed (and the test failed by the
    bound) if it runs past `kill_after`."""
    return bounded([sys.executable, "-m", "deskbench.cli", *args], kill_after=kill_after, env=env,
                   kill_rss_mb=kill_rss_mb, stdin=None)


def bounded(argv: list[str], *, kill_after: float = 3 * SECONDS, env: dict[str, str] | None = None,
            kill_rss_mb: float = 6144.0, stdin: int | None = subprocess.DEVNULL,
            preexec_fn: Any = None) -> Bounded:
    """`argv` in a subprocess with `env` added, timed, its tree's RSS sampled every 20 ms; killed
    past `kill_after` s or `kill_rss_mb` (the tree's sum). Its output is read while it runs, so a
    command that writes much cannot stall on a full pipe."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
    watch = TreeWatch(proc.pid)
    out: dict[str, str] = {}
    reader = threading.Thread(target=lambda: out.update(zip(("stdout", "stderr"), proc.communicate())), daemon=True)
    reader.start()
    while proc.poll() is None and time.monotonic() - started < kill_after and watch.tree < kill_rss_mb:
        watch.sample()
        time.sleep(0.02)
    killed = proc.poll() is None
    if killed:
        kill_tree(watch.root)
    reader.join(30)
    return Bounded(proc.returncode, out.get("stdout", ""), out.get("stderr", ""), time.monotonic() - started,
                   watch.peak, watch.tree, killed)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`deskbench serve ARGS` in a subprocess with its RSS watched while requests run."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        from test_web import Client

        self.port = _free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args, "--port", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, **(env or {})})
        self.watch = TreeWatch(self.proc.pid)
        deadline = time.monotonic() + 30
        while True:
            try:
                Client(self.port).request("GET", "/login")
                return
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)

    def get(self, client: Any, path: str, kill_after: float = 3 * SECONDS) -> tuple[int, str, float]:
        """(status, body, seconds) of one request, sampling the server's RSS meanwhile; status 0
        when it did not answer within `kill_after` (the server is then killed)."""
        done: list[tuple[int, str]] = []
        started = time.monotonic()
        thread = threading.Thread(target=lambda: done.append(_status_body(client, path)), daemon=True)
        thread.start()
        while thread.is_alive() and time.monotonic() - started < kill_after and self.watch.tree < 6144:
            self.watch.sample()
            time.sleep(0.02)
        if not done:
            kill_tree(self.watch.root)
            return 0, "", time.monotonic() - started
        return done[0][0], done[0][1], time.monotonic() - started

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            kill_tree(self.watch.root)


def _status_body(client: Any, path: str) -> tuple[int, str]:
    try:
        status, _, body = client.request("GET", path)
    except OSError as exc:  # the server died answering
        return -1, str(exc)
    return status, body


