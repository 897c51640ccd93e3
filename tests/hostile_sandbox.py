"""Sandbox probes for the fault suite (issue 22 item 2) and a way to watch a command's memory.

The memory of a sandbox is not all in any process's RSS (a memfd or a tmpfs file belongs to
no process), so a probe's command runs inside a memory cgroup of its own, made here and not by
deskbench, and its peak is the cgroup's (everything the CLI and its sandbox charged). The watch
group is capped (WATCH_CAP) so that a probe run against code without the fix cannot take the
machine down. tests/sandbox/test_hostile_sandbox.py and benchmarks/bench_hostile_sandbox.py share these.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GIB = 1024**3
WATCH_CAP = 6 * GIB

# 3 GB held through memfd_create: twelve memfds of 250 MB (each under the 256 MB file limit)
MEMFD_3GB = """
import os
chunk = b"x" * (50 << 20)
fds = []
for i in range(60):
    if i % 5 == 0:
        fds.append(os.memfd_create(f"m{i}"))
    os.write(fds[-1], chunk)
print("held 3 GB in memfds")
"""

# four forked children of 1.1 GB each (each under a 2 GiB RLIMIT_AS), all alive at once
FORK_4X1100MB = """
import os, time
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        b = bytearray(1100 << 20)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print([os.waitpid(p, 0)[1] for p in kids])
"""

# a fork bomb that swallows its errors, so stderr says nothing
FORK_BOMB = """
import os, time
n = 0
for _ in range(3000):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    except OSError:
        pass
print("forked", n)
"""

# the rlm REPL writing 1 GB to /mnt/result as eight 128 MB files (each under the file limit)
REPL_1GB = """
chunk = b"r" * (1 << 20)
for k in range(8):
    with open(f"/mnt/result/part{k}.bin", "wb") as f:
        for _ in range(128):
            f.write(chunk)
print("wrote 1 GB")
"""

# drives one REPL execution in a child process whose TMPDIR is argv[1]; prints the outcome and
# the bytes in TMPDIR while the REPL is still alive
REPL_DRIVER = """
import asyncio, json, os, sys
from pathlib import Path
from deskbench.sandbox import Limits, Sandbox
from deskbench.tracks.docqa.agents.rlm_repl_host import Repl
from deskbench.tracks.docqa.agents.rlm_settings import RlmSettings

def used(root):
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(root) for f in fs)

async def go():
    ctx = Path(sys.argv[1]) / "context.txt"
    ctx.write_text("ctx")
    os.chmod(sys.argv[1], 0o755)
    ctx.chmod(0o644)
    repl = Repl(Sandbox(Limits(wall_seconds=60)), ctx, RlmSettings())
    try:
        problem = await repl.start()
        assert problem is None, problem
        async def answer(prompts):
            return prompts
        out = await repl.execute(sys.stdin.read(), answer)
        print(json.dumps({"stdout": out.stdout, "stderr": out.stderr, "error": out.error,
                          "lost": out.lost, "tmp_bytes": used(sys.argv[1])}))
    finally:
        repl.close()

asyncio.run(go())
"""


@dataclass
class Watched:
    returncode: int | None   # None: killed at the time bound
    stdout: str
    stderr: str
    seconds: float           # wall time: reported by the benchmark, never a test's verdict
    peak_bytes: int | None   # the watch group's peak memory; None without a memory cgroup
    cpu_seconds: float = 0.0  # user + system CPU of the command and every descendant reaped

    @property
    def peak_mb(self) -> float | None:
        return None if self.peak_bytes is None else round(self.peak_bytes / 1024**2, 1)


def _own_memory_group() -> Path | None:
    """This process's memory cgroup directory (v1 memory hierarchy, or v2 with memory.peak)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return d if (d / "memory.max_usage_in_bytes").exists() else None
    return None


def can_watch() -> bool:
    d = _own_memory_group()
    return d is not None and os.access(d, os.W_OK)


def _rm_tree(d: Path) -> None:
    """Remove a cgroup and the groups under it (deepest first), killing what is left."""
    for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        _rm_group(sub)
    _rm_group(d)


def _rm_group(d: Path) -> None:
    for _ in range(200):
        with contextlib.suppress(OSError):
            for pid in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def run_watched(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 120.0,
                stdin: str | None = None) -> Watched:
    """Run argv in a fresh memory cgroup (capped at WATCH_CAP); time it (wall and the CPU of its
    tree: RUSAGE_CHILDREN around the wait, which counts reaped grandchildren too) and read its
    peak. `timeout` is a hang guard: a loaded machine stretches wall time, not CPU time."""
    parent = _own_memory_group()
    group = parent / f"hostile-watch-{os.getpid()}-{time.monotonic_ns()}" if parent else None
    prefix: list[str] = []
    if group is not None:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(WATCH_CAP))
        prefix = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group)]
    started = time.perf_counter()
    cpu_before = children_cpu()
    proc = subprocess.Popen([*prefix, *argv], env={**os.environ, **(env or {})}, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        code = None
    seconds = time.perf_counter() - started
    cpu = children_cpu() - cpu_before
    peak = None
    if group is not None:
        peak = int((group / "memory.max_usage_in_bytes").read_text())
        _rm_tree(group)
    return Watched(code, out, err, seconds, peak, cpu)


def children_cpu() -> float:
    """User + system CPU seconds of every child this process reaped (with the ones they reaped)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "deskbench.cli", *args]
