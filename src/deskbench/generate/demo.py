"""The bundled demo benchmark: small generated docqa, analytics and deliverables sets shipped
inside the package, so `deskbench demo` runs on a fresh machine with no key and no download.

The bundle is the generators' output for fixed arguments (each track's part: `Track.demo`'s
`build`, into a folder named after the track); `deskbench generate demo` rebuilds it and `--check`
proves the copy in the package is byte-identical to a fresh build (SHA256SUMS lists every file).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

SUMS = "SHA256SUMS"


@dataclass(frozen=True)
class DemoSpec:
    """What the whole bundle shares; each track's leg holds its own sizes (tracks/<name>/demo.py)."""

    seed: int = 2026


DEMO = DemoSpec()


def bundled_dir() -> Path:
    """Where the demo lives inside the installed package."""
    return Path(__file__).resolve().parent.parent / "data" / "demo"


def build_demo(out: Path, spec: DemoSpec = DEMO) -> dict[str, str]:
    """Generate the demo into `out` (replacing what is there); returns {relative path: sha256}."""
    from deskbench.contract.registry import tracks

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name, track in tracks().items():  # the built-ins first, in their order
        leg = track.demo()
        if leg is not None:
            leg.build(out / name, spec.seed)
    sums = checksums(out)
    (out / SUMS).write_text("".join(f"{digest}  {name}\n" for name, digest in sums.items()))
    return sums


def checksums(root: Path) -> dict[str, str]:
    """sha256 of every file under root except the sums file itself, by sorted relative path."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != SUMS and "__pycache__" not in p.parts
    }


def recorded_sums(root: Path) -> dict[str, str]:
    rows = (line.split("  ", 1) for line in (root / SUMS).read_text().splitlines() if line.strip())
    return {name: digest for digest, name in rows}


def check_demo(bundle: Path | None = None) -> list[str]:
    """Differences between the bundled demo and a fresh build (empty when byte-identical)."""
    bundle = bundle or bundled_dir()
    if not (bundle / SUMS).exists():
        return [f"{bundle} has no {SUMS}: build it with `deskbench generate demo`"]
    problems = [f"{name}: bundled file differs from its recorded sum" for name, digest in checksums(bundle).items()
                if recorded_sums(bundle).get(name) != digest]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = build_demo(Path(tmp) / "demo")
    bundled = recorded_sums(bundle)
    for name in sorted(set(fresh) | set(bundled)):
        if name not in bundled:
            problems.append(f"{name}: made by a fresh build, missing from the bundle")
        elif name not in fresh:
            problems.append(f"{name}: in the bundle, not made by a fresh build")
        elif fresh[name] != bundled[name]:
            problems.append(f"{name}: a fresh build differs from the bundle")
    return problems
