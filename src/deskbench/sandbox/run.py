"""`Sandbox`: one call = one fresh jail; the host side of the supervisor protocol."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from deskbench.errors import UserError
from deskbench.sandbox.bwrap import (
    BOOT,
    PythonLayout,
    bwrap_argv,
    input_binds,
    mpl_font_cache,
    python_layout,
    readable_binds,
    sandbox_env,
)
from deskbench.sandbox.cgroups import GroupUsage, Mode, SandboxGroup, detect
from deskbench.sandbox.collect import Capped, Collector
from deskbench.sandbox.limits import Limits
from deskbench.sandbox.result import LIMIT_NAMES, ExecResult
from deskbench.sandbox.stale import sweep_tempdirs, tagged_prefix, tagged_tempdir

DATA, RESULT, TMP = "/mnt/data", "/mnt/result", "/tmp"
PY_FLAGS = ("-E", "-s", "-B")
GRACE_SECONDS = 10.0         # host backstop past the jail's own wall timer (covers collection)
UNSAFE_WARNING = ("warning: --unsafe-local: the code runs WITHOUT isolation (no bubblewrap); "
                  "rlimits only, best-effort /mnt paths")


class SandboxUnavailable(UserError):
    """bubblewrap is missing (or cannot create namespaces here) and unsafe_local is not set."""


@functools.cache
def _probe_bwrap(bwrap: str) -> None:
    """bwrap exists but may be unable to create namespaces (some containers): say so once."""
    probe = subprocess.run(
        [bwrap, "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/",
         "--dev", "/dev", "--proc", "/proc", "true"],
        capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        raise SandboxUnavailable(
            f"bubblewrap cannot create a sandbox here ({probe.stderr.strip()[-200:]}); allow user "
            "namespaces or run as root, or pass --unsafe-local to run code without isolation")


def _fresh_uid() -> int:
    """A uid no other process uses, so RLIMIT_NPROC counts this sandbox only."""
    return 1_000_000 + random.SystemRandom().randrange(1_000_000)


_PATTERNS = {
    "memory": re.compile(r"MemoryError|Cannot allocate memory|bad_alloc|out of memory", re.I),
    "processes": re.compile(r"Resource temporarily unavailable|can't start new thread|"
                            r"can't create new thread"),
    "open_files": re.compile(r"Too many open files"),
    "file_size": re.compile(r"File too large"),
}


def _limit_hits(limits: Limits, status: dict[str, Any] | None, backstop: bool, stderr: str,
                out: Capped, err: Capped, col: Collector, usage: GroupUsage | None) -> list[str]:
    hits: set[str] = set()
    if usage is not None and usage.oom_kills:
        hits.add("memory")
    if usage is not None and usage.pids_refused:
        hits.add("processes")
    sig = status.get("signal") if status else None
    if backstop or (status and status.get("wall_time")):
        hits.add("wall_time")
    cpu = float(status.get("cpu", 0.0)) if status else 0.0
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and "wall_time" not in hits
                                 and cpu >= limits.cpu_seconds - 0.5):
        hits.add("cpu_time")
    if sig == signal.SIGXFSZ:
        hits.add("file_size")
    for name, pattern in _PATTERNS.items():
        if pattern.search(stderr):
            hits.add(name)
    if out.total > limits.output_bytes:
        hits.add("stdout")
    if err.total > limits.output_bytes:
        hits.add("stderr")
    if (status and status.get("result_full")) or any("bytes total limit" in r for _, r in col.skipped):
        hits.add("result_size")
    if any("files" in r and "over the limit" in r for _, r in col.skipped):
        hits.add("result_files")
    return [h for h in LIMIT_NAMES if h in hits]


@dataclass
class _Spawned:
    """What a spawned process holds on the host until `kill`: its group and temp folders."""

    group: SandboxGroup | None
    dirs: list[Path]


class Sandbox:
    """Runs model-written Python statelessly: every `run` is a fresh jail (bubblewrap) with
    rlimits, no network, read-only inputs at /mnt/data and a fresh /mnt/result whose regular
    files are collected afterwards. cwd inside is /mnt/result, so relative paths land there.
    Where cgroups are writable every jail also gets its own cgroup capping the memory and
    process count of the whole sandbox (`mode`); `cgroups=False` (or DESKBENCH_SANDBOX_CGROUPS=off)
    keeps the rlimits alone."""

    def __init__(self, limits: Limits = Limits(), *, unsafe_local: bool = False,  # noqa: B008
                 python: str | None = None, cgroups: bool = True) -> None:
        self.limits = limits
        self.unsafe_local = unsafe_local
        self.layout: PythonLayout = python_layout(python)
        self.bwrap = shutil.which("bwrap")
        if not unsafe_local:
            if self.bwrap is None:
                raise SandboxUnavailable(
                    "bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: apt-get "
                    "install bubblewrap) or pass --unsafe-local to run code without isolation")
            _probe_bwrap(self.bwrap)
        else:
            print(UNSAFE_WARNING, file=sys.stderr)
        self.as_root = os.geteuid() == 0
        self.mode: Mode = detect() if cgroups else Mode(None, "cgroups turned off by the caller")
        sweep_tempdirs()      # what killed deskbench processes left behind
        self.mode.sweep()
        self._spawned: dict[subprocess.Popen[bytes], _Spawned] = {}
        self._lock = threading.Lock()

    # -- the command lines -------------------------------------------------------------------

    def _boot_cfg(self, grouped: bool, **extra: Any) -> dict[str, Any]:
        """In a cgroup, pids.max counts the sandbox's processes and threads: no RLIMIT_NPROC.
        RLIMIT_AS stays either way (one huge allocation fails cleanly with MemoryError)."""
        lim = self.limits
        return {
            "rl": {"cpu": lim.cpu_seconds, "as": lim.memory_bytes,
                   "nproc": None if grouped else lim.processes,
                   "nofile": lim.open_files, "fsize": lim.file_bytes},
            "max_files": lim.result_files, "max_bytes": lim.result_bytes, **extra,
        }

    def _jail(self, binds: list[tuple[str, str]], result: tuple[str, int] | str,
              cfg: dict[str, Any], staging: Path) -> list[str]:
        assert self.bwrap is not None
        mpl = mpl_font_cache(self.layout)
        jail_binds: list[tuple[str | None, str]] = [(str(BOOT), "/sandbox/boot.py")]
        jail_binds += readable_binds(binds, staging) if self.as_root else binds
        if mpl:
            jail_binds.append((mpl, "/sandbox/mpl"))
            cfg["mpl_cache"] = "/sandbox/mpl"
        if self.as_root:
            cfg["uid"] = _fresh_uid()
            cfg["chown"] = [TMP, RESULT]
        argv = bwrap_argv(self.bwrap, self.layout, binds=jail_binds, tmp_bytes=self.limits.tmp_bytes,
                          result=result, as_root=self.as_root)
        return [*argv, self.layout.executable, *PY_FLAGS, "/sandbox/boot.py", json.dumps(cfg)]

    def _new_group(self, notes: list[str]) -> SandboxGroup | None:
        """This call's cgroup; None in rlimit mode or when it cannot be made (then said)."""
        try:
            return self.mode.new_group(self.limits)
        except OSError as e:
            notes.append(f"no cgroup for this sandbox ({e.strerror}): memory and processes "
                         "were limited per process only")
            return None

    # -- execute_code ------------------------------------------------------------------------

    def run(self, code: str, *, inputs: Sequence[Path] = (), collect_to: Path | None = None) -> ExecResult:
        """Run `code` in a fresh jail and collect /mnt/result into `collect_to` (created; a temp
        dir owned by the result when None). Blocks; never raises for anything the code does."""
        started = time.perf_counter()
        paths = [Path(p) for p in inputs]
        for p in paths:
            if not p.exists():
                raise UserError(f"sandbox input {p} does not exist")
        owned = None
        if collect_to is None:
            owned = tempfile.TemporaryDirectory(prefix=tagged_prefix("result"))
            dest = Path(owned.name)
        else:
            dest = Path(collect_to)
            dest.mkdir(parents=True, exist_ok=True)
        notes: list[str] = []
        group = self._new_group(notes)
        try:
            with tempfile.TemporaryDirectory(prefix=tagged_prefix("call")) as work:
                r_fd, w_fd = os.pipe()
                try:
                    argv, env = self._run_argv(code, paths, Path(work), w_fd, group is not None)
                    proc = subprocess.Popen(group.launch(argv) if group else argv,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, pass_fds=(w_fd,),
                                            start_new_session=True, env=env)
                except BaseException:
                    os.close(r_fd)
                    raise
                finally:
                    os.close(w_fd)
                result = self._supervise(proc, os.fdopen(r_fd, "rb"), dest, group)
        finally:
            if group is not None:
                group.finish()
        result.seconds = time.perf_counter() - started
        result._owned_dir = owned
        result.notes[:0] = notes
        if self.unsafe_local:
            result.notes.insert(0, "unsafe-local mode: the code ran without isolation")
        return result

    def _run_argv(self, code: str, inputs: list[Path], work: Path, status_fd: int, grouped: bool
                  ) -> tuple[list[str], dict[str, str]]:
        code_file = work / "code.py"
        if not self.unsafe_local:
            code_file.write_text(code, encoding="utf-8")
            os.chmod(code_file, 0o644)
            cfg = self._boot_cfg(grouped, code="/sandbox/code.py", result=RESULT, cwd=RESULT,
                                 jail=True, wall=self.limits.wall_seconds, status_fd=status_fd)
            binds = [(str(code_file), "/sandbox/code.py"), *input_binds(inputs)]
            argv = self._jail(binds, (RESULT, self.limits.result_bytes), cfg, work / "staged")
            return argv, sandbox_env(self.layout, data=DATA, result=RESULT, tmp=TMP)
        # unsafe local: host dirs stand in for the mounts, the literal paths are substituted
        data, result, tmp = work / "data", work / "result", work / "tmp"
        for d in (result, tmp):
            d.mkdir()
        binds = input_binds(inputs)
        if len(binds) == 1 and binds[0][1] == DATA:
            data = Path(binds[0][0])
        else:
            data.mkdir()
            for host, jail in binds:
                (data / PurePosixPath(jail).name).symlink_to(host)
        code = code.replace(DATA, str(data)).replace(RESULT, str(result))
        code_file.write_text(code, encoding="utf-8")
        cfg = self._boot_cfg(grouped, code=str(code_file), result=str(result), cwd=str(result),
                             jail=False, wall=self.limits.wall_seconds, status_fd=status_fd,
                             mpl_cache=mpl_font_cache(self.layout))
        env = sandbox_env(self.layout, data=str(data), result=str(result), tmp=str(tmp))
        return [self.layout.executable, *PY_FLAGS, str(BOOT), json.dumps(cfg)], env

    def _supervise(self, proc: subprocess.Popen[bytes], status: IO[bytes], dest: Path,
                   group: SandboxGroup | None) -> ExecResult:
        assert proc.stdout is not None and proc.stderr is not None
        lim = self.limits
        out, err = Capped(proc.stdout, lim.output_bytes), Capped(proc.stderr, lim.output_bytes)
        out.start()
        err.start()
        backstop = threading.Event()

        def fire() -> None:
            backstop.set()
            self._end(proc, group)

        timer = threading.Timer(lim.wall_seconds + GRACE_SECONDS, fire)
        timer.daemon = True
        timer.start()
        col = Collector(dest, lim)
        try:
            with status:
                col.read(status)
        finally:
            if not col.ended:  # the supervisor died or lied: make sure nothing is left running
                self._end(proc, group)
            proc.wait()
            timer.cancel()
            usage = group.finish() if group is not None else None
            out.join()
            err.join()
        stderr = err.text()
        st = col.status
        notes = []
        if st is None:
            notes.append("the sandbox ended without reporting an exit status"
                         + ("" if backstop.is_set() else f" (sandbox exit code {proc.returncode})"))
        elif not col.ended:
            notes.append("the sandbox stopped before all files in /mnt/result were collected")
        exit_code = st.get("exit_code") if st else None
        sig = st.get("signal") if st else (signal.SIGKILL if backstop.is_set() else None)
        if st is None and not backstop.is_set() and proc.returncode is not None:
            exit_code = proc.returncode if proc.returncode >= 0 else None
            sig = -proc.returncode if proc.returncode < 0 else None
        hits = _limit_hits(lim, st, backstop.is_set(), stderr, out, err, col, usage)
        return ExecResult(stdout=out.text(), stderr=stderr, exit_code=exit_code, signal=sig,
                          limit_hits=hits, files=col.files, skipped=col.skipped, seconds=0.0,
                          limits=lim, notes=notes, enforcement=group.hierarchy.version if group else "rlimit",
                          oom_killed=bool(usage and usage.oom_kills),
                          memory_peak_bytes=usage.memory_peak if usage else None)

    def _end(self, proc: subprocess.Popen[bytes], group: SandboxGroup | None) -> None:
        """Kill the process group, then whatever is left in the cgroup."""
        self.kill(proc)
        if group is not None:
            group.finish()

    async def arun(self, code: str, *, inputs: Sequence[Path] = (), collect_to: Path | None = None) -> ExecResult:
        """`run` in a worker thread: the event loop keeps going. A cancelled await still lets
        the call finish (it is bounded by the wall-time limit)."""
        return await asyncio.to_thread(self.run, code, inputs=inputs, collect_to=collect_to)

    # -- long-lived processes ----------------------------------------------------------------

    def spawn(self, argv: list[str], *, inputs: Sequence[Path] = (), result_dir: Path | None = None,
              extra_binds: Sequence[tuple[Path, str]] = ()) -> subprocess.Popen[bytes]:
        """A long-lived process in the same jail (pipes on stdin/stdout/stderr, the same
        limits and cgroup caps, its own process group); the caller enforces wall time and calls
        `kill`, which also removes its cgroup and temp folders. /mnt/result is a fresh tmpfs of
        `limits.result_bytes` (nothing of it reaches the host) unless `result_dir`, a host dir
        bound writable there without a cap, is given; as root its owner becomes the jail's uid.
        argv[0] == "python" means the sandbox interpreter."""
        if not argv:
            raise ValueError("spawn needs a command")
        argv = [self.layout.executable if argv[0] == "python" else argv[0], *argv[1:]]
        paths = [Path(p) for p in inputs]
        for p in paths:
            if not p.exists():
                raise UserError(f"sandbox input {p} does not exist")
        held = _Spawned(group=None, dirs=[])
        try:
            held.group = self._new_group([])
            grouped = held.group is not None
            if result_dir is not None:
                result_dir = Path(result_dir)
                result_dir.mkdir(parents=True, exist_ok=True)
            if self.unsafe_local:
                if result_dir is None:
                    result_dir = tagged_tempdir("result")
                    held.dirs.append(result_dir)
                cfg = self._boot_cfg(grouped, argv=argv, cwd=str(result_dir), jail=False)
                cmd = [self.layout.executable, *PY_FLAGS, str(BOOT), json.dumps(cfg)]
                data = str(paths[0]) if len(paths) == 1 and paths[0].is_dir() else ""
                env = sandbox_env(self.layout, data=data, result=str(result_dir),
                                  tmp=tempfile.gettempdir())
            else:
                cfg = self._boot_cfg(grouped, argv=argv, cwd=RESULT, jail=True)
                binds = [*input_binds(paths), *((str(Path(h).resolve()), j) for h, j in extra_binds)]
                staging = tagged_tempdir("spawn")
                held.dirs.append(staging)
                result: tuple[str, int] | str = (str(result_dir.resolve()) if result_dir is not None
                                                 else (RESULT, self.limits.result_bytes))
                cmd = self._jail(binds, result, cfg, staging)
                env = sandbox_env(self.layout, data=DATA, result=RESULT, tmp=TMP)
            proc = subprocess.Popen(held.group.launch(cmd) if held.group else cmd,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, env=env)
        except BaseException:
            _release(held)
            raise
        with self._lock:
            self._spawned[proc] = held
        return proc

    def usage(self, proc: subprocess.Popen[bytes]) -> GroupUsage | None:
        """What a spawned process's cgroup counted so far (None without one)."""
        with self._lock:
            held = self._spawned.get(proc)
        return held.group.peek() if held is not None and held.group is not None else None

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """Kill the whole process group; with bwrap --die-with-parent the pid namespace (and
        every process in it) goes with it. A spawned process's cgroup and temp folders go too."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        with self._lock:
            held = self._spawned.pop(proc, None)
        if held is not None:
            _release(held)

    def close(self) -> None:
        """Release what spawned processes still hold (their cgroups are killed with them)."""
        with self._lock:
            held, self._spawned = list(self._spawned.values()), {}
        for h in held:
            _release(h)


def _release(held: _Spawned) -> None:
    if held.group is not None:
        held.group.finish()
    for d in held.dirs:
        shutil.rmtree(d, ignore_errors=True)
