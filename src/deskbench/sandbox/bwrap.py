"""The bubblewrap command line: what the jail can see, and nothing else.

Visible read-only: /usr (and the /bin, /sbin, /lib* links or dirs), a few /etc pieces (fonts,
the loader cache, the time zone), the Python prefixes (the venv and the interpreter it links
to, bound at their own paths, so a home directory shows only that one subtree), the supervisor
and the code at /sandbox, the inputs at /mnt/data. Writable: private size-capped tmpfs mounts at
/tmp and /mnt/result. New pid, net (loopback only), ipc and uts namespaces; the jail dies with
its parent. As root, bwrap runs without a user namespace and keeps only the capabilities the
supervisor needs to hand the code a fresh unprivileged uid (bwrap sets no_new_privs, so
setuid binaries do not help the code).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BOOT = Path(__file__).with_name("_boot.py")
ETC = ("/etc/fonts", "/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/mime.types")
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_KILL")


@dataclass(frozen=True)
class PythonLayout:
    executable: str              # the interpreter path, the same inside the jail
    binds: tuple[str, ...]       # host directories bound read-only at the same path

    @property
    def bin_dir(self) -> str:
        return str(Path(self.executable).parent)


def _outermost(paths: list[str]) -> tuple[str, ...]:
    """Drop paths already covered by /usr or by another path in the list."""
    out: list[str] = []
    for p in sorted(set(paths), key=len):
        if p == "/" or p.startswith("/usr/") or p == "/usr":
            continue
        if any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            continue
        out.append(p)
    return tuple(out)


@functools.cache
def python_layout(python: str | None = None) -> PythonLayout:
    """The prefixes of `python` (default: this interpreter) that the jail must see."""
    if python is None:
        exe, prefix, base = sys.executable, sys.prefix, sys.base_prefix
    else:
        found = shutil.which(python) or python
        out = subprocess.run(
            [found, "-c", "import sys, json; print(json.dumps([sys.executable, sys.prefix, sys.base_prefix]))"],
            capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            from deskbench.errors import UserError

            raise UserError(f"sandbox python {python!r} does not run: {out.stderr.strip()[-200:]}")
        exe, prefix, base = json.loads(out.stdout)
    exe = os.path.normpath(os.path.abspath(exe))  # no "..": the jail lacks the cwd; keep symlinks
    real_dir = str(Path(os.path.realpath(exe)).parent.parent)
    return PythonLayout(executable=exe, binds=_outermost([prefix, base, real_dir]))


def _mpl_key(layout: PythonLayout) -> str:
    h = hashlib.sha256(layout.executable.encode())
    for d in (*layout.binds, "/usr/share/fonts", "/usr/local/share/fonts", "/etc/fonts"):
        with contextlib.suppress(OSError):
            h.update(f"{d}:{os.stat(d).st_mtime_ns}".encode())
    return h.hexdigest()[:16]


@functools.cache
def mpl_font_cache(layout: PythonLayout) -> str | None:
    """A prebuilt matplotlib font list (built once per interpreter and font set): without it
    every fresh jail would rescan all fonts (~0.3 s, more with Noto CJK)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deskbench"
    target = base / f"sandbox-mpl-{_mpl_key(layout)}"
    if any(target.glob("fontlist-*.json")):
        return str(target)
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "MPLCONFIGDIR": tmp, "MPLBACKEND": "Agg",
               "LANG": "C.UTF-8"}
        done = subprocess.run([layout.executable, "-c", "import matplotlib.font_manager"],
                              env=env, capture_output=True, timeout=300)
        built = list(Path(tmp).glob("fontlist-*.json"))
        if done.returncode != 0 or not built:
            return None  # no matplotlib: nothing to cache
        staged = base / f".{target.name}.{os.getpid()}"
        staged.mkdir(exist_ok=True)
        for f in built:
            shutil.copy2(f, staged / f.name)
            os.chmod(staged / f.name, 0o644)
        os.chmod(staged, 0o755)
        try:
            staged.rename(target)
        except OSError:  # another process won the race
            shutil.rmtree(staged, ignore_errors=True)
    return str(target)


def sandbox_env(layout: PythonLayout, *, data: str, result: str, tmp: str) -> dict[str, str]:
    """The whole environment of the code: nothing of the host's leaks in."""
    return {
        "PATH": f"{layout.bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": tmp, "TMPDIR": tmp, "USER": "sandbox", "LOGNAME": "sandbox",
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{tmp}/.matplotlib", "XDG_CACHE_HOME": f"{tmp}/.cache",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        # one thread per numeric library: threads count against the process limit
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "DESKBENCH_DATA": data, "DESKBENCH_RESULT": result,
    }


def input_binds(inputs: list[Path]) -> list[tuple[str, str]]:
    """(host, jail) pairs: one directory alone is /mnt/data itself; otherwise each input at
    /mnt/data/<basename>."""
    from deskbench.errors import UserError

    if len(inputs) == 1 and inputs[0].is_dir():
        return [(str(inputs[0].resolve()), "/mnt/data")]
    seen: dict[str, Path] = {}
    for p in inputs:
        if p.name in seen:
            raise UserError(f"two sandbox inputs share the name {p.name!r} ({seen[p.name]} and {p}); "
                            "rename one")
        seen[p.name] = p
    return [(str(p.resolve()), f"/mnt/data/{p.name}") for p in inputs]


def _tree_readable(path: str) -> bool:
    """Can any uid read this file, or list and read everything under this directory?"""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return st.st_mode & 0o004 == 0o004
    if st.st_mode & 0o005 != 0o005:
        return False
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            lst = os.lstat(os.path.join(root, name))
            if stat.S_ISLNK(lst.st_mode):
                continue
            need = 0o005 if stat.S_ISDIR(lst.st_mode) else 0o004
            if lst.st_mode & need != need:
                return False
    return True


def readable_binds(binds: list[tuple[str, str]], staging: Path) -> list[tuple[str | None, str]]:
    """As root the code runs under a fresh uid, so it can only read what others may read. A
    private directory (mkdtemp makes 0700 ones) becomes a jail directory with its entries bound
    one by one; a private file is copied (0644) into `staging`. Symlinks met on the way are
    recreated, never followed on the host. (None, path) means: make this directory."""
    out: list[tuple[str | None, str]] = []

    def add(host: str, jail: str) -> None:
        if _tree_readable(host):
            out.append((host, jail))
        elif os.path.isdir(host):
            out.append((None, jail))
            for entry in sorted(os.scandir(host), key=lambda e: e.name):
                child = f"{jail}/{entry.name}"
                if entry.is_symlink():
                    out.append((f"symlink:{os.readlink(entry.path)}", child))
                elif entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
                    add(entry.path, child)
        else:
            staging.mkdir(parents=True, exist_ok=True)
            copy = staging / f"{len(out)}-{Path(host).name}"
            shutil.copyfile(host, copy)
            os.chmod(copy, 0o644)
            out.append((str(copy), jail))

    for host, jail in binds:
        add(host, jail)
    return out


def bwrap_argv(bwrap: str, layout: PythonLayout, *, binds: list[tuple[str | None, str]],
               tmp_bytes: int, result: tuple[str, int] | str, as_root: bool) -> list[str]:
    """The jail around a command (appended by the caller). `result` is (jail path, tmpfs size)
    for a fresh capped tmpfs, or a host directory bound writable at /mnt/result."""
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr"]
    for top in TOP_LINKS:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--perms", "0755", "--dir", "/etc"]
    for etc in ETC:
        argv += ["--ro-bind-try", etc, etc]
    # the private /tmp first: a venv that lives under /tmp (a CI checkout) is bound on top of it
    argv += ["--dev", "/dev", "--proc", "/proc", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    parents: list[str] = []
    for d in layout.binds:  # bwrap would create missing parents 0700: the code's uid must pass
        parents += [str(a) for a in reversed(Path(d).parents) if str(a) != "/" and str(a) not in parents]
    for a in parents:
        argv += ["--perms", "0755", "--dir", a]
    for d in layout.binds:
        argv += ["--ro-bind", d, d]
    argv += ["--perms", "0755", "--dir", "/mnt/data", "--perms", "0755", "--dir", "/sandbox"]
    if isinstance(result, tuple):
        argv += ["--size", str(result[1]), "--tmpfs", result[0]]
    else:
        argv += ["--bind", result, "/mnt/result"]
    made = {"/", "/mnt", "/mnt/data", "/sandbox", "/tmp", "/mnt/result", "/etc", *parents}
    for host, jail in binds:
        for up in reversed(Path(jail).parents):  # readable parents, not bwrap's 0700 default
            if str(up) not in made:
                made.add(str(up))
                argv += ["--perms", "0755", "--dir", str(up)]
        if host is None:
            argv += ["--perms", "0755", "--dir", jail]
        elif host.startswith("symlink:"):
            argv += ["--symlink", host.removeprefix("symlink:"), jail]
        else:
            argv += ["--ro-bind", host, jail]
    if as_root:
        argv += ["--cap-drop", "ALL"]
        for cap in ROOT_CAPS:
            argv += ["--cap-add", cap]
    argv += ["--chdir", "/mnt/result"]
    return argv
