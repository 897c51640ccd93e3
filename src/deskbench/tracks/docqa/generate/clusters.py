"""Cluster builders (MADQA §2.1) that add related documents to a World, and build_world."""

from __future__ import annotations

import random

import deskbench.tracks.docqa.generate.names as N
from deskbench.tracks.docqa.generate.facts import (
    Builder,
    Fact,
    Inspection,
    Invoice,
    Issue,
    Menu,
    Permit,
    Ranking,
    Register,
    Report,
    World,
    slug,
)
from deskbench.tracks.docqa.generate.layouts import (
    CheckGroup,
    Columns,
    Form,
    Heading,
    Legend,
    Page,
    Para,
    Table,
)

SCAN_SHARE = 0.2  # share of documents with one scanned page (~6% of pages)
DISTRACTOR_SHARE = 0.15


def _reports(b: Builder, budget: int) -> None:
    rng = b.rng
    org = f"{b.town()} {rng.choice(N.ORG_KINDS)}"
    start = rng.randint(2015, 2021)
    revenues = rng.sample(N.REVENUES, 4)
    depts = rng.sample(N.DEPARTMENTS, 4)
    base = {k: rng.randint(300, 6000) for k in revenues + depts}
    pool = rng.sample(N.SUPPLIERS, 8)
    projects = rng.sample(N.PROJECTS, 5)
    staff0 = rng.randint(40, 600)
    for year in range(start, start + min(budget, rng.randint(2, 4))):
        subj = f"{org} {year}"
        d = b.doc(f"{slug(org)}-annual-report-{year}.pdf", f"{org} Annual Report {year}",
                  "government", "annual report")
        foot = "Annual report - figures in thousands of dollars"
        staff_n = round(staff0 * rng.uniform(0.85, 1.2))
        chair_name = b.person()
        d.pages.append(Page(f"{org} Annual Report {year}", [
            Para(f"This report summarises the finances and operations of the {org} for fiscal year "
                 f"{year}. The budget was adopted by the board in March {year - 1} after public hearings."),
            Para(f"Compared with {year - 1}, the {org} kept its services running while investing in capital "
                 "projects. Staffing, the number of full-time staff and the board are reported with operating costs."),
            Para(f"Revenue came from {', '.join(k.lower() for k in revenues)}. Operating expenditure covered "
                 f"{', '.join(k.lower() for k in depts)}. Capital projects included the "
                 f"{', '.join(p.lower() for p in projects[:3])}. Major suppliers are listed at the end of this report."),
        ], f"{org} - {year}"))
        vals = {k: round(v * rng.uniform(0.8, 1.25)) for k, v in base.items()}
        rows = [["Source", "Amount ($000)"]] + [[k, f"{vals[k]:,}"] for k in revenues]
        total_rev = sum(vals[k] for k in revenues)
        d.pages.append(Page("Statement of Revenues", [
            Para("Amounts are in thousands of dollars. Figures are unaudited at the time of printing."),
            Table(rows + [["Total revenue", f"{total_rev:,}"]], widths=(2, 1)),
        ], foot))
        revenue = {k: b.num(d, subj, f"{k.lower()} revenue", vals[k], "table") for k in revenues}
        revenue["Total revenue"] = b.num(d, subj, "total revenue", total_rev, "table")
        d.pages.append(Page("Operating Expenditures", [
            Para("Operating expenditure by department, in thousands of dollars."),
            Table([["Department", "Amount ($000)"]] + [[k, f"{vals[k]:,}"] for k in depts], widths=(2, 1)),
            Heading("Staffing and governance"),
            Para(f"At the end of the year the organisation employed {staff_n} full-time staff. The board was "
                 f"chaired by {chair_name} throughout the year."),
        ], foot))
        staff = b.num(d, subj, "number of full-time staff", staff_n, "text")
        chair = b.fact(d, subj, "board chair", chair_name)
        spending = {k: b.num(d, subj, f"{k.lower()} operating expenditure", vals[k], "table") for k in depts}
        chosen = sorted(rng.sample(projects, 3), key=projects.index)
        budgets = {p: rng.randint(50, 2500) for p in chosen}
        d.pages.append(Page("Capital Projects", [
            Para("Capital projects are funded from the capital reserve and state grants."),
            Table([["Project", "Budget ($000)", "Status"]]
                  + [[p, f"{budgets[p]:,}", rng.choice(("Complete", "In progress", "Planned"))] for p in chosen]),
        ], foot))
        proj = {p: b.num(d, subj, f"{p.lower()} capital budget", budgets[p], "table") for p in chosen}
        sup = sorted(rng.sample(pool, 5), key=pool.index)
        d.pages.append(Page("Major Suppliers", [
            Para("Suppliers paid more than fifty thousand dollars during the year."),
            Table([["Supplier", "Paid ($000)"]] + [[s, f"{rng.randint(50, 900):,}"] for s in sup], widths=(2, 1)),
        ], foot))
        suppliers = [b.fact(d, subj, f"major supplier: {s}", s, layout="table") for s in sup]
        b.world.reports.append(Report(org, year, d, staff, chair, revenue, spending, proj, suppliers))


def _food(b: Builder, budget: int) -> None:
    rng = b.rng
    town = b.town()
    n_menus = min(budget, rng.randint(3, 5))
    dishes = rng.sample(N.MAINS, 8)
    for _ in range(n_menus):
        r = b.name([f"{rng.choice(N.RESTAURANT_A)} {rng.choice(N.RESTAURANT_B)}" for _ in range(20)])
        d = b.doc(f"{slug(r)}-menu.pdf", f"{r} menu", "hospitality", "menu")
        founded, chef, seats = rng.randint(1978, 2021), b.person(), rng.randint(24, 160)
        signature = sorted(rng.sample(range(8), 4))
        d.pages.append(Page(r, [
            Para(f"{r} is a neighbourhood restaurant on {rng.choice(N.STREETS)} in {town}. Open Tuesday to "
                 f"Sunday from {rng.randint(11, 12)}:00; reservations recommended at weekends."),
            Para(f"Signature dishes: {', '.join(dishes[i][0].lower() for i in signature)}. Desserts, prices and "
                 "the story of how the restaurant opened and who cooks here follow inside."),
        ], f"{r}, {town}"))
        mains = sorted(rng.sample(dishes, 6), key=dishes.index)
        prices = {m: rng.randint(14, 38) for m, _ in mains}
        d.pages.append(Page("Mains", [Table([["Dish", "Description", "Price"]]
                                             + [[m, desc, f"${prices[m]}"] for m, desc in mains], widths=(2, 2, 1))],
                            "All prices in US dollars"))
        f_mains = {m: b.num(d, r, f"price of the {m.lower()}", prices[m], "table", money=True) for m, _ in mains}
        des = sorted(rng.sample(N.DESSERTS, 4), key=N.DESSERTS.index)
        dprice = {m: rng.randint(6, 14) for m, _ in des}
        d.pages.append(Page("Desserts", [
            Table([["Dessert", "Served with", "Price"]] + [[m, s, f"${dprice[m]}"] for m, s in des], widths=(2, 2, 1)),
            Para("Please tell your server about any allergies. A discretionary service charge applies "
                 "to tables of eight or more."),
        ], "All prices in US dollars"))
        f_des = {m: b.num(d, r, f"price of the {m.lower()}", dprice[m], "table", money=True) for m, _ in des}
        d.pages.append(Page("Our Story", [
            Para(f"The restaurant opened in {founded}. Head chef {chef} cooks with produce from farms within "
                 f"fifty miles. The dining room seats {seats} guests."),
            Para(rng.choice(N.FILLER)),
        ], "Thank you for dining with us"))
        f_founded = b.num(d, r, "year opened", founded, "text")
        f_founded.value, f_founded.variants = str(founded), ()
        f_chef = b.fact(d, r, "head chef", chef)
        f_seats = b.num(d, r, "number of seats", seats, "text")
        b.world.menus.append(Menu(r, d, f_founded, f_chef, f_seats, f_mains, f_des))
    menus = b.world.menus[-n_menus:]
    for m in menus[: min(budget - n_menus, rng.randint(1, n_menus))]:
        year = rng.randint(2021, 2024)
        d = b.doc(f"{slug(m.restaurant)}-inspection-{year}.pdf", f"Inspection report {m.restaurant}",
                  "health", "inspection report")
        used = {i.score.number for i in b.world.inspections if i.year == year}
        free = [s for s in range(60, 100) if s not in used]
        score = rng.choice(free) if free else rng.randint(60, 99)  # bridges check uniqueness again
        inspector, date = b.person(), f"{rng.randint(1, 28)} {rng.choice(N.MONTHS)} {year}"
        viol = rng.sample(N.VIOLATIONS, 3)
        ticks = {v: rng.choice(("Yes", "No")) for v in viol}
        subj = f"{year} inspection of {m.restaurant}"
        d.pages.append(Page("Food Establishment Inspection Report", [
            Form([("Establishment", m.restaurant), ("Town", town), ("Inspection date", date),
                  ("Inspector", inspector), ("Score (out of 100)", str(score))]),
            Heading("Violations observed"),
            *[CheckGroup(v, ["Yes", "No"], [ticks[v]]) for v in viol],
        ], f"Environmental Health Services - {town}"))
        f_score = b.num(d, subj, "score", score, "form")
        f_insp = b.fact(d, subj, "inspector", inspector, layout="form")
        f_viol = {v: b.fact(d, subj, f"violation: {v.lower()}", ticks[v], layout="checkbox", options=("Yes", "No"))
                  for v in viol}
        follow = f"{rng.randint(1, 28)} {rng.choice(N.MONTHS)} {year + 1}"
        d.pages.append(Page("Inspector Comments", [
            Para("The premises were inspected during service. Staff cooperated fully with the inspection."),
            Para(f"A follow-up visit is scheduled for {follow}. The operator must keep temperature logs "
                 "available for review."),
        ], f"Environmental Health Services - {town}"))
        f_follow = b.fact(d, subj, "follow-up visit date", follow)
        b.world.inspections.append(Inspection(m.restaurant, year, d, f_score, f_insp, f_viol, f_follow))


def _permits(b: Builder, budget: int) -> None:
    rng = b.rng
    county = f"{b.town()} County"
    year = rng.randint(2018, 2024)
    pool = rng.sample(N.CONTRACTORS, 8)
    licences = {c: f"LC-{rng.randint(10000, 99999)}" for c in pool}
    if budget >= 2:
        d = b.doc(f"{slug(county)}-contractor-register-{year}.pdf", f"{county} contractor register {year}",
                  "government", "register")
        d.pages.append(Page(f"{county} Licensed Contractors {year}", [
            Para(f"This register lists contractors licensed to carry out building work in {county} during "
                 f"{year}. Licences must be renewed annually."),
            Para("Complaints about a licensed contractor should be made in writing to the licensing office."),
        ], f"{county} Licensing Office"))
        trades = {c: rng.choice(N.TRADES) for c in pool}
        d.pages.append(Page("Register of Licences", [
            Table([["Contractor", "Licence no.", "Trade", "Expires"]]
                  + [[c, licences[c], trades[c], f"31 Dec {year}"] for c in pool], widths=(2.2, 1.2, 1.4, 1.2)),
        ], "Licensing Office"))
        f_lic = {c: b.fact(d, c, f"{county} licence number", licences[c], layout="table") for c in pool}
        b.world.registers.append(Register(county, year, d, f_lic))
        budget -= 1
    for _ in range(min(budget, rng.randint(3, 5))):
        num = b.name([f"BP-{rng.randint(1000, 9999)}" for _ in range(20)])
        d = b.doc(f"building-permit-{num.lower()}.pdf", f"Building permit {num}", "government", "permit")
        applicant, contractor = b.person(), rng.choice(pool)
        address = f"{rng.randint(1, 240)} {rng.choice(N.STREETS)}"
        fee = rng.randint(120, 4800)
        work = rng.choice(N.WORK_TYPES)
        sprink = rng.choice(("Yes", "No"))
        d.pages.append(Page(f"Building Permit {num}", [
            Form([("Permit number", num), ("Applicant", applicant), ("Site address", address),
                  ("Description of work", rng.choice(N.WORKS)), ("Contractor", contractor),
                  ("Permit fee", f"${fee:,}"), ("Date issued", f"{rng.randint(1, 28)} {rng.choice(N.MONTHS)} {year}")]),
            CheckGroup("Type of work", list(N.WORK_TYPES), [work]),
            CheckGroup("Fire sprinklers required", ["Yes", "No"], [sprink]),
        ], f"{county} Building Department"))
        subj = f"building permit {num}"
        fields = {
            "applicant": b.fact(d, subj, "applicant", applicant, layout="form"),
            "site address": b.fact(d, subj, "site address", address, layout="form"),
            "contractor": b.fact(d, subj, "contractor", contractor, layout="form"),
            "permit fee": b.num(d, subj, "permit fee", fee, "form", money=True),
        }
        f_work = b.fact(d, subj, "type of work", work, layout="checkbox", options=N.WORK_TYPES)
        f_spr = b.fact(d, subj, "fire sprinklers required", sprink, layout="checkbox", options=("Yes", "No"))
        months = rng.choice((6, 9, 12, 18, 24))
        d.pages.append(Page("Conditions of Approval", [
            Para(f"Work must be completed within {months} months of the date of issue. Noisy work is "
                 "limited to 8:00 to 18:00 on weekdays."),
            Para("Any change to the approved plans requires a written amendment before the work is done. The "
                 "contractor named on this building permit must display its county licence number on site."),
        ], "Building Department"))
        f_months = b.num(d, subj, "months allowed to complete the work", months, "text")
        stages = ("Footings", "Framing", "Final")
        dates = {s: f"{rng.randint(1, 28)} {rng.choice(N.MONTHS)} {year + 1}" for s in stages}
        d.pages.append(Page("Inspection Record", [
            Table([["Stage", "Date", "Result", "Inspector"]]
                  + [[s, dates[s], rng.choice(("Passed", "Passed", "Failed")), b.person()] for s in stages]),
        ], "Building Department"))
        f_stage = {s: b.fact(d, subj, f"date of the {s.lower()} inspection", dates[s], layout="table") for s in stages}
        b.world.permits.append(Permit(num, d, fields, f_work, f_spr, f_months, f_stage, contractor, county))


def _invoices(b: Builder, budget: int) -> None:
    rng = b.rng
    client = rng.choice(N.CLIENTS)
    year = rng.randint(2019, 2024)
    for supplier in rng.sample(N.SUPPLIERS, min(budget, rng.randint(3, 5))):
        num = b.name([f"INV-{rng.randint(10000, 99999)}" for _ in range(20)])
        d = b.doc(f"invoice-{num.lower()}.pdf", f"Invoice {num}", "business", "invoice")
        items = rng.sample(N.ITEMS, rng.randint(4, 5))
        lines = [(name, rng.randint(1, 20), price) for name, price in items]
        d.pages.append(Page(f"{supplier} - Invoice", [
            Form([("Invoice number", num), ("Invoice date", f"{rng.randint(1, 28)} {rng.choice(N.MONTHS)} {year}"),
                  ("Bill to", client)]),
            Table([["Item", "Qty", "Unit price", "Amount"]]
                  + [[n, str(q), f"${p:,}", f"${q * p:,}"] for n, q, p in lines], widths=(2.4, 0.6, 1, 1)),
            Para("The total due on this invoice, including sales tax, is shown in the payment summary."),
        ], f"{supplier} - accounts department"))
        subj = f"invoice {num}"
        f_bill = b.fact(d, subj, "billed organisation", client, layout="form")
        f_items = {n: b.num(d, subj, f"amount for {n.lower()}", q * p, "table", money=True) for n, q, p in lines}
        sub = sum(q * p for _, q, p in lines)
        tax = round(sub * 0.08)
        due = rng.choice((14, 21, 30, 45, 60))
        d.pages.append(Page("Payment Summary", [
            Table([["", "Amount"], ["Subtotal", f"${sub:,}"], ["Sales tax (8%)", f"${tax:,}"],
                   ["Total due", f"${sub + tax:,}"]], widths=(2, 1)),
            Para(f"Payment is due within {due} days of the invoice date. Please quote the invoice number "
                 "with your payment."),
        ], "Accounts department"))
        f_total = b.num(d, subj, "total due", sub + tax, "table", money=True)
        f_due = b.num(d, subj, "days allowed for payment", due, "text")
        b.world.invoices.append(Invoice(num, supplier, d, f_items, f_total, f_due, f_bill))


def _rankings(b: Builder, budget: int) -> None:
    rng = b.rng
    county = f"{b.town()} County"
    towns = rng.sample(N.TOWNS, 8)
    start = rng.randint(2014, 2022)
    base = {t: rng.uniform(35, 85) for t in towns}
    legend = Legend("Key: share of available points attained", [(c, text) for c, text, _ in N.LEVELS])
    for year in range(start, start + min(budget, rng.randint(2, 3))):
        title = f"{county} Cycling-Friendly Towns Ranking {year}"
        d = b.doc(f"{slug(county)}-cycling-ranking-{year}.pdf", title, "transport", "ranking")
        chair = b.person()
        d.pages.append(Page(title, [
            Para(f"The {year} ranking assesses towns in {county} on how well they support everyday cycling. "
                 f"The assessment panel was chaired by {chair}."),
            Para("Towns submit evidence in five areas; points are awarded by the panel and published below. "
                 f"Towns assessed this year: {', '.join(sorted(towns))}."),
        ], title))
        subj = f"{county} cycling-friendly towns ranking {year}"
        f_chair = b.fact(d, subj, "panel chair", chair)
        pts = {t: round(base[t] + rng.uniform(-6, 6), 1) for t in towns}
        order = sorted(towns, key=lambda t: -pts[t])
        lv = {(t, cat): rng.randrange(3) for t in towns for cat in N.CATEGORIES}
        rows = [["Town", "Rank", "Points", *N.CATEGORIES]]
        colours: dict[tuple[int, int], str] = {}
        for i, t in enumerate(order, start=1):
            rows.append([t, str(i), f"{pts[t]:.1f}", "", "", "", ""])
            for j, cat in enumerate(N.CATEGORIES):
                colours[(i, 3 + j)] = N.LEVELS[lv[(t, cat)]][0]
        d.pages.append(Page("Results by Town", [Table(rows, colours, widths=(1.6, 0.6, 0.8, 1.2, 1, 1, 1)), legend],
                            "Cycling-friendly towns ranking - results"))
        f_pts = {t: b.fact(d, f"{t} in the {subj}", "points", f"{pts[t]:.1f}", layout="table", number=pts[t])
                 for t in towns}
        f_lv = {(t, cat): b.fact(d, f"{t} in the {subj}", f"{cat.lower()} level", N.LEVELS[lv[(t, cat)]][2],
                                 layout="colour", options=tuple(x[2] for x in N.LEVELS),
                                 variants=(N.LEVELS[lv[(t, cat)]][1],))
                for t in towns for cat in N.CATEGORIES}
        d.pages.append(Page("Notes and Method", [
            Para(f"Points for each town are the sum of the panel's scores in five areas; a town's rank and score "
                 f"can rise or fall from year to year. Towns assessed: {', '.join(sorted(towns))}."),
            Para("Levels in each category are shown by colour; see the key under the results table."),
        ], "Cycling-friendly towns ranking - notes"))
        b.world.rankings.append(Ranking(county, year, d, f_chair, f_pts, f_lv))


def _newsletter(b: Builder, budget: int) -> None:
    rng = b.rng
    town = b.town()
    name = f"{town} Community News"
    year = rng.randint(2016, 2024)
    first = rng.randrange(10)
    for k in range(min(budget, rng.randint(2, 3))):
        label = f"{N.MONTHS[first + k]} {year}"
        d = b.doc(f"{slug(town)}-community-news-{slug(label)}.pdf", f"{name} {label}", "community", "newsletter")
        subj = f"{name}, {label}"
        items: list[tuple[str, Fact]] = []
        parks = rng.sample(N.PARKS, 3)
        events = rng.sample(N.EVENTS, 3)
        clubs = rng.sample(N.CLUBS, 3)
        for p in range(rng.randint(2, 3)):
            trees, person, raised = rng.randint(12, 480), b.person(), rng.randint(300, 9000)
            date = f"{rng.randint(1, 28)} {N.MONTHS[(first + k + 1) % 12]}"
            arts = [
                (f"Volunteers plant {parks[p]}", f"Volunteers planted {trees} trees in {parks[p]} over two weekends. "
                 f"The parks team will water the saplings through the summer. {rng.choice(N.FILLER)}"),
                (f"New chair for the {clubs[p]}", f"{person} was elected chair of the {town} {clubs[p]} at its "
                 f"annual meeting. New members are welcome at the weekly sessions."),
                (f"{events[p].title()} total", f"This year's {events[p]} raised ${raised:,} for the community "
                 f"hall fund, with stalls run by local schools. It returns on {date}."),
                ("Around town", f"{rng.choice(N.FILLER)} {rng.choice(N.FILLER)}"),
            ]
            rng.shuffle(arts)
            d.pages.append(Page(f"{name} - {label}" if p == 0 else f"{name} - page {p + 1}",
                                [Columns(arts)], f"{name}, {label}"))
            items.append((f"how many trees did volunteers plant in {parks[p]}",
                          b.num(d, subj, f"trees planted in {parks[p]}", trees, "multi_column")))
            items.append((f"who was elected chair of the {town} {clubs[p]}",
                          b.fact(d, subj, f"chair of the {clubs[p]}", person, layout="multi_column")))
            items.append((f"how much did the {events[p]} raise",
                          b.num(d, subj, f"amount raised by the {events[p]}", raised, "multi_column", money=True)))
        b.world.issues.append(Issue(name, label, d, items))


CLUSTERS = (_reports, _food, _permits, _invoices, _rankings, _newsletter)


def build_world(rng: random.Random, docs: int) -> World:
    """Exactly `docs` documents in clusters; ~15% distractors; ~20% of docs get a scanned page."""
    b = Builder(rng)
    cap = max(3, docs // 6)  # small collections still get every kind of cluster
    i = 0
    while len(b.world.docs) < docs:
        CLUSTERS[i % len(CLUSTERS)](b, min(cap, docs - len(b.world.docs)))
        i += 1
    world = b.world
    left = {d.category: 0 for d in world.docs}
    for d in world.docs:
        left[d.category] += 1
    want = round(DISTRACTOR_SHARE * len(world.docs))
    for k in rng.sample(range(len(world.docs)), len(world.docs)):
        d = world.docs[k]
        if want and left[d.category] > 2:  # every kind of document keeps evidence to ask about
            d.distractor, want = True, want - 1
            left[d.category] -= 1
    for d in world.docs:
        if rng.random() >= SCAN_SHARE:
            continue
        eligible = [n for n, p in enumerate(d.pages, start=1)
                    if not any(isinstance(x, Table) and x.colours for x in p.blocks)]
        n = rng.choice(eligible)
        d.pages[n - 1].scanned = True
        d.pages[n - 1].noise_seed = rng.randrange(1 << 30)
        for f in d.facts:
            if f.page == n:
                f.scanned = True
    return world
