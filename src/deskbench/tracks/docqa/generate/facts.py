"""The seeded world: clusters of related documents, their pages, and the facts each page holds.

Clusters (built in clusters.py) follow MADQA §2.1: yearly reports of one organisation, menus of
several restaurants in one town with their health inspections, building permits with the county
contractor register, supplier invoices, yearly colour-coded rankings, newsletter issues. Every
fact knows the document and page it sits on and how it is shown (running text, table, form,
checkbox, colour, columns), which is what question builders and the validity checks need. All
randomness comes from the one `random.Random` passed in.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Literal

import deskbench.tracks.docqa.generate.names as N
from deskbench.tracks.docqa.generate.layouts import Page

Layout = Literal["text", "table", "form", "checkbox", "colour", "multi_column"]


@dataclass
class Fact:
    """One answerable statement: `subject`'s `attribute` is `value`, shown on document/page."""

    id: str
    document: str
    page: int
    subject: str
    attribute: str
    value: str
    number: float | None = None
    layout: Layout = "text"
    options: tuple[str, ...] = ()  # checkbox options / colour levels the value is one of
    variants: tuple[str, ...] = ()  # other acceptable spellings of the value
    scanned: bool = False


@dataclass
class Doc:
    name: str
    title: str
    domain: str
    category: str
    pages: list[Page] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    distractor: bool = False


@dataclass
class Report:
    org: str
    year: int
    doc: Doc
    staff: Fact
    chair: Fact
    revenue: dict[str, Fact]
    spending: dict[str, Fact]
    projects: dict[str, Fact]
    suppliers: list[Fact]


@dataclass
class Menu:
    restaurant: str
    doc: Doc
    founded: Fact
    chef: Fact
    seats: Fact
    mains: dict[str, Fact]
    desserts: dict[str, Fact]


@dataclass
class Inspection:
    restaurant: str
    year: int
    doc: Doc
    score: Fact
    inspector: Fact
    violations: dict[str, Fact]
    follow_up: Fact


@dataclass
class Permit:
    number: str
    doc: Doc
    fields: dict[str, Fact]  # applicant, address, contractor, fee
    work_type: Fact
    sprinklers: Fact
    months: Fact
    stages: dict[str, Fact]
    contractor: str
    county: str


@dataclass
class Register:
    county: str
    year: int
    doc: Doc
    licences: dict[str, Fact]


@dataclass
class Invoice:
    number: str
    supplier: str
    doc: Doc
    items: dict[str, Fact]
    total: Fact
    due_days: Fact
    bill_to: Fact


@dataclass
class Ranking:
    county: str
    year: int
    doc: Doc
    chair: Fact
    points: dict[str, Fact]
    levels: dict[tuple[str, str], Fact]


@dataclass
class Issue:
    name: str
    label: str  # "May 2023"
    doc: Doc
    items: list[tuple[str, Fact]]  # (question phrase, fact)


@dataclass
class World:
    docs: list[Doc] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    menus: list[Menu] = field(default_factory=list)
    inspections: list[Inspection] = field(default_factory=list)
    permits: list[Permit] = field(default_factory=list)
    registers: list[Register] = field(default_factory=list)
    invoices: list[Invoice] = field(default_factory=list)
    rankings: list[Ranking] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    index: dict[tuple[str, str], list[Fact]] = field(default_factory=dict)

    def unique(self, fact: Fact) -> bool:
        """True if no other fact in the whole collection answers the same subject/attribute."""
        return len(self.index.get((fact.subject, fact.attribute), ())) == 1

    def usable(self, *facts: Fact) -> bool:
        """Facts a question may use: unambiguous, and not in a distractor document."""
        docs = {d.name: d for d in self.docs}
        return all(self.unique(f) and not docs[f.document].distractor for f in facts)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def num_text(n: int, money: bool = False) -> tuple[str, tuple[str, ...]]:
    """Display form and the other acceptable spellings of a whole number."""
    shown = f"${n:,}" if money else f"{n:,}"
    alts = [f"{n:,}", str(n), *([f"${n:,}", f"${n}"] if money else [])]  # "$9" is no way to say 9 months
    return shown, tuple(dict.fromkeys(a for a in alts if a != shown))


class Builder:
    """Adds clusters to a World; hands out unique names so questions stay unambiguous."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.world = World()
        self.taken: set[str] = set()
        self.towns = list(N.TOWNS)
        rng.shuffle(self.towns)
        self.town_round = 0
        self.fact_no = 0

    def name(self, make: list[str]) -> str:
        """The first candidate not yet used, else the first one numbered."""
        for cand in make:
            if cand not in self.taken:
                self.taken.add(cand)
                return cand
        n = 2
        while f"{make[0]} {n}" in self.taken:
            n += 1
        self.taken.add(f"{make[0]} {n}")
        return f"{make[0]} {n}"

    def town(self) -> str:
        prefixes = ("", "North ", "South ", "East ", "West ", "Upper ", "Lower ", "New ")
        while True:
            if not self.towns:
                self.town_round += 1
                self.towns = list(N.TOWNS)
                self.rng.shuffle(self.towns)
            base = self.towns.pop()
            cand = prefixes[self.town_round % len(prefixes)] + base
            if self.town_round >= len(prefixes):
                cand = f"{cand} {self.town_round // len(prefixes) + 1}"
            if cand not in self.taken:
                self.taken.add(cand)
                return cand

    def person(self) -> str:
        return f"{self.rng.choice(N.FIRST)} {self.rng.choice(N.LAST)}"

    def doc(self, name: str, title: str, domain: str, category: str) -> Doc:
        d = Doc(self.name([name]) if name in self.taken else name, title, domain, category)
        self.taken.add(d.name)
        self.world.docs.append(d)
        return d

    def fact(self, doc: Doc, subject: str, attribute: str, value: str, *, layout: Layout = "text",
             number: float | None = None, options: tuple[str, ...] = (),
             variants: tuple[str, ...] = ()) -> Fact:
        """A fact on the page being built (the doc's last page)."""
        self.fact_no += 1
        f = Fact(f"f{self.fact_no:05d}", doc.name, len(doc.pages), subject, attribute, value,
                 number, layout, options, variants)
        doc.facts.append(f)
        self.world.index.setdefault((subject, attribute), []).append(f)
        return f

    def num(self, doc: Doc, subject: str, attribute: str, n: int, layout: Layout,
            money: bool = False) -> Fact:
        shown, alts = num_text(n, money)
        return self.fact(doc, subject, attribute, shown, layout=layout, number=n, variants=alts)
