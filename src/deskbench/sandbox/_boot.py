"""The supervisor that runs inside the jail (standalone: imports nothing from deskbench).

Run mode (`execute_code`): fork the model's code as a child with the rlimits set and, when the
supervisor is root (bwrap as root, no user namespace), with a fresh unprivileged uid so
RLIMIT_NPROC counts only this sandbox's processes; wait with the wall-time timer; kill every
process left in the pid namespace; then send the exit status and the regular files of
/mnt/result (a size-capped tmpfs that dies with the namespace) to the host over the status fd.

Exec mode (`Sandbox.spawn`): the same setup, then exec argv in place (no collection).

Protocol on the status fd: JSON lines; a `file` line is followed by exactly `size` raw bytes.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import stat
import sys
import types
from typing import Any

SKIP_RECORDS = 100


def _drop_and_limit(cfg: dict[str, Any]) -> None:
    """In the child: own process group, no inherited fds, unprivileged uid, rlimits."""
    if os.getpgid(0) != os.getpid():  # a session leader (spawned with a new session) leads its group already
        os.setpgid(0, 0)
    os.closerange(3, max(os.sysconf("SC_OPEN_MAX"), 65536))
    try:  # the code, not the supervisor, is what an OOM kill should pick (before the uid changes)
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    uid = cfg.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    rl = cfg["rl"]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (rl["cpu"], rl["cpu"] + 1))
    resource.setrlimit(resource.RLIMIT_AS, (rl["as"], rl["as"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (rl["nofile"], rl["nofile"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (rl["fsize"], rl["fsize"]))
    if rl.get("nproc") is not None:  # None: the sandbox's cgroup counts processes (pids.max)
        resource.setrlimit(resource.RLIMIT_NPROC, (rl["nproc"], rl["nproc"]))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    os.chdir(cfg["cwd"])


def _prepare(cfg: dict[str, Any]) -> None:
    """Give the code's uid its writable places and a prebuilt matplotlib font cache."""
    uid = cfg.get("uid")
    mpl = os.environ.get("MPLCONFIGDIR")
    if mpl:
        os.makedirs(mpl, exist_ok=True)
        src = cfg.get("mpl_cache")
        if src and os.path.isdir(src):
            for name in os.listdir(src):
                if name.startswith("fontlist-") and name.endswith(".json"):
                    with open(os.path.join(src, name), "rb") as f, \
                            open(os.path.join(mpl, name), "wb") as g:
                        g.write(f.read())
    if uid is not None:
        for top in cfg.get("chown", []):
            dev = os.stat(top).st_dev
            for root, dirs, files in os.walk(top):
                # stay on the tmpfs: a read-only bind inside it (a venv under /tmp) is not ours
                dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == dev]
                os.chown(root, uid, uid)
                for n in files:
                    os.chown(os.path.join(root, n), uid, uid)


def _run_code(cfg: dict[str, Any], source: str) -> None:
    """In the child: run the model's code as __main__, traceback without our own frame."""
    path = cfg["code"]
    main = types.ModuleType("__main__")
    main.__file__ = path
    sys.modules["__main__"] = main
    sys.argv = [path]
    sys.path[0] = cfg["cwd"]
    if isinstance(sys.stdout, io.TextIOWrapper):  # the interpreter's own stdout: it is
        sys.stdout.reconfigure(line_buffering=True)
    try:
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - print like the interpreter would, minus this frame
        main.__dict__.clear()  # free the code's data first: a MemoryError must still print
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
        try:
            import linecache
            import traceback

            linecache.cache[path] = (len(source), None, source.splitlines(True), path)
            traceback.print_exception(type(e), e, tb)
        except BaseException:  # noqa: BLE001 - too little memory even for the traceback module
            os.write(2, f"{type(e).__name__}: {e}\n".encode(errors="replace"))
        sys.stderr.flush()
        raise SystemExit(1) from None


def _send(fd: int, record: dict[str, Any], payload_fd: int | None = None, size: int = 0) -> None:
    os.write(fd, (json.dumps(record) + "\n").encode())
    if payload_fd is None:
        return
    left = size
    while left > 0:
        chunk = os.read(payload_fd, min(left, 1 << 20))
        if not chunk:  # shrank meanwhile: pad so the framing stays intact
            chunk = b"\0" * min(left, 1 << 20)
        view = memoryview(chunk)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        left -= len(chunk)


def _collect(cfg: dict[str, Any], fd: int) -> None:
    """Send the regular files under the result dir; never follow a symlink."""
    top = cfg["result"]
    max_files, max_bytes = cfg["max_files"], cfg["max_bytes"]
    files = sent = skipped = 0

    def skip(name: str, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        if skipped <= SKIP_RECORDS:
            _send(fd, {"type": "skip", "name": name, "reason": reason})

    def walk(rel: str) -> None:
        nonlocal files, sent
        try:
            entries = sorted(os.scandir(os.path.join(top, rel)), key=lambda e: e.name)
        except OSError as e:
            skip(rel or ".", f"unreadable directory ({e.strerror})")
            return
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                skip(name, f"symlink to {os.readlink(entry.path)!r}, not followed")
            elif stat.S_ISDIR(st.st_mode):
                walk(name)
            elif not stat.S_ISREG(st.st_mode):
                skip(name, "not a regular file")
            elif files >= max_files:
                skip(name, f"over the limit of {max_files} files")
            elif sent + st.st_size > max_bytes:
                skip(name, f"over the {max_bytes} bytes total limit")
            else:
                try:
                    pfd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError as e:
                    skip(name, f"unreadable ({e.strerror})")
                    continue
                try:
                    size = os.fstat(pfd).st_size
                    _send(fd, {"type": "file", "name": name, "size": size}, pfd, size)
                finally:
                    os.close(pfd)
                files += 1
                sent += size

    walk("")
    if skipped > SKIP_RECORDS:
        _send(fd, {"type": "skip", "name": f"({skipped - SKIP_RECORDS} more entries)",
                   "reason": "not listed"})


def main() -> None:
    cfg = json.loads(sys.argv[1])
    _prepare(cfg)
    if cfg.get("argv"):
        _drop_and_limit(cfg)
        os.execvp(cfg["argv"][0], cfg["argv"])
    status_fd: int = cfg["status_fd"]
    jail: bool = cfg["jail"]
    with open(cfg["code"], encoding="utf-8") as f:  # read before the uid changes
        source = f.read()
    pid = os.fork()
    if pid == 0:
        _drop_and_limit(cfg)
        _run_code(cfg, source)
        raise SystemExit(0)
    try:  # noqa: SIM105 - contextlib costs startup time here
        os.setpgid(pid, pid)  # also from here, so killpg cannot race the child's own call
    except OSError:
        pass
    timed_out = False

    def kill_all() -> None:
        try:
            if jail:
                os.kill(-1, signal.SIGKILL)  # every process of the pid namespace but us and init
            else:
                os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def on_alarm(signum: int, frame: object) -> None:
        nonlocal timed_out
        timed_out = True
        kill_all()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, cfg["wall"])
    _, status, usage = os.wait4(pid, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    kill_all()
    full = False
    if jail:
        st = os.statvfs(cfg["result"])
        full = st.f_bavail * st.f_frsize < 64 * 1024
    _send(status_fd, {
        "type": "status",
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "wall_time": timed_out,
        "cpu": usage.ru_utime + usage.ru_stime,
        "maxrss_kb": usage.ru_maxrss,
        "result_full": full,
    })
    uid = cfg.get("uid")
    if uid is not None:  # read the code's files as their owner, never as root
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _collect(cfg, status_fd)
    _send(status_fd, {"type": "end"})


if __name__ == "__main__":
    main()
