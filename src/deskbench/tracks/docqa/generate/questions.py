"""Question builders: every question the world supports, then a quota draw of M of them.

Each candidate carries the facts it uses (so the evidence set is minimal by construction: one
page per fact, every page holding a used fact) and, for derived answers, the computation. Only
facts that are unambiguous in the whole collection and not in a distractor document are used;
comparisons need distinct values and bridges a unique key. The draw hits the MADQA proportions
(~20% multi-hop, ~58% needing layout or visual structure) by filling four cells exactly.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from deskbench.tracks.docqa.generate.facts import Fact, World, num_text
from deskbench.tracks.docqa.generate.manifest import Vision
from deskbench.tracks.docqa.tasks import Evidence, HopType, hop_type

MULTI_HOP_SHARE = 0.20
VISION_SHARE = 0.58
MULTI_VISION_SHARE = 0.75  # of the multi-hop questions, how many also need layout

SINGLE_KIND = {"text": "text_fact", "table": "table_lookup", "form": "form_field", "checkbox": "checkbox",
               "colour": "colour_level", "multi_column": "multi_column_fact"}


@dataclass
class Candidate:
    kind: str
    question: str
    variants: list[list[str]]
    facts: list[Fact]
    computation: dict[str, Any] | None
    domain: str
    category: str

    @property
    def evidence(self) -> list[Evidence]:
        seen: list[tuple[str, int]] = []
        for f in self.facts:
            if (f.document, f.page) not in seen:
                seen.append((f.document, f.page))
        return [Evidence(document=d, page=p) for d, p in seen]

    @property
    def hop(self) -> HopType:
        return hop_type(self.evidence)

    @property
    def vision(self) -> list[Vision]:
        kinds: set[Vision] = {f.layout for f in self.facts if f.layout != "text"}
        kinds |= {"scanned" for f in self.facts if f.scanned}
        return sorted(kinds)


def _alts(f: Fact) -> list[list[str]]:
    return [[f.value]] + [[v] for v in f.variants]


def _num(n: float, money: bool = False, decimals: int = 0) -> list[list[str]]:
    if decimals:
        return [[f"{n:.{decimals}f}"]]
    shown, alts = num_text(int(round(n)), money)
    return [[shown]] + [[a] for a in alts]


class _Gen:
    """Collects candidates; `usable` filters ambiguous facts and distractor documents."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.docs = {d.name: d for d in world.docs}
        self.out: list[Candidate] = []

    def add(self, kind: str, question: str, variants: list[list[str]], facts: list[Fact],
            computation: dict[str, Any] | None = None) -> None:
        if not self.world.usable(*facts):
            return
        if kind == "single" or len({(f.document, f.page) for f in facts}) == 1:
            f = facts[0]
            kind = "scanned_fact" if f.scanned else SINGLE_KIND[f.layout]
        doc = self.docs[facts[-1].document]
        self.out.append(Candidate(kind, question, variants, facts, computation, doc.domain, doc.category))

    def lookup(self, question: str, f: Fact) -> None:
        self.add("single", question, _alts(f), [f])

    def diff(self, kind: str, question: str, a: Fact, b: Fact, money: bool = False, decimals: int = 0) -> None:
        """a - b, with a > b (the question's wording fixes the direction)."""
        assert a.number is not None and b.number is not None
        value = round(a.number - b.number, decimals) if decimals else a.number - b.number
        self.add(kind, question, _num(value, money, decimals), [a, b],
                 {"op": "difference", "operands": [a.id, b.id], "decimals": decimals})

    def total(self, kind: str, question: str, facts: list[Fact], money: bool = False) -> None:
        value = sum(f.number or 0 for f in facts)
        self.add(kind, question, _num(value, money), facts, {"op": "sum", "operands": [f.id for f in facts]})

    def pick(self, kind: str, question: str, facts: list[Fact], labels: list[str], op: str) -> None:
        """Which of the labelled facts has the larger (argmax) or smaller (argmin) number."""
        nums = [f.number for f in facts]
        if len(set(nums)) != len(nums):
            return  # a tie has no unique answer
        best = (max if op == "argmax" else min)(range(len(facts)), key=lambda i: nums[i] or 0)
        self.add(kind, question, [[labels[best]]], facts,
                 {"op": op, "operands": [f.id for f in facts], "labels": labels})


def _reports(g: _Gen) -> None:
    by_org: dict[str, list[Any]] = {}
    for r in g.world.reports:
        by_org.setdefault(r.org, []).append(r)
        o, y = r.org, r.year
        g.lookup(f"How many full-time staff did the {o} employ at the end of {y}?", r.staff)
        g.lookup(f"Who chaired the board of the {o} during {y}?", r.chair)
        for k, f in r.revenue.items():
            what = "total revenue" if k == "Total revenue" else f"{k.lower()} revenue"
            g.lookup(f"How much {what} did the {o} report for {y}, in thousands of dollars?", f)
        for k, f in r.spending.items():
            g.lookup(f"What was the {o}'s operating expenditure on {k.lower()} in {y}, in thousands of dollars?", f)
        for k, f in r.projects.items():
            g.lookup(f"What capital budget did the {o} set for the {k.lower()} in {y}, in thousands of dollars?", f)
        dept, fd = next(iter(r.spending.items()))
        g.diff("cross_page_difference", f"In {y}, by how much did the {o}'s total revenue exceed its {dept.lower()} "
               "operating expenditure, in thousands of dollars?", r.revenue["Total revenue"], fd)
        proj, fp = next(iter(r.projects.items()))
        dept2, fd2 = list(r.spending.items())[1]
        g.total("cross_page_sum", f"What did the {o} allot in {y} to the {proj.lower()} capital budget and to "
                f"{dept2.lower()} operating expenditure together, in thousands of dollars?", [fp, fd2])
    for reports in by_org.values():
        for a, b in zip(reports, reports[1:], strict=False):
            o = a.org
            for k in [k for k in a.revenue if k in b.revenue]:
                if k == "Total revenue" or a.revenue[k].number == b.revenue[k].number:
                    continue
                up = (b.revenue[k].number or 0) > (a.revenue[k].number or 0)
                hi, lo = (b.revenue[k], a.revenue[k]) if up else (a.revenue[k], b.revenue[k])
                g.diff("cross_doc_difference", f"By how much did the {o}'s {k.lower()} revenue "
                       f"{'increase' if up else 'decrease'} from {a.year} to {b.year}, in thousands of dollars?", hi, lo)
            dept = next(iter(a.spending))
            g.total("cross_doc_sum", f"What was the {o}'s {dept.lower()} operating expenditure over {a.year} and "
                    f"{b.year} combined, in thousands of dollars?", [a.spending[dept], b.spending[dept]])
            sa, sb = a.staff.number or 0, b.staff.number or 0
            if sa != sb:
                more = sb > sa
                g.diff("cross_doc_difference", f"How many {'more' if more else 'fewer'} full-time staff did the {o} "
                       f"employ at the end of {b.year} than at the end of {a.year}?",
                       *( (b.staff, a.staff) if more else (a.staff, b.staff) ))
            names_a = [f.value for f in a.suppliers]
            names_b = [f.value for f in b.suppliers]
            both = [n for n in names_a if n in names_b]
            if 0 < len(both) < len(names_a):
                g.add("common_property", f"Which suppliers appear among the {o}'s major suppliers in both {a.year} "
                      f"and {b.year}?", [both], a.suppliers + b.suppliers,
                      {"op": "intersection", "sets": [[f.id for f in a.suppliers], [f.id for f in b.suppliers]]})


def _food(g: _Gen) -> None:
    menus = g.world.menus
    by_name = {m.restaurant: m for m in menus}
    for m in menus:
        r = m.restaurant
        g.lookup(f"In what year did {r} open?", m.founded)
        g.lookup(f"Who is the head chef at {r}?", m.chef)
        g.lookup(f"How many guests does the dining room at {r} seat?", m.seats)
        for dish, f in m.mains.items():
            g.lookup(f"How much does the {dish.lower()} cost at {r}?", f)
        for dish, f in m.desserts.items():
            g.lookup(f"How much does the {dish.lower()} cost at {r}?", f)
        (dish, fm), (des, fdz) = next(iter(m.mains.items())), next(iter(m.desserts.items()))
        g.total("cross_page_sum", f"At {r}, what would the {dish.lower()} and the {des.lower()} cost together?",
                [fm, fdz], money=True)
    for a, b in zip(menus, menus[1:], strict=False):
        for dish in [d for d in a.mains if d in b.mains][:2]:
            g.pick("comparison", f"Which restaurant charges more for the {dish.lower()}: {a.restaurant} or "
                   f"{b.restaurant}?", [a.mains[dish], b.mains[dish]], [a.restaurant, b.restaurant], "argmax")
        g.pick("comparison", f"Which opened earlier, {a.restaurant} or {b.restaurant}?", [a.founded, b.founded],
               [a.restaurant, b.restaurant], "argmin")
    for i in g.world.inspections:
        r, y = i.restaurant, i.year
        g.lookup(f"What score did {r} receive in its {y} health inspection?", i.score)
        g.lookup(f"Who carried out the {y} health inspection of {r}?", i.inspector)
        g.lookup(f"When is the follow-up visit after the {y} health inspection of {r} scheduled?", i.follow_up)
        for v, f in i.violations.items():
            g.lookup(f'In the {y} health inspection of {r}, is "{v}" ticked Yes or No?', f)
        same = [j for j in g.world.inspections if j.year == y and j.score.number == i.score.number]
        menu = by_name.get(r)
        if len(same) == 1 and menu is not None:
            key = f"the restaurant that scored {int(i.score.number or 0)} in its {y} health inspection"
            dish, f = list(menu.mains.items())[-1]
            g.add("cross_doc_bridge", f"How much does the {dish.lower()} cost at {key}?", _alts(f), [i.score, f],
                  {"op": "bridge", "operands": [i.score.id, f.id]})
            g.add("cross_doc_bridge", f"Who is the head chef at {key}?", _alts(menu.chef), [i.score, menu.chef],
                  {"op": "bridge", "operands": [i.score.id, menu.chef.id]})


def _permits(g: _Gen) -> None:
    regs = {r.county: r for r in g.world.registers}
    for reg in g.world.registers:
        for c, f in list(reg.licences.items())[:3]:
            g.lookup(f"What licence number does {c} hold in the {reg.county} contractor register for {reg.year}?", f)
    for p in g.world.permits:
        n = p.number
        g.lookup(f"Who applied for building permit {n}?", p.fields["applicant"])
        g.lookup(f"What is the site address on building permit {n}?", p.fields["site address"])
        g.lookup(f"Which contractor is named on building permit {n}?", p.fields["contractor"])
        g.lookup(f"What fee was charged for building permit {n}?", p.fields["permit fee"])
        g.lookup(f"Which type of work is ticked on building permit {n}?", p.work_type)
        g.lookup(f"Does building permit {n} require fire sprinklers?", p.sprinklers)
        g.lookup(f"Within how many months must the work under building permit {n} be completed?", p.months)
        for stage, f in p.stages.items():
            g.lookup(f"On what date did the {stage.lower()} inspection for building permit {n} take place?", f)
        county_reg = regs.get(p.county)
        if county_reg is not None and p.contractor in county_reg.licences:
            lic = county_reg.licences[p.contractor]
            g.add("cross_doc_bridge", f"What is the {p.county} licence number of the contractor named on building "
                  f"permit {n}?", _alts(lic), [p.fields["contractor"], lic],
                  {"op": "bridge", "operands": [p.fields["contractor"].id, lic.id]})


def _invoices(g: _Gen) -> None:
    inv = g.world.invoices
    for i in inv:
        n = i.number
        for item, f in i.items.items():
            g.lookup(f"What is the amount charged for {item.lower()} on invoice {n}?", f)
        g.lookup(f"What is the total due on invoice {n}?", i.total)
        g.lookup(f"Within how many days must invoice {n} be paid?", i.due_days)
        g.lookup(f"Which organisation is billed on invoice {n}?", i.bill_to)
        item, f = next(iter(i.items.items()))
        g.diff("cross_page_difference", f"How much more is the total due on invoice {n} than its charge for "
               f"{item.lower()}?", i.total, f, money=True)
    for a, b in zip(inv, inv[1:], strict=False):
        g.pick("comparison", f"Which invoice has the larger total due: {a.number} or {b.number}?",
               [a.total, b.total], [a.number, b.number], "argmax")
        both = [k for k in a.items if k in b.items]
        if both:
            fa, fb = list(a.items.values()), list(b.items.values())
            g.add("common_property", f"Which items appear on both invoice {a.number} and invoice {b.number}?",
                  [both], fa + fb, {"op": "intersection", "sets": [[f.id for f in fa], [f.id for f in fb]],
                                    "key": "item"})


def _rankings(g: _Gen) -> None:
    by_county: dict[str, list[Any]] = {}
    for r in g.world.rankings:
        by_county.setdefault(r.county, []).append(r)
        name = f"{r.county} Cycling-Friendly Towns Ranking {r.year}"
        g.lookup(f"Who chaired the assessment panel of the {name}?", r.chair)
        for t, f in list(r.points.items())[:4]:
            g.lookup(f"How many points did {t} score in the {name}?", f)
        for (t, cat), f in r.levels.items():
            g.lookup(f"What level did {t} reach for {cat} in the {name}?", f)
    for rs in by_county.values():
        for a, b in zip(rs, rs[1:], strict=False):
            for t in list(a.points)[:3]:
                pa, pb = a.points[t], b.points[t]
                if pa.number == pb.number:
                    continue
                up = (pb.number or 0) > (pa.number or 0)
                g.diff("cross_doc_difference", f"By how many points did {t}'s score {'rise' if up else 'fall'} from "
                       f"the {a.year} to the {b.year} {a.county} Cycling-Friendly Towns Ranking?",
                       *((pb, pa) if up else (pa, pb)), decimals=1)


def _newsletters(g: _Gen) -> None:
    for issue in g.world.issues:
        for phrase, f in issue.items:
            g.lookup(f"According to the {issue.label} issue of the {issue.name}, {phrase}?", f)


def candidates(world: World) -> list[Candidate]:
    """Every distinct question the world supports, in a deterministic order."""
    g = _Gen(world)
    for build in (_reports, _food, _permits, _invoices, _rankings, _newsletters):
        build(g)
    seen: set[str] = set()
    out = []
    for c in g.out:
        if c.question not in seen:
            seen.add(c.question)
            out.append(c)
    return out


def _round_robin(rng: random.Random, pool: list[Candidate]) -> Iterator[Candidate]:
    """Candidates alternating across kinds (shuffled within each), so no kind floods a cell."""
    groups: dict[str, list[Candidate]] = {}
    for c in pool:
        groups.setdefault(c.kind, []).append(c)
    queues = [groups[k] for k in sorted(groups)]
    for q in queues:
        rng.shuffle(q)
    while any(queues):
        for q in queues:
            if q:
                yield q.pop()


def select(rng: random.Random, pool: list[Candidate], m: int, docs: int) -> list[Candidate]:
    """Exactly m questions: ~20% multi-hop, ~58% needing vision; ValueError if the pool is short."""
    if len(pool) < m:
        raise ValueError(f"docs={docs} gives only {len(pool)} distinct questions but questions={m} were asked; "
                         f"use more documents (about {max(12, int(docs * m / max(len(pool), 1)) + 6)})")
    n_multi = round(MULTI_HOP_SHARE * m)
    multi_vision = round(n_multi * MULTI_VISION_SHARE)
    single_vision = round(VISION_SHARE * m) - multi_vision
    cells: dict[tuple[bool, bool], list[Candidate]] = {(a, b): [] for a in (True, False) for b in (True, False)}
    for c in pool:
        cells[(c.hop != "single", bool(c.vision))].append(c)
    want = {(True, True): multi_vision, (True, False): n_multi - multi_vision,
            (False, True): single_vision, (False, False): m - n_multi - single_vision}
    chosen: list[Candidate] = []
    for multi in (True, False):
        a, b = (multi, True), (multi, False)
        need = want[a] + want[b]
        if len(cells[a]) + len(cells[b]) < need:
            what = "multi-hop" if multi else "single-page"
            raise ValueError(f"docs={docs} supports only {len(cells[a]) + len(cells[b])} {what} questions but "
                             f"questions={m} needs {need}; use more documents")
        take_a = min(want[a], len(cells[a]))
        take_a = max(take_a, need - len(cells[b]))
        its_a, its_b = _round_robin(rng, cells[a]), _round_robin(rng, cells[b])
        chosen += [next(its_a) for _ in range(take_a)] + [next(its_b) for _ in range(need - take_a)]
    rng.shuffle(chosen)
    return chosen
