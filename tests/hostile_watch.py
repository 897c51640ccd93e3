"""Running a command or a server in a subprocess with a bound on the CPU time of its process tree
and on the peak RSS of every process of the tree (each process's own high-water mark, VmHWM, read
every 100 ms: a peak between two samples is not missed; wait4's ru_maxrss is not used, as a child
started by fork or vfork inherits the test process's high-water mark). The verdict never
depends on wall time (issue 34: under xdist on a loaded 2-core machine a 20 s probe took 40 s of
wall time): wall time is only a hang guard (`kill_after`, 300 s) that fails with its own message,
and is still reported for the benchmarks. tests/runs/test_hostile_files.py and
benchmarks/bench_hostile_files.py (which also runs the code before the limits, from a tree given
with PYTHONPATH) share it."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import psutil

SECONDS = 30.0  # the CPU-time bound of every probe (its whole process tree, user + system)
RSS_MB = 1536.0  # the peak RSS bound of any one process of the command
HANG_SECONDS = 300.0  # the wall-time hang guard: only a process that never ends is stopped by it
# Between two samples of the tree: a sample lists every process of the machine (psutil's children()
# reads each one's /proc stat), 3-10 ms of CPU; every 20 ms it took a quarter of a core or more from
# the other tests while a command ran. The peaks come from the kernel's high-water marks, so a
# longer interval loses none; the tree's sum (the kill bound) is sampled.
INTERVAL = 0.1


@dataclass
class Bounded:
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # wall time: reported by the benchmarks, never a test's verdict
    peak_rss_mb: float  # the largest RSS any process of the tree reached
    peak_tree_mb: float  # the largest sum over the tree
    killed: bool = False  # stopped by the watch (past kill_after or kill_rss_mb)
    cpu_seconds: float = 0.0  # user + system CPU of the command and every descendant it reaped
    why: str = ""  # why the watch stopped it, when it did

    def held(self, seconds: float = SECONDS, rss_mb: float = RSS_MB) -> None:
        """The command ended by itself within `seconds` of CPU time (of its tree) and `rss_mb`
        of peak RSS; a loaded machine makes it slower, not costlier, so the verdict stays."""
        assert not self.killed, f"stopped by the watch: {self.why} (it never ended by itself)"
        assert self.cpu_seconds < seconds, (f"used {self.cpu_seconds:.1f} s of CPU (bound {seconds} s; "
                                            f"{self.seconds:.1f} s wall)")
        assert self.peak_rss_mb < rss_mb, f"peak RSS {self.peak_rss_mb:.0f} MB (bound {rss_mb} MB)"


def kill_tree(root: psutil.Process) -> None:
    try:
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


def _hwm_mb(p: psutil.Process) -> float:
    """The process's peak RSS so far (VmHWM of /proc/PID/status), its current RSS where that is
    not readable."""
    try:
        with open(f"/proc/{p.pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float(p.memory_info().rss) / 2**20


class TreeWatch:
    """Samples a process and all its descendants: each one's peak RSS (its high-water mark) and the
    sum of their current RSS."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = self.tree = 0.0

    def sample(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        sizes, peaks = [], []
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                sizes.append(p.memory_info().rss / 2**20)
                peaks.append(_hwm_mb(p))
        if sizes:
            self.peak = max(self.peak, max(peaks))
            self.tree = max(self.tree, sum(sizes))

    def cpu(self) -> float:
        """User + system CPU seconds of the live tree, each process with the children it reaped:
        a reaped process counts once (in its parent), a live one once (itself)."""
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0
        total = 0.0
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        return total


def bounded_cli(*args: str, kill_after: float = HANG_SECONDS, env: dict[str, str] | None = None,
                kill_rss_mb: float = 6144.0) -> Bounded:
    """`deskbench ARGS` in a subprocess, watched; killed (and the test failed by the hang guard)
    if it runs past `kill_after` s of wall time."""
    return bounded([sys.executable, "-m", "deskbench.cli", *args], kill_after=kill_after, env=env,
                   kill_rss_mb=kill_rss_mb, stdin=None)


def bounded(argv: list[str], *, kill_after: float = HANG_SECONDS, env: dict[str, str] | None = None,
            kill_rss_mb: float = 6144.0, stdin: int | None = subprocess.DEVNULL,
            preexec_fn: Any = None) -> Bounded:
    """`argv` in a subprocess with `env` added, its tree's RSS sampled every INTERVAL s; killed past
    `kill_after` s or `kill_rss_mb` (the tree's sum). Its output is read while it runs, so a
    command that writes much cannot stall on a full pipe. The CPU time is the child's rusage from
    wait4, which includes every descendant it (or they) reaped."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
    watch = TreeWatch(proc.pid)
    ended_fd = _exit_fd(proc.pid)
    out: dict[str, str] = {}
    readers = [threading.Thread(target=lambda n=name, f=stream: out.__setitem__(n, f.read()), daemon=True)
               for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for r in readers:
        r.start()
    why = ""
    while not (ended := _reap(proc, os.WNOHANG)):
        if time.monotonic() - started >= kill_after:
            why = f"still running after {kill_after:.0f} s of wall time (the hang guard)"
        elif watch.tree >= kill_rss_mb:
            why = f"its tree reached {watch.tree:,.0f} MB (the kill bound {kill_rss_mb:,.0f} MB)"
        if why:
            kill_tree(watch.root)
            ended = _reap(proc, 0)
            break
        watch.sample()
        _wait_exit(ended_fd, INTERVAL)
    if ended_fd is not None:
        os.close(ended_fd)
    for r in readers:
        r.join(30)
    return Bounded(proc.returncode, out.get("stdout", ""), out.get("stderr", ""), time.monotonic() - started,
                   watch.peak, watch.tree, bool(why), ended[0] if ended else 0.0, why)


def _exit_fd(pid: int) -> int | None:
    """A pidfd of `pid` (readable when it exits, without reaping it), None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_exit(fd: int | None, seconds: float) -> None:
    """Until the process ends or `seconds` pass: its end is seen at once, not at the next tick."""
    if fd is None:
        time.sleep(seconds)
    else:
        select.select([fd], [], [], seconds)


def _reap(proc: subprocess.Popen[str], flags: int) -> tuple[float] | None:
    """(CPU seconds,) of `proc` and its reaped descendants once it has ended (then reaped, its
    returncode set), None while it runs. os.wait4 rather than Popen.poll, which drops the rusage."""
    pid, status, usage = os.wait4(proc.pid, flags)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (usage.ru_utime + usage.ru_stime,)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`deskbench serve ARGS` in a subprocess with its RSS watched while requests run; `cpu_seconds`
    is the CPU time the server's tree spent on the last request (the tests' bound, not wall time)."""

    cpu_seconds = 0.0

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        from tests.web.test_web import Client

        self.port = _free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args, "--port", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, **(env or {})})
        self.watch = TreeWatch(self.proc.pid)
        deadline = time.monotonic() + HANG_SECONDS  # a hang guard: a loaded machine starts it late
        while True:
            try:
                Client(self.port).request("GET", "/login")
                return
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)

    def get(self, client: Any, path: str, kill_after: float = HANG_SECONDS) -> tuple[int, str, float]:
        """(status, body, wall seconds) of one request, sampling the server's RSS meanwhile and
        setting `cpu_seconds`; status 0 when it did not answer within `kill_after` (the server is
        then killed)."""
        done: list[tuple[int, str]] = []
        cpu = self.watch.cpu()
        started = time.monotonic()
        thread = threading.Thread(target=lambda: done.append(_status_body(client, path)), daemon=True)
        thread.start()
        while thread.is_alive() and time.monotonic() - started < kill_after and self.watch.tree < 6144:
            self.watch.sample()
            thread.join(INTERVAL)  # the answer is seen at once, not at the next tick
        self.cpu_seconds = self.watch.cpu() - cpu
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


