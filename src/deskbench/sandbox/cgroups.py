"""A cgroup per sandbox: memory and process count capped for the whole sandbox, not per process.

RLIMIT_AS caps each process's address space, so four forked children may each hold the limit,
and memory that is not mapped (memfd_create, a tmpfs) is not counted at all. A memory cgroup
counts every page the sandbox's processes charge (anonymous, shmem/memfd, tmpfs), and a pids
cgroup every process and thread. Each sandbox gets its own group under a `deskbench` parent in
the group deskbench itself runs in (so any outer cap still applies); the sandbox's first process
is a tiny shell that writes its own pid into the group and then execs bubblewrap, so nothing
of the user's code runs outside it. After the call the group's counters say whether the OOM
killer struck (memory.oom_control / memory.events `oom_kill`) or a fork was refused
(pids.events `max`); then every process left in it is killed and the group removed.

cgroup v2 (one unified hierarchy) is used where it offers the memory and pids controllers and
deskbench may enable them below its own group; else the v1 memory and pids hierarchies; else
(non-root, read-only cgroupfs, no controllers) the rlimits alone, and `mode.reason` says why.
`DESKBENCH_SANDBOX_CGROUPS=off` forces the rlimit mode (debugging, tests).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from deskbench.sandbox.limits import Limits
from deskbench.sandbox.stale import my_tag, sweep

ENV_SWITCH = "DESKBENCH_SANDBOX_CGROUPS"
PARENT = "deskbench"
# processes of the sandbox that are not the code's: bwrap, its pid-1 init, the supervisor
OVERHEAD_TASKS = 4
# the launcher: join every group given, then become the sandbox (exit 125 when a join fails)
LAUNCHER = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || { echo "deskbench: cannot '
            'enter the sandbox cgroup $1" >&2; exit 125; }; n=$((n-1)); shift; done; exec "$@"')


@dataclass(frozen=True)
class GroupUsage:
    """What a sandbox's group counted."""

    oom_kills: int = 0            # processes the OOM killer killed at the memory limit
    pids_refused: int = 0         # forks/threads refused at pids.max
    memory_peak: int | None = None  # bytes, where the kernel keeps a peak
    pids_peak: int | None = None


class Hierarchy(Protocol):
    """One cgroup version's files: how to make, read and remove a sandbox's group."""

    @property
    def version(self) -> str: ...

    def parents(self) -> list[Path]: ...

    def make(self, name: str, limits: Limits) -> list[Path]: ...

    def usage(self, dirs: list[Path]) -> GroupUsage: ...

    def kill(self, dirs: list[Path]) -> None: ...


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _keyed(text: str, key: str) -> int:
    """The value of `key` in a flat-keyed file ("max 3\\n", "oom_kill 1\\n")."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def _int(path: Path) -> int | None:
    text = _read(path).strip()
    return int(text) if text.isdigit() else None


def _kill_procs(d: Path) -> bool:
    """SIGKILL every process in the group; True when it was already empty."""
    pids = [int(p) for p in _read(d / "cgroup.procs").split() if p.isdigit()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return not pids


@dataclass(frozen=True)
class V1:
    """cgroup v1: separate memory and pids hierarchies (these machines mount them so)."""

    memory: Path      # the deskbench parent in the memory hierarchy
    pids: Path        # ... in the pids hierarchy
    version: str = "cgroup v1"

    def parents(self) -> list[Path]:
        return [self.memory, self.pids]

    def make(self, name: str, limits: Limits) -> list[Path]:
        mem, pids = self.memory / name, self.pids / name
        mem.mkdir()
        try:
            _write(mem / "memory.limit_in_bytes", str(limits.memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():  # swap accounting: RAM + swap capped
                _write(mem / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
            pids.mkdir()
            _write(pids / "pids.max", str(limits.processes + OVERHEAD_TASKS))
        except OSError:
            self.kill([d for d in (mem, pids) if d.exists()])
            raise
        return [mem, pids]

    def usage(self, dirs: list[Path]) -> GroupUsage:
        mem, pids = dirs
        return GroupUsage(oom_kills=_keyed(_read(mem / "memory.oom_control"), "oom_kill"),
                          pids_refused=_keyed(_read(pids / "pids.events"), "max"),
                          memory_peak=_int(mem / "memory.max_usage_in_bytes"),
                          pids_peak=_int(pids / "pids.peak"))

    def kill(self, dirs: list[Path]) -> None:
        _remove(dirs, None)


@dataclass(frozen=True)
class V2:
    """cgroup v2: one group holds both controllers; cgroup.kill ends every process at once."""

    parent: Path
    version: str = "cgroup v2"

    def parents(self) -> list[Path]:
        return [self.parent]

    def make(self, name: str, limits: Limits) -> list[Path]:
        d = self.parent / name
        d.mkdir()
        try:
            _write(d / "memory.max", str(limits.memory_bytes))
            if (d / "memory.swap.max").exists():  # no swap: the limit is the memory it may hold
                _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(limits.processes + OVERHEAD_TASKS))
        except OSError:
            self.kill([d])
            raise
        return [d]

    def usage(self, dirs: list[Path]) -> GroupUsage:
        (d,) = dirs
        return GroupUsage(oom_kills=_keyed(_read(d / "memory.events"), "oom_kill"),
                          pids_refused=_keyed(_read(d / "pids.events"), "max"),
                          memory_peak=_int(d / "memory.peak"), pids_peak=_int(d / "pids.peak"))

    def kill(self, dirs: list[Path]) -> None:
        _remove(dirs, "cgroup.kill")


def _remove(dirs: list[Path], kill_file: str | None, timeout: float = 5.0) -> None:
    """Kill what is left in each group and remove it (rmdir fails while a process lingers)."""
    deadline = time.monotonic() + timeout
    for d in dirs:
        if kill_file and (d / kill_file).exists():
            with contextlib.suppress(OSError):
                _write(d / kill_file, "1")
        while True:
            _kill_procs(d)
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    break
                time.sleep(0.01)


@dataclass
class SandboxGroup:
    """One sandbox's group: wrap its command, then `finish` once its processes have ended."""

    hierarchy: Hierarchy
    dirs: list[Path]
    _usage: GroupUsage | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def launch(self, argv: list[str]) -> list[str]:
        """argv started inside the group: a shell joins it, then execs argv."""
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", LAUNCHER, "deskbench-sandbox", str(len(procs)), *procs, *argv]

    def peek(self) -> GroupUsage:
        """The counters so far (the final ones once finished)."""
        with self._lock:
            return self._usage or self.hierarchy.usage(self.dirs)

    def finish(self) -> GroupUsage:
        """Read the counters, kill anything left and remove the group (idempotent, and safe
        from two threads: a timer's kill and the caller's)."""
        with self._lock:
            if self._usage is None:
                self._usage = self.hierarchy.usage(self.dirs)
                self.hierarchy.kill(self.dirs)
            return self._usage


@dataclass(frozen=True)
class Mode:
    """How the sandbox's memory and process limits are enforced here."""

    hierarchy: Hierarchy | None
    reason: str   # why this mode (for the rlimit fallback: why no cgroup)

    @property
    def name(self) -> str:
        return self.hierarchy.version if self.hierarchy else "rlimit"

    def describe(self) -> str:
        if self.hierarchy is None:
            return ("rlimits: memory is capped per process (RLIMIT_AS), processes per uid "
                    f"(RLIMIT_NPROC; as root each sandbox has a uid of its own); no cgroup because {self.reason}")
        where = ", ".join(str(p) for p in self.hierarchy.parents())
        return f"{self.hierarchy.version}: memory and process count capped per sandbox ({where})"

    def new_group(self, limits: Limits) -> SandboxGroup | None:
        """A fresh group for one sandbox, or None in rlimit mode."""
        if self.hierarchy is None:
            return None
        name = f"deskbench-sandbox-{my_tag()}-{secrets.token_hex(4)}"
        return SandboxGroup(self.hierarchy, self.hierarchy.make(name, limits))

    def sweep(self) -> None:
        """Remove the groups of dead deskbench processes (their sandboxes are dead too)."""
        if self.hierarchy is None:
            return
        hierarchy = self.hierarchy
        for parent in hierarchy.parents():
            sweep(parent, lambda d: hierarchy.kill([d]))


# -- detection ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mount:
    root: str          # the mount's root within its hierarchy
    point: Path
    fstype: str
    options: frozenset[str]


def _mounts(mountinfo: str) -> list[Mount]:
    out = []
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        a, b = left.split(), right.split()
        if len(a) < 5 or len(b) < 3 or b[0] not in ("cgroup", "cgroup2"):
            continue
        point = a[4].replace("\\040", " ")
        out.append(Mount(root=a[3], point=Path(point), fstype=b[0], options=frozenset(b[2].split(","))))
    return out


def _own_groups(proc_cgroup: str) -> dict[str, str]:
    """controller -> this process's group path ("" for the v2 hierarchy)."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for c in parts[1].split(",") if parts[1] else [""]:
                out[c] = parts[2]
    return out


def _group_dir(mount: Mount, path: str) -> Path:
    rel = os.path.relpath(path, mount.root) if mount.root != "/" else path.lstrip("/")
    return mount.point if rel in (".", "") else mount.point / rel


def _make_parent(d: Path) -> None:
    d.mkdir(exist_ok=True)
    if not os.access(d, os.W_OK):
        raise PermissionError(errno.EACCES, "not writable", str(d))


def _try_v2(mounts: list[Mount], own: dict[str, str]) -> V2 | str:
    m = next((m for m in mounts if m.fstype == "cgroup2"), None)
    if m is None or "" not in own:
        return "no cgroup v2 hierarchy"
    group = _group_dir(m, own[""])
    if not {"memory", "pids"} <= set(_read(group / "cgroup.controllers").split()):
        return f"cgroup v2 at {m.point} offers no memory and pids controllers here"
    try:
        if not {"memory", "pids"} <= set(_read(group / "cgroup.subtree_control").split()):
            _write(group / "cgroup.subtree_control", "+memory +pids")
        parent = group / PARENT
        _make_parent(parent)
        _write(parent / "cgroup.subtree_control", "+memory +pids")
    except OSError as e:
        return (f"cgroup v2: cannot enable memory and pids below {group} ({e.strerror}); run "
                "deskbench as root or in a delegated cgroup")
    return V2(parent)


def _try_v1(mounts: list[Mount], own: dict[str, str]) -> V1 | str:
    dirs = {}
    for c in ("memory", "pids"):
        m = next((m for m in mounts if m.fstype == "cgroup" and c in m.options), None)
        if m is None or c not in own:
            return f"no cgroup v1 {c} controller mounted"
        dirs[c] = _group_dir(m, own[c]) / PARENT
    try:
        for d in dirs.values():
            _make_parent(d)
    except OSError as e:
        return (f"cgroup v1: cannot create {e.filename} ({e.strerror}); run deskbench as root "
                "with a writable cgroupfs")
    return V1(memory=dirs["memory"], pids=dirs["pids"])


def detect() -> Mode:
    """The best mode this process can use; probes (and creates the parents) on every call."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "off", "no", "false"):
        return Mode(None, f"{ENV_SWITCH}=off")
    try:
        mounts = _mounts(Path("/proc/self/mountinfo").read_text())
        own = _own_groups(Path("/proc/self/cgroup").read_text())
    except OSError:
        return Mode(None, "no /proc/self/mountinfo (not Linux)")
    reasons = []
    for attempt in (_try_v2, _try_v1):
        found = attempt(mounts, own)
        if not isinstance(found, str):
            return Mode(found, f"{found.version} writable")
        reasons.append(found)
    return Mode(None, "; ".join(reasons))
