"""The data behind generated analytics tasks, and the files that carry it.

Files are deliberately awkward in the ways real desk files are: a workbook with a merged title,
two header rows with merged quarter groups and units that differ between sheets (revenue in
INR thousand, targets in INR lakh); CSVs that are semicolon-delimited, latin-1 encoded and
written with decimal commas, or plain; a docx memo whose table carries part of the data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from openpyxl import Workbook
from openpyxl.styles import Alignment, Font

from deskbench.generate.office import (
    add_table,
    decimal_comma,
    new_docx,
    save_docx,
    save_workbook,
    write_csv,
)

REGIONS = ("North", "South", "East", "West", "Central", "North-East")
QUARTERS = ("Q1", "Q2", "Q3", "Q4")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
PRODUCTS: tuple[tuple[str, str, float], ...] = (
    ("Café Crème", "Beverages", 180.0),
    ("Müsli Crunch", "Breakfast", 240.0),
    ("Pâté Rustique", "Deli", 420.0),
    ("Crème Brûlée", "Desserts", 150.0),
    ("Jalapeño Dip", "Deli", 210.0),
    ("Açaí Bowl", "Breakfast", 320.0),
    ("Smörgås Bread", "Bakery", 90.0),
    ("Crêpe Mix", "Bakery", 130.0),
)
"""(product, category, list price in INR): names need latin-1 to survive a wrong decode."""
CATEGORIES = tuple(sorted({c for _, c, _ in PRODUCTS}))
ORDER_HEADER = ("order_id", "order_date", "region", "product", "category", "units", "unit_price")


@dataclass
class SalesBook:
    """Quarterly units and revenue (INR thousand) per region, and annual targets (INR lakh)."""

    year: int
    regions: list[str]
    units: dict[str, list[int]]
    revenue_k: dict[str, list[float]]
    targets_lakh: dict[str, float]


@dataclass
class Order:
    order_id: str
    month: int  # 1..12
    day: int
    region: str
    product: str
    category: str
    units: int | None  # None: left blank in the file
    unit_price: float

    @property
    def date(self) -> str:
        return f"{self.year}-{self.month:02d}-{self.day:02d}"

    year: int = 2024


def make_sales(rng: random.Random, year: int) -> SalesBook:
    regions = rng.sample(REGIONS, rng.randint(4, 6))
    units: dict[str, list[int]] = {}
    revenue: dict[str, list[float]] = {}
    targets: dict[str, float] = {}
    for region in regions:
        base = rng.randint(8000, 40000)
        price = rng.uniform(180.0, 420.0)
        units[region] = [max(50, int(base * rng.uniform(0.7, 1.4))) for _ in QUARTERS]
        revenue[region] = [round(u * price * rng.uniform(0.95, 1.05) / 1000, 1) for u in units[region]]
        annual_lakh = sum(revenue[region]) / 100
        targets[region] = round(annual_lakh * rng.uniform(0.85, 1.2), 2)
    return SalesBook(year, regions, units, revenue, targets)


def write_sales_workbook(book: SalesBook, path: Path) -> Path:
    """Sheet Revenue: merged title, two header rows (quarter groups over Units / Revenue), one
    row per region, a units note; sheet Targets: annual targets in INR lakh."""
    wb = Workbook()
    ws = wb.active
    ws.title = "Revenue"
    last_col = 1 + 2 * len(QUARTERS)
    ws.cell(1, 1, f"Regional sales FY{book.year} (revenue in INR thousand)").font = Font(bold=True)
    ws.merge_cells(start_row=1, start_column=1, end_row=1, end_column=last_col)
    ws.cell(2, 1, "Region")
    ws.merge_cells(start_row=2, start_column=1, end_row=3, end_column=1)
    for q, quarter in enumerate(QUARTERS):
        col = 2 + 2 * q
        ws.cell(2, col, quarter).alignment = Alignment(horizontal="center")
        ws.merge_cells(start_row=2, start_column=col, end_row=2, end_column=col + 1)
        ws.cell(3, col, "Units")
        ws.cell(3, col + 1, "Revenue (INR '000)")
    for r, region in enumerate(book.regions):
        ws.cell(4 + r, 1, region)
        for q in range(len(QUARTERS)):
            ws.cell(4 + r, 2 + 2 * q, book.units[region][q])
            ws.cell(4 + r, 3 + 2 * q, book.revenue_k[region][q])
    note_row = 5 + len(book.regions)
    ws.cell(note_row, 1, "Note: revenue in INR thousand; targets (sheet Targets) in INR lakh.")
    tg = wb.create_sheet("Targets")
    tg.cell(1, 1, f"Annual revenue targets FY{book.year}")
    tg.cell(2, 1, "Region")
    tg.cell(2, 2, "Target (INR lakh)")
    for r, region in enumerate(book.regions):
        tg.cell(3 + r, 1, region)
        tg.cell(3 + r, 2, book.targets_lakh[region])
    return save_workbook(wb, path)


def make_orders(
    rng: random.Random, n: int, *, months: tuple[int, ...] = tuple(range(1, 13)), start: int = 1
) -> list[Order]:
    regions = rng.sample(REGIONS, 4)
    orders = []
    for i in range(n):
        product, category, price = rng.choice(PRODUCTS)
        orders.append(
            Order(
                order_id=f"SO-{start + i:05d}",
                month=rng.choice(months),
                day=rng.randint(1, 28),
                region=rng.choice(regions),
                product=product,
                category=category,
                units=rng.randint(1, 60),
                unit_price=round(price * rng.uniform(0.8, 1.2), 2),
            )
        )
    orders.sort(key=lambda o: (o.month, o.day, o.order_id))
    return orders


def write_orders_csv(orders: list[Order], path: Path, *, european: bool) -> Path:
    """European: semicolon-delimited, latin-1, decimal commas. Else comma, UTF-8, dots."""
    rows: list[list[str]] = [list(ORDER_HEADER)]
    for o in orders:
        units = "" if o.units is None else str(o.units)
        price = decimal_comma(o.unit_price) if european else f"{o.unit_price:.2f}"
        rows.append([o.order_id, o.date, o.region, o.product, o.category, units, price])
    if european:
        return write_csv(path, rows, delimiter=";", encoding="latin-1")
    return write_csv(path, rows)


def write_memo(path: Path, title: str, paragraphs: list[str], table: list[list[str]]) -> Path:
    """A docx memo: heading, paragraphs, then the table that carries the data."""
    doc = new_docx()
    doc.add_heading(title, level=1)
    for text in paragraphs:
        doc.add_paragraph(text)
    add_table(doc, table)
    doc.add_paragraph("Prepared by the regional finance team.")
    return save_docx(doc, path)


CITIES = ("北京", "上海", "广州", "深圳", "成都", "杭州", "武汉", "西安")
"""Chinese city names: AIDABench's most common chart failure is CJK labels drawn without a font
that has the glyphs (its §4.4 and Appendix I.2)."""


@dataclass
class StoreSales:
    cities: list[str]
    rows: list[tuple[str, str, float]]  # (city, store, sales in 10k CNY)


def make_store_sales(rng: random.Random) -> StoreSales:
    cities = rng.sample(CITIES, rng.randint(4, 6))
    rows = []
    for city in cities:
        for n in range(1, rng.randint(2, 4) + 1):
            rows.append((city, f"{city}{n}号店", round(rng.uniform(20, 160), 2)))
    rng.shuffle(rows)
    return StoreSales(cities=cities, rows=rows)


def write_store_workbook(data: StoreSales, path: Path) -> Path:
    """One sheet, Chinese headers: city, store, sales (10k CNY)."""
    wb = Workbook()
    ws = wb.active
    ws.title = "门店销售"
    ws.append(["城市", "门店", "销售额（万元）"])
    for row in data.rows:
        ws.append(list(row))
    return save_workbook(wb, path)
