"""Run a parse of an untrusted file in a worker process under a memory and a time limit.

Why a process: openpyxl, python-docx and pdfium allocate without bound on a hostile file (a zip
bomb, a content-stream bomb) and cannot be interrupted from a thread; only a process can be
capped (RLIMIT_AS) and killed. Why two levels: the worker is forked from a forkserver (safe in a
threaded web server, and cheap because the readers are preloaded in it), and forks the parse
once more, so it can wait for it with `wait4` and read how it ended and its peak RSS. That tells
"ran out of memory" (MemoryError, or a C library aborting near the cap) from "took too long"
(killed at the deadline: the time limit, counted from the parse's last `progress()`) from
"crashed", which a pool cannot.

`run_limited(fn, *args)` returns fn's result or a `LimitExceeded` verdict; fn's own exceptions
(a corrupt file, a cheap check's FileLimitError) are re-raised in the caller. Called inside a
worker it runs fn in place under the worker's limits.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import resource
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import deskbench.untrusted.limits as _limits
from deskbench.errors import UserError
from deskbench.untrusted.limits import MB, FileLimitError, FileLimits, LimitExceeded, current_limits

T = TypeVar("T")

PRELOAD = ["deskbench.untrusted.worker", "deskbench.corpus.office", "deskbench.corpus.extract",
           "deskbench.tracks.deliverables.scoring.office"]
"""Imported once in the forkserver so each worker starts with the readers loaded (~10 ms a file,
not ~0.5 s)."""

ABORT_SHARE = 0.5
"""A parse killed by a signal after its RSS reached this share of the memory limit ran out of
memory inside a C library (pdfium and libxml2 abort on a failed allocation)."""

_in_worker = False
_heartbeat_fd: int | None = None
_ctx_lock = threading.Lock()
_ctx: Any = None


class ReaderCrashed(UserError):
    """The parse died without a limit to blame (a segfault in a reader): the file is bad.
    `how` says how it ended ("signal SIGSEGV")."""

    def __init__(self, how: str) -> None:
        super().__init__(f"the file crashed its reader ({how}); re-save it with the application that made it")
        self.how = how

    def __reduce__(self) -> tuple[type[ReaderCrashed], tuple[str]]:
        return (type(self), (self.how,))


@dataclass(frozen=True)
class RunStats:
    """How a limited parse went: wall seconds and the parse's peak RSS in MB."""

    seconds: float
    peak_rss_mb: float


last_stats: RunStats | None = None
"""The most recent run's figures in this process (the benchmarks read them)."""


def in_worker() -> bool:
    return _in_worker


def progress() -> None:
    """Tell the worker the parse is moving (ingest: after each page): the time limit counts from
    the last progress, so a 300-page PDF that OCRs a page in 2 s is not stopped at 60 s while one
    page that hangs is. Outside a worker it does nothing."""
    if _heartbeat_fd is not None:
        with contextlib.suppress(OSError):  # a full pipe: the worker has not read the last ones yet
            os.write(_heartbeat_fd, b".")


def _context() -> Any:
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            _ctx = ctx
        return _ctx


def run_limited(fn: Callable[..., T], *args: Any, limits: FileLimits | None = None) -> T | LimitExceeded:
    """fn(*args) in a worker under `limits` (default: current_limits()); its result, or the verdict
    of the limit it hit. fn must be a module-level function and args picklable. The time limit
    counts from the start, or from fn's last `progress()`."""
    global last_stats
    limits = limits or current_limits()
    if _in_worker:
        return fn(*args)
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_supervise, args=(child, fn, args, limits), daemon=True)
    started = time.monotonic()
    proc.start()
    child.close()
    try:
        while not parent.poll(1.0):  # the worker keeps the deadline; here only its death matters
            if not proc.is_alive() and not parent.poll(0):
                raise EOFError
        kind, payload, peak = parent.recv()
    except EOFError:
        raise ReaderCrashed("its worker died before answering") from None
    finally:
        parent.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)
    last_stats = RunStats(round(time.monotonic() - started, 3), round(peak, 1))
    if kind == "ok":
        result: T = pickle.loads(payload)  # what fn returned in the worker, pickled there: a T
        return result
    if kind == "raise":
        raise pickle.loads(payload)
    if kind == "limit":
        return LimitExceeded.model_validate(payload)
    raise ReaderCrashed(str(payload))


def call_limited(fn: Callable[..., T], *args: Any, subject: str = "the file",
                 limits: FileLimits | None = None) -> T:
    """run_limited, with a verdict raised as FileLimitError naming `subject`."""
    out = run_limited(fn, *args, limits=limits)
    if isinstance(out, LimitExceeded):
        raise FileLimitError(out.about(subject))
    return out


def _vm_size() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _parse(fd: int, beat: int, fn: Callable[..., Any], args: tuple[Any, ...], limits: FileLimits) -> None:
    """The grandchild: cap itself, run fn, write the pickled outcome, exit without cleanup."""
    global _in_worker, _heartbeat_fd
    _in_worker, _heartbeat_fd = True, beat
    os.set_blocking(beat, False)
    _limits._override = limits  # noqa: SLF001 - nested reads in this process see the caller's limits
    code = 0
    try:
        _die_with_parent()
        cap = _vm_size() + limits.memory_mb * MB
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        try:
            tag, value = b"o", fn(*args)
        except MemoryError:
            tag, value = b"m", None
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
            tag, value = b"r", exc
        try:
            data = tag + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            if tag == b"r":
                pickle.loads(data[1:])  # an exception that pickles but does not unpickle (keyword-only args)
        except MemoryError:
            data = b"m"
        except Exception:  # an exception the libraries made unpicklable
            data = b"r" + pickle.dumps(RuntimeError(f"{type(value).__name__}: {value}"))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except MemoryError:
        code = 3
    finally:
        os._exit(code)


def _supervise(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], limits: FileLimits) -> None:
    """The worker: fork the parse, read its outcome (and its progress, which moves the deadline)
    until the deadline, classify how it ended."""
    r, w = os.pipe()
    hr, hw = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.close(hr)
        _parse(w, hw, fn, args, limits)
    os.close(w)
    os.close(hw)
    chunks: list[bytes] = []
    deadline = started + limits.seconds
    timed_out = False
    watched = [r, hr]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select(watched, [], [], left)
        if hr in ready:
            if os.read(hr, 1 << 16):
                deadline = time.monotonic() + limits.seconds
            else:
                watched.remove(hr)
        if r in ready:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    stalled = time.monotonic() - (deadline - limits.seconds)
    os.close(r)
    os.close(hr)
    _, status, usage = os.wait4(pid, 0)
    peak = usage.ru_maxrss / 1024  # KB on Linux
    conn.send(_classify(b"".join(chunks), status, peak, stalled, timed_out, limits) + (peak,))
    conn.close()


def _classify(data: bytes, status: int, peak: float, elapsed: float, timed_out: bool,
              limits: FileLimits) -> tuple[str, Any]:
    """(kind, payload) for the caller: ok/raise with the pickled value, limit with a verdict,
    crash with a message."""
    memory = LimitExceeded(what="memory", limit=limits.memory_mb, observed=round(peak)).model_dump()
    if timed_out:
        return "limit", LimitExceeded(what="time", limit=limits.seconds, observed=round(elapsed, 1)).model_dump()
    exited = os.WIFEXITED(status)
    if data[:1] in (b"o", b"r") and exited and os.WEXITSTATUS(status) == 0:
        return ("ok" if data[:1] == b"o" else "raise"), data[1:]
    if data[:1] == b"m" or (exited and os.WEXITSTATUS(status) == 3) or peak >= ABORT_SHARE * limits.memory_mb:
        return "limit", memory
    how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
           else f"exit code {os.WEXITSTATUS(status)}")
    return "crash", how
