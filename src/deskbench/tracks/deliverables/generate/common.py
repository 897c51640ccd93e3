"""Pieces every generated deliverables package shares: trap-value patterns, the Table 19
rubric, and a builder for the verifier and trap lists."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from deskbench.tracks.deliverables.tasks import OutputFormat, RequiredOutput, Trap, TrapKind
from deskbench.tracks.deliverables.verifier_specs import VerifierSpec

_SPECS = TypeAdapter(list[VerifierSpec])


def number_pattern(value: float, decimals: int = 2) -> str:
    """A regex for `value` as people write it: optional thousands separators (western or
    Indian), trailing zeros optional, further digits allowed (any cents when decimals=0), not
    part of a longer number: 5.0 (decimals=1) matches 5, 5.0 and 5.04 but not the 5 of 5.6."""
    text = f"{abs(value):.{decimals}f}"
    whole, _, frac = text.partition(".")
    whole_re = ",?".join(whole)
    frac = frac.rstrip("0")
    if frac:
        frac_re = rf"\.{frac}\d*"
    elif decimals:
        frac_re = r"(?:\.0\d*)?"
    else:
        frac_re = r"(?:\.\d+)?"
    sign = "-?" if value >= 0 else r"(?:-|\()"
    return rf"(?<![\d.,]){sign}[₹$]?\s?{whole_re}{frac_re}(?!\.?\d)"


def lure_pattern(label: str, value: float, decimals: int = 2) -> str:
    """`value` given as the figure for `label`: the label, then the trap value as the first
    figure after it on the same line (within 40 characters). Explaining the trap elsewhere
    ("the headline 5.5 min is overridden") does not match; answering with it does."""
    return rf"{re.escape(label)}[^\n\d]{{0,40}}?{number_pattern(value, decimals)}"


@dataclass
class Package:
    """Collects a package's verifier specs and traps while a scenario builds it."""

    verifiers: list[dict[str, Any]] = field(default_factory=list)
    traps: list[Trap] = field(default_factory=list)
    outputs: list[RequiredOutput] = field(default_factory=list)

    def verify(self, kind: str, vid: str, description: str, **fields: Any) -> str:
        self.verifiers.append({"kind": kind, "id": vid, "description": description, **fields})
        return vid

    def output(self, name: str, fmt: OutputFormat, sections: list[str]) -> None:
        self.outputs.append(RequiredOutput(name=name, format=fmt, sections=sections))
        self.verify("file_sections", f"file_{name.rsplit('.', 1)[0]}",
                    f"{name} exists, opens and has its sections", file=name, sections=sections)

    def trap(self, tid: str, kind: TrapKind, description: str, lure: str, location: str,
             verifiers: list[str]) -> None:
        self.traps.append(Trap(id=tid, kind=kind, description=description, lure=lure,
                               location=location, verifiers=verifiers))

    def specs(self) -> list[VerifierSpec]:
        return _SPECS.validate_python(self.verifiers)


def money(value: float, decimals: int = 0) -> str:
    return f"{value:,.{decimals}f}"
