"""Seeded analytics benchmark (AIDABench §3): QA, visualization and file-generation tasks over
generated xlsx/csv/docx inputs, each reference answer computed from the data written.

Output: `out/tasks.jsonl` and `out/inputs/<task-id>/...`; reference files for file-generation
tasks under `out/reference/<task-id>/`. One random.Random(seed) drives everything, so one seed
gives byte-identical files.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from openpyxl import Workbook

from deskbench.generate.office import save_workbook
from deskbench.tracks.analytics.generate.data import (
    CATEGORIES,
    MONTHS,
    QUARTERS,
    Order,
    SalesBook,
    make_orders,
    make_sales,
    make_store_sales,
    write_memo,
    write_orders_csv,
    write_sales_workbook,
    write_store_workbook,
)
from deskbench.tracks.analytics.tasks import (
    AnalyticsTask,
    ChartSeries,
    ChartSpec,
    ReferenceFile,
    SheetSpec,
    difficulty_level,
    write_tasks,
)


@dataclass
class AnalyticsReport:
    out: Path
    tasks: int
    by_category: dict[str, int]
    by_difficulty: dict[str, int]
    files: int


@dataclass
class _Job:
    rng: random.Random
    task_id: str
    out: Path

    def path(self, name: str) -> tuple[Path, str]:
        """(absolute path, path relative to out) for an input file of this task."""
        rel = f"inputs/{self.task_id}/{name}"
        return self.out / rel, rel

    def reference(self, name: str) -> tuple[Path, str]:
        rel = f"reference/{self.task_id}/{name}"
        return self.out / rel, rel


def _sales(job: _Job) -> tuple[SalesBook, str]:
    year = job.rng.choice((2023, 2024, 2025))
    book = make_sales(job.rng, year)
    path, rel = job.path(f"regional_sales_fy{year}.xlsx")
    write_sales_workbook(book, path)
    return book, rel


def qa_quarter_total(job: _Job) -> AnalyticsTask:
    book, rel = _sales(job)
    q = job.rng.randrange(4)
    total_k = sum(book.revenue_k[r][q] for r in book.regions)
    crore = round(total_k * 1000 / 1e7, 2)
    return AnalyticsTask(
        id=job.task_id, category="qa", inputs=[rel], difficulty_steps=5, template="qa_quarter_total",
        instruction=f"Using the workbook, what was the total revenue of all regions in {QUARTERS[q]}, "
        "in INR crore? Give the figure rounded to 2 decimals.",
        params={"quarter": QUARTERS[q]}, answer=f"{crore:.2f}", answer_value=crore,
        answer_unit="INR crore",
        computation=f"sum of the {QUARTERS[q]} Revenue (INR '000) column over all regions "
        f"= {total_k:.1f} thousand; x 1,000 / 10^7 = {crore:.2f} crore",
    )


def qa_target_ratio(job: _Job) -> AnalyticsTask:
    book, rel = _sales(job)
    ratios = {
        r: round(sum(book.revenue_k[r]) / 100 / book.targets_lakh[r] * 100, 1)
        for r in book.regions
    }
    best = max(ratios, key=lambda r: (ratios[r], r))
    return AnalyticsTask(
        id=job.task_id, category="qa", inputs=[rel], difficulty_steps=9, template="qa_target_ratio",
        instruction="Which region achieved the highest ratio of full-year revenue to its annual "
        "target? Give the region and the ratio as a percentage with 1 decimal.",
        answer=f"{best} ({ratios[best]:.1f}%)", answer_value=ratios[best], answer_unit="%",
        params={"region": best},
        key_points=[f"region is {best}", f"ratio is {ratios[best]:.1f}%",
                    "revenue (INR thousand) converted to INR lakh before dividing by target"],
        computation="per region: sum of 4 quarterly revenues (INR '000) / 100 = INR lakh; "
        "/ Targets!B (INR lakh) x 100; max over regions",
    )


def _orders_file(job: _Job, n: int, *, european: bool) -> tuple[list[Order], str]:
    orders = make_orders(job.rng, n)
    path, rel = job.path("orders_eu.csv" if european else "orders.csv")
    write_orders_csv(orders, path, european=european)
    return orders, rel


def qa_weighted_price(job: _Job) -> AnalyticsTask:
    orders, rel = _orders_file(job, job.rng.randint(40, 80), european=True)
    cats = sorted({o.category for o in orders})
    cat = job.rng.choice(cats)
    chosen = [o for o in orders if o.category == cat]
    units = sum(o.units or 0 for o in chosen)
    value = round(sum((o.units or 0) * o.unit_price for o in chosen) / units, 2)
    return AnalyticsTask(
        id=job.task_id, category="qa", inputs=[rel], difficulty_steps=7, template="qa_weighted_price",
        instruction=f"What is the units-weighted average unit price (INR, 2 decimals) of the "
        f"{cat} orders in the order file?",
        params={"category": cat}, answer=f"{value:.2f}", answer_value=value, answer_unit="INR",
        computation=f"sum(units x unit_price) / sum(units) over {len(chosen)} {cat} orders",
    )


def qa_revenue_per_rep(job: _Job) -> AnalyticsTask:
    book, rel = _sales(job)
    reps = {r: job.rng.randint(4, 25) for r in book.regions}
    per_rep = {r: round(sum(book.revenue_k[r]) / 100 / reps[r], 2) for r in reps}
    best = max(per_rep, key=lambda r: (per_rep[r], r))
    memo, memo_rel = job.path("headcount_memo.docx")
    write_memo(memo, "Sales headcount by region",
               ["Headcount is the number of full-time sales representatives at year end.",
                "Part-time staff are excluded from this table."],
               [["Region", "Sales reps", "Comment"]]
               + [[r, str(reps[r]), "stable" if reps[r] % 2 else "hiring"] for r in reps])
    return AnalyticsTask(
        id=job.task_id, category="qa", inputs=[rel, memo_rel], difficulty_steps=11,
        template="qa_revenue_per_rep",
        instruction="Combine the sales workbook with the headcount memo: which region had the "
        "highest full-year revenue per sales representative, and what was it in INR lakh per "
        "rep (2 decimals)?",
        params={"region": best}, answer=f"{best} ({per_rep[best]:.2f} lakh per rep)",
        answer_value=per_rep[best], answer_unit="INR lakh per rep",
        computation="annual revenue (INR '000) / 100 / reps from the memo table; max over regions",
    )


def qa_monthly_files(job: _Job) -> AnalyticsTask:
    """14 inputs: twelve monthly order files (mixed dialects), a workbook and a memo."""
    rels: list[str] = []
    orders: list[Order] = []
    for m in range(1, 13):
        month = make_orders(job.rng, job.rng.randint(6, 12), months=(m,), start=m * 100)
        european = job.rng.random() < 0.5
        path, rel = job.path(f"orders_2024_{m:02d}.csv")
        write_orders_csv(month, path, european=european)
        rels.append(rel)
        orders += month
    cancelled = sorted(job.rng.sample([o.order_id for o in orders if o.month >= 7], 4))
    product = job.rng.choice(sorted({o.product for o in orders if o.month >= 7}))
    _, sales_rel = _sales(job)
    memo, memo_rel = job.path("cancellations_memo.docx")
    write_memo(memo, "Cancelled orders, H2", ["The orders below were cancelled after booking "
               "and must be excluded from all volume figures."],
               [["Order", "Reason"]] + [[c, "customer cancellation"] for c in cancelled])
    units: dict[str, int] = {}
    for o in orders:
        if o.month >= 7 and o.product == product and o.order_id not in cancelled:
            units[o.region] = units.get(o.region, 0) + (o.units or 0)
    best = max(units, key=lambda r: (units[r], r))
    return AnalyticsTask(
        id=job.task_id, category="qa", inputs=[*rels, sales_rel, memo_rel], difficulty_steps=14,
        template="qa_monthly_files",
        instruction=f"Using the twelve monthly order files and the cancellations memo, which region "
        f"sold the most units of {product} in H2 (July-December), and how many units?",
        params={"product": product, "region": best}, answer=f"{best} ({units[best]} units)",
        answer_value=float(units[best]), answer_unit="units",
        computation="concatenate monthly files (two CSV dialects), keep months 7-12 and the "
        "product, drop the memo's cancelled orders, sum units by region, take the max",
    )


def viz_region_bar(job: _Job) -> AnalyticsTask:
    book, rel = _sales(job)
    lakh = {r: round(sum(book.revenue_k[r]) / 100, 2) for r in book.regions}
    order = sorted(lakh, key=lambda r: (-lakh[r], r))
    return AnalyticsTask(
        id=job.task_id, category="visualization", inputs=[rel], difficulty_steps=6,
        template="viz_region_bar",
        instruction="Draw a bar chart of full-year revenue by region in INR lakh, sorted from "
        "highest to lowest, with a title and labelled axes.",
        chart=ChartSpec(chart_type="bar", x_axis="Region", y_axis="Revenue (INR lakh)",
                        unit="INR lakh", order="descending",
                        series=[ChartSeries(name="Revenue", labels=order,
                                            values=[lakh[r] for r in order])]),
        key_points=["chart type is a bar chart", f"bars in order: {', '.join(order)}",
                    *[f"{r}: {lakh[r]:.2f} INR lakh" for r in order],
                    "y-axis labelled in INR lakh (not thousand)"],
    )


def viz_monthly_line(job: _Job) -> AnalyticsTask:
    orders, rel = _orders_file(job, job.rng.randint(80, 140), european=False)
    cats = job.rng.sample(sorted({o.category for o in orders}), 2)
    series = []
    for cat in cats:
        vals = [float(sum(o.units or 0 for o in orders if o.category == cat and o.month == m))
                for m in range(1, 13)]
        series.append(ChartSeries(name=cat, labels=list(MONTHS), values=vals))
    return AnalyticsTask(
        id=job.task_id, category="visualization", inputs=[rel], difficulty_steps=8,
        template="viz_monthly_line",
        instruction=f"Plot a line chart of monthly units sold for the categories {cats[0]} and "
        f"{cats[1]} (one line each, January to December).",
        chart=ChartSpec(chart_type="line", x_axis="Month", y_axis="Units", order="chronological",
                        series=series),
        key_points=["chart type is a line chart", "two series, one per category, with a legend",
                    "x-axis runs Jan to Dec",
                    *[f"{s.name}: " + ", ".join(f"{m} {v:g}" for m, v in zip(MONTHS, s.values,
                                                                         strict=True))
                      for s in series]],
    )


def viz_category_pie(job: _Job) -> AnalyticsTask:
    orders, rel = _orders_file(job, job.rng.randint(40, 90), european=True)
    revenue = {c: sum((o.units or 0) * o.unit_price for o in orders if o.category == c)
               for c in CATEGORIES}
    revenue = {c: v for c, v in revenue.items() if v > 0}
    total = sum(revenue.values())
    share = {c: round(v / total * 100, 1) for c, v in revenue.items()}
    labels = sorted(share, key=lambda c: (-share[c], c))
    return AnalyticsTask(
        id=job.task_id, category="visualization", inputs=[rel], difficulty_steps=5,
        template="viz_category_pie",
        instruction="Make a pie chart of revenue share by product category (revenue = units x "
        "unit price), with percentage labels to 1 decimal.",
        chart=ChartSpec(chart_type="pie", unit="%", order="descending",
                        series=[ChartSeries(name="Revenue share", labels=labels,
                                            values=[share[c] for c in labels])]),
        key_points=["chart type is a pie chart", *[f"{c}: {share[c]:.1f}%" for c in labels],
                    "slices labelled with percentages"],
    )


def viz_city_bar_cjk(job: _Job) -> AnalyticsTask:
    data = make_store_sales(job.rng)
    path, rel = job.path("门店销售.xlsx")
    write_store_workbook(data, path)
    totals = {c: round(sum(v for city, _, v in data.rows if city == c), 2) for c in data.cities}
    order = sorted(totals, key=lambda c: (-totals[c], c))
    return AnalyticsTask(
        id=job.task_id, category="visualization", inputs=[rel], difficulty_steps=5,
        template="viz_city_bar_cjk",
        instruction="按城市汇总销售额（万元），画一张从高到低排序的柱状图，横轴为城市（中文标签），纵轴为销售额（万元），并加上标题。"
        " (Bar chart of total sales by city in 10k CNY, highest first, Chinese city labels on the x-axis, with a title.)",
        chart=ChartSpec(chart_type="bar", x_axis="城市", y_axis="销售额（万元）", unit="万元",
                        order="descending",
                        series=[ChartSeries(name="销售额", labels=order, values=[totals[c] for c in order])]),
        key_points=["chart type is a bar chart", f"bars in order: {', '.join(order)}",
                    *[f"{c}: {totals[c]:.2f} 万元" for c in order],
                    "city labels are legible Chinese characters (no empty boxes)"],
    )


SUMMARY_COLUMNS = ["Region", "Total Units", "Total Revenue (INR lakh)", "Target (INR lakh)",
                   "Attainment %"]


def file_region_summary(job: _Job) -> AnalyticsTask:
    book, rel = _sales(job)
    rows: list[tuple[str, int, float, float, float]] = []  # region, units, revenue lakh, target, attainment
    for r in book.regions:
        lakh = round(sum(book.revenue_k[r]) / 100, 2)
        target = book.targets_lakh[r]
        rows.append((r, sum(book.units[r]), lakh, target, round(lakh / target * 100, 1)))
    rows.sort(key=lambda row: (-row[2], row[0]))
    wb = Workbook()
    ws = wb.active
    ws.title = "Summary"
    ws.append(SUMMARY_COLUMNS)
    for row in rows:
        ws.append(row)
    path, ref_rel = job.reference("region_summary.xlsx")
    save_workbook(wb, path)
    return AnalyticsTask(
        id=job.task_id, category="file_generation", inputs=[rel], difficulty_steps=9,
        template="file_region_summary",
        instruction="Create region_summary.xlsx with one sheet named Summary and the columns "
        + ", ".join(SUMMARY_COLUMNS) + ": one row per region, revenue converted to INR lakh (2 "
        "decimals), attainment = revenue / target x 100 (1 decimal), sorted by revenue, highest first.",
        reference_file=ReferenceFile(path=ref_rel, output_name="region_summary.xlsx",
                                     sheets=[SheetSpec(name="Summary", columns=SUMMARY_COLUMNS,
                                                       rows=len(rows))]),
        key_points=["sheet Summary with the five columns in order", "revenue in INR lakh",
                    "sorted by Total Revenue descending"],
    )


def file_clean_orders(job: _Job) -> AnalyticsTask:
    orders = make_orders(job.rng, job.rng.randint(30, 60))
    for o in job.rng.sample(orders, 3):
        o.units = None
    dupes = [Order(**{**o.__dict__}) for o in job.rng.sample(orders, 4)]
    for d in dupes:
        d.units = (d.units or 0) + 1  # a later duplicate row that disagrees: keep the first
    raw = orders + dupes
    path, rel = job.path("orders_raw.csv")
    write_orders_csv(raw, path, european=True)
    seen: dict[str, Order] = {}
    for o in raw:
        seen.setdefault(o.order_id, o)
    clean = sorted(seen.values(), key=lambda o: o.order_id)
    wb = Workbook()
    ws = wb.active
    ws.title = "Orders"
    ws.append(list(_ORDER_COLUMNS))
    for o in clean:
        ws.append([o.order_id, o.date, o.region, o.product, o.category, o.units or 0, o.unit_price])
    tot = wb.create_sheet("Category Totals")
    tot.append(["Category", "Units", "Revenue (INR)"])
    for cat in sorted({o.category for o in clean}):
        sel = [o for o in clean if o.category == cat]
        tot.append([cat, sum(o.units or 0 for o in sel),
                    round(sum((o.units or 0) * o.unit_price for o in sel), 2)])
    ref, ref_rel = job.reference("orders_clean.xlsx")
    save_workbook(wb, ref)
    return AnalyticsTask(
        id=job.task_id, category="file_generation", inputs=[rel], difficulty_steps=10,
        template="file_clean_orders",
        instruction="Clean the order file into orders_clean.xlsx: sheet Orders with the original "
        "columns, duplicate order_id rows removed (keep the first), blank units set to 0, sorted "
        "by order_id, prices as numbers; and sheet Category Totals with columns Category, Units, "
        "Revenue (INR) (revenue = units x unit_price, 2 decimals), categories A-Z.",
        reference_file=ReferenceFile(
            path=ref_rel, output_name="orders_clean.xlsx",
            sheets=[SheetSpec(name="Orders", columns=list(_ORDER_COLUMNS), rows=len(clean)),
                    SheetSpec(name="Category Totals", columns=["Category", "Units", "Revenue (INR)"],
                              rows=tot.max_row - 1)]),
        key_points=[f"{len(raw) - len(clean)} duplicate rows removed, first kept",
                    "blank units become 0", "file read as latin-1 with ';' and decimal commas"],
    )


_ORDER_COLUMNS = ("order_id", "order_date", "region", "product", "category", "units", "unit_price")

TEMPLATES: tuple[Callable[[_Job], AnalyticsTask], ...] = (
    qa_quarter_total, viz_region_bar, file_region_summary, qa_target_ratio, viz_monthly_line,
    file_clean_orders, qa_weighted_price, viz_category_pie, qa_revenue_per_rep, qa_monthly_files,
    viz_city_bar_cjk,
)


def generate_analytics(out: Path, *, tasks: int, seed: int) -> AnalyticsReport:
    """`tasks` analytics tasks cycling through TEMPLATES, all from one random.Random(seed)."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    made = [TEMPLATES[i % len(TEMPLATES)](_Job(rng, f"an-{i + 1:04d}", out)) for i in range(tasks)]
    write_tasks(out / "tasks.jsonl", made)
    by_cat: dict[str, int] = {}
    by_diff: dict[str, int] = {}
    for t in made:
        by_cat[t.category] = by_cat.get(t.category, 0) + 1
        level = difficulty_level(t.difficulty_steps)
        by_diff[level] = by_diff.get(level, 0) + 1
    files = sum(1 for p in out.rglob("*") if p.is_file())
    return AnalyticsReport(out=out, tasks=len(made), by_category=by_cat, by_difficulty=by_diff,
                           files=files)
