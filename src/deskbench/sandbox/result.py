"""What one sandboxed call produced, and the text the model reads about it."""

from __future__ import annotations

import signal as _signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from deskbench.sandbox.limits import Limits

LIMIT_NAMES = ("wall_time", "cpu_time", "memory", "processes", "open_files", "file_size",
               "stdout", "stderr", "result_size", "result_files")


@dataclass(frozen=True)
class OutputFile:
    name: str        # path relative to /mnt/result, posix
    size: int
    path: Path       # where it was collected on the host


def _mb(n: float) -> str:
    if n >= 1024**3 and n % 1024**3 == 0:
        return f"{n / 1024**3:g} GiB"
    return f"{n / 1024**2:g} MB" if n >= 1024**2 else f"{n / 1024:g} kB"


def limit_message(hit: str, limits: Limits, *, oom_killed: bool = False) -> str:
    """One plain sentence per limit, written for the model (it decides what to do next).
    `oom_killed`: the sandbox's cgroup hit its memory limit and the kernel killed a process
    (rather than one allocation failing against the per-process limit)."""
    memory = (f"memory limit {_mb(limits.memory_bytes)} reached: the program was killed "
              "(the limit counts every process and file in memory of the sandbox together)"
              if oom_killed else
              f"memory limit of {_mb(limits.memory_bytes)} reached (an allocation failed)")
    return {
        "wall_time": f"killed: wall-time limit of {limits.wall_seconds:g} s reached",
        "cpu_time": f"killed: CPU-time limit of {limits.cpu_seconds} s reached",
        "memory": memory,
        "processes": f"process limit of {limits.processes} processes/threads reached "
                     "(a fork or thread start failed)",
        "open_files": f"open-file limit of {limits.open_files} files reached",
        "file_size": f"file-size limit reached: no single file may exceed {_mb(limits.file_bytes)}",
        "stdout": f"stdout exceeded {_mb(limits.output_bytes)}; the rest was dropped",
        "stderr": f"stderr exceeded {_mb(limits.output_bytes)}; the rest was dropped",
        "result_size": f"/mnt/result holds at most {_mb(limits.result_bytes)} in total; "
                       "it filled up or files were not collected",
        "result_files": f"at most {limits.result_files} files are collected from /mnt/result; "
                        "the rest were skipped",
    }[hit]


def _signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _head_tail(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    keep = max(budget - 60, 0)
    head, tail = keep // 3, keep - keep // 3
    return f"{text[:head]}\n... [{len(text) - head - tail} characters omitted] ...\n{text[len(text) - tail:]}"


def _tail(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    keep = max(budget - 50, 0)
    return f"... [{len(text) - keep} earlier characters omitted] ...\n{text[len(text) - keep:]}"


@dataclass
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int | None      # None when killed by a signal
    signal: int | None
    limit_hits: list[str]      # subset of LIMIT_NAMES
    files: list[OutputFile]
    skipped: list[tuple[str, str]]   # (name, reason) for /mnt/result entries not collected
    seconds: float
    limits: Limits = field(default_factory=Limits)
    notes: list[str] = field(default_factory=list)   # sandbox problems in plain words
    enforcement: str = "rlimit"    # how memory and processes were capped: "cgroup v1|v2" or "rlimit"
    oom_killed: bool = False       # the cgroup's memory limit was reached and a process killed
    memory_peak_bytes: int | None = None   # the sandbox's peak memory, where the cgroup keeps it
    _owned_dir: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Exit 0 and no limit hit."""
        return self.exit_code == 0 and not self.limit_hits

    def cleanup(self) -> None:
        """Delete the collected files when they live in a temp dir this result owns."""
        if self._owned_dir is not None:
            self._owned_dir.cleanup()
            self._owned_dir = None

    def status_line(self) -> str:
        if self.exit_code is not None:
            return f"exit status {self.exit_code}"
        if self.signal is not None:
            return f"killed by {_signal_name(self.signal)}"
        return "exit status unknown"

    def for_model(self, max_chars: int = 8000) -> str:
        """The tool-result text: status, limit hits in plain words, stdout, the tail of stderr
        and the files produced. Stdout and stderr share what the header leaves of max_chars.
        No wall time: the same program must give the same text, or a replay from the model or
        judge cache misses on a busy machine (a time-limit hit is still said, in limit_hits)."""
        head = [self.status_line()]
        head += [limit_message(h, self.limits, oom_killed=self.oom_killed) for h in self.limit_hits]
        head += self.notes
        if self.files:
            shown = ", ".join(f"{f.name} ({f.size:,} bytes)" for f in self.files[:50])
            more = f" and {len(self.files) - 50} more" if len(self.files) > 50 else ""
            head.append(f"files in /mnt/result: {shown}{more}")
        else:
            head.append("files in /mnt/result: none")
        if self.skipped:
            shown = "; ".join(f"{n}: {r}" for n, r in self.skipped[:20])
            more = f"; and {len(self.skipped) - 20} more" if len(self.skipped) > 20 else ""
            head.append(f"not collected: {shown}{more}")
        header = _head_tail("\n".join(head), max(max_chars // 4, 200))
        budget = max(max_chars - len(header) - 40, 200)
        out, err = self.stdout, self.stderr
        if len(out) + len(err) > budget:
            half = budget // 2
            if len(out) < half:
                err = _tail(err, budget - len(out))
            elif len(err) < half:
                out = _head_tail(out, budget - len(err))
            else:
                out, err = _head_tail(out, half), _tail(err, budget - half)
        parts = [header]
        parts.append("[stdout]\n" + out if out else "[stdout: empty]")
        if err:
            parts.append("[stderr]\n" + err)
        return "\n".join(parts)
