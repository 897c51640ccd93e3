"""Recompute a generated package's golden figures from its input files alone, and write
hand-made responses (with their output files) that are correct or fall into chosen traps."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from docx import Document as DocxDocument
from openpyxl import Workbook, load_workbook
from pptx import Presentation

from deskbench.tracks.deliverables.tasks import DeliverableTask


def _rows(path: Path, sheet: str) -> list[tuple[Any, ...]]:
    return [r for r in load_workbook(path, data_only=True)[sheet].iter_rows(values_only=True)]


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def _docx_text(path: Path) -> str:
    doc = DocxDocument(str(path))
    return "\n".join(p.text for p in doc.paragraphs)


def _num(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, pattern
    return float(m.group(1).replace(",", ""))


def recompute(task: DeliverableTask, d: Path) -> dict[str, Any]:
    """Correct and trap-falling figures, from the files (not from task.yaml's golden)."""
    return RECOMPUTE[task.prompt_class](task, d)


def _fsp(task: DeliverableTask, d: Path) -> dict[str, Any]:
    lane = re.search(r"for the (.+?) lane", task.prompt).group(1)  # type: ignore[union-attr]
    teu = int(next(r["annual_teu"] for r in _csv(d / "lane_volumes.csv") if r["lane"] == lane))
    fixed_rate = next(r[1] for r in _rows(d / "carrier_rates.xlsx", "Fixed Contract") if r[0] == lane)
    base_rate, burn = next(r[1:] for r in _rows(d / "carrier_rates.xlsx", "Spot Metrics")
                           if r[0] == lane)
    price = _num(r"USD ([\d.]+) per ton", _docx_text(d / "fuel_policy_final_v2.docx"))
    placeholder = _num(r"^([\d.]+)", str(_rows(d / "fuel_policy_draft_v1.xlsx", "Draft")[1][1]))
    base = teu * base_rate
    out = {"teu": teu, "fixed": teu * fixed_rate, "base": base}
    out["fuel"], out["lazy_fuel"] = teu * burn * price, teu * burn * placeholder
    out["spot"], out["lazy_spot"] = base + out["fuel"], base + out["lazy_fuel"]
    out["decision"] = "SIGN FIXED CONTRACT" if out["spot"] > out["fixed"] else "USE SPOT MARKET"
    out["lazy_decision"] = ("SIGN FIXED CONTRACT" if out["lazy_spot"] > out["fixed"]
                            else "USE SPOT MARKET")
    return out


def _scp(task: DeliverableTask, d: Path) -> dict[str, Any]:
    cost = {r[0]: r[1] for r in _rows(d / "unit_cost_build.xlsx", "Cost Build") if r and r[1]}
    reported = cost["Total reported unit cost"]
    assert reported == cost["Materials"] + cost["Direct labour"] + cost["Manufacturing overhead (1)"]
    non_op = _num(r"includes INR ([\d.]+) per unit", _docx_text(d / "plant_finance_notes.docx"))
    a = {r["assumption"]: float(r["value"]) for r in _csv(d / "assumptions.csv")}
    volume, cut = a["annual_production_volume_units"], a["cost_reduction_on_operational_base_pct"]
    threshold = a["acceptance_min_absolute_savings_inr_cr"]
    ceiling = a["acceptance_max_annual_cost_after_inr_cr"]

    def plan(unit: float) -> dict[str, Any]:
        reduced = round(unit * (1 - cut / 100), 2)
        before, after = round(unit * volume / 1e7, 2), round(reduced * volume / 1e7, 2)
        savings = round(before - after, 2)
        return {"unit_cost_reported": reported, "unit_cost_operational": unit,
                "unit_cost_reduced": reduced, "annual_cost_before": before,
                "annual_cost_after": after, "absolute_savings": savings,
                "percentage_savings": round(savings / before * 100, 2),
                "decision": "ACCEPT" if savings >= threshold and after <= ceiling else "REJECT"}

    right, lazy = plan(reported - non_op), plan(reported)
    return {"right": right, "lazy": lazy, "decision": right["decision"],
            "lazy_decision": lazy["decision"]}


def _ldp(task: DeliverableTask, d: Path) -> dict[str, Any]:
    dom = {r[0]: r[1] for r in _rows(d / "segment_revenue.xlsx", "Domestic")[1:]}
    exp = {r[0]: r[1] for r in _rows(d / "segment_revenue.xlsx", "Export")[1:]}
    vc = {r["segment"]: float(r["variable_cost_pct_of_revenue"]) for r in
          _csv(d / "variable_costs.csv")}
    brief = _docx_text(d / "investment_brief.docx")
    unit = re.search(r"(?:at least|below) INR [\d,.]+ (lakh|crore)", brief).group(1)  # type: ignore[union-attr]
    bar = _num(r"(?:at least|below) INR ([\d,.]+) (?:lakh|crore)", brief)
    shortfall = "is below INR" in brief  # invest only when the contribution falls short of the bar
    per_cr = 100 if unit == "lakh" else 1  # figures are reported in the bar's unit
    rev = {**{s: v / 100 * per_cr for s, v in dom.items()}, **{s: v * per_cr for s, v in exp.items()}}
    total = sum(v * (1 - vc[s] / 100) for s, v in rev.items())
    lazy = sum(v * (1 - vc[s] / 100) for s, v in {**dom, **exp}.items())  # the tables as they stand
    return {"unit": unit, "shortfall": shortfall, "revenue": sum(rev.values()), "total": total, "lazy": lazy,
            "decision": "INVEST" if (total >= bar) != shortfall else "DO NOT INVEST",
            "lazy_decision": "INVEST" if (lazy >= bar) != shortfall else "DO NOT INVEST"}


def _rcp(task: DeliverableTask, d: Path) -> dict[str, Any]:
    rows = {r[0]: r for r in _rows(d / "benchmarks.xlsx", "Benchmarks") if r and r[0]}
    headline = _num(r"([\d.]+)", str(rows["AHT (min)"][2]))
    true_tq = _num(r"true top-quartile AHT for benchmarking is ([\d.]+)",
                   _docx_text(d / "policy_appendix.docx"))
    sites = _csv(d / "site_operations.csv")
    calls = [float(s["calls_handled"]) for s in sites]
    aht = [float(s["aht_min"]) for s in sites]
    fcr = [float(s["fcr_pct"]) for s in sites]
    w = sum(c * a for c, a in zip(calls, aht, strict=True)) / sum(calls)
    w_fcr = sum(c * f for c, f in zip(calls, fcr, strict=True)) / sum(calls)
    return {"w_aht": round(w, 2), "s_aht": round(sum(aht) / len(aht), 2), "true_tq": true_tq,
            "headline": headline, "fcr_gap": round(rows["FCR (%)"][2] - round(w_fcr, 1), 1)}


def _crp(task: DeliverableTask, d: Path) -> dict[str, Any]:
    rows = [r for r in _rows(d / "channel_economics.xlsx", "Channels")[1:] if r and r[2]]
    w = sum(r[2] * r[3] for r in rows) / sum(r[2] for r in rows)
    s = sum(r[3] for r in rows) / len(rows)
    hurdle = _num(r"at least ([\d.]+)%", _docx_text(d / "client_brief.docx"))
    return {"weighted": round(w, 2), "simple": round(s, 2),
            "decision": "GO" if w >= hurdle else "NO GO", "lazy_decision": "GO" if s >= hurdle
            else "NO GO"}


RECOMPUTE = {"FSP": _fsp, "SCP": _scp, "LDP": _ldp, "RCP": _rcp, "CRP": _crp}


def _memo(path: Path, sections: list[str], lines: list[str]) -> None:
    doc = DocxDocument()
    for s in sections:
        doc.add_heading(s, level=2)
        doc.add_paragraph(lines.pop(0) if lines else "See the analysis above.")
    doc.save(str(path))


def respond(task: DeliverableTask, v: dict[str, Any], out: Path, falls: set[str]) -> str:
    """A response (and its output files in `out`) that falls into exactly the traps `falls`."""
    out.mkdir(parents=True, exist_ok=True)
    fall = bool(falls)
    cls = task.prompt_class
    if cls == "FSP":
        fuel, spot = (v["lazy_fuel"], v["lazy_spot"]) if fall else (v["fuel"], v["spot"])
        dec = v["lazy_decision"] if fall else v["decision"]
        lines = [f"Annual TEU Volume: {v['teu']:,}", f"Total Fixed Contract Cost: USD {v['fixed']:,.0f}",
                 f"Spot Market Base Cost: USD {v['base']:,.0f}",
                 f"Spot Market Fuel Surcharge: USD {fuel:,.0f}",
                 f"Spot Market All-In Cost: USD {spot:,.0f}"]
        _memo(out / "zbb_memo.docx", task.required_outputs[0].sections, list(lines))
        return "# ZBB Memo\n\n" + "\n\n".join(lines) + f"\n\n**DECISION: {dec}**\n"
    if cls == "SCP":
        p = v["lazy" if fall else "right"]
        data = {"cost_analysis": {k: p[k] for k in ("unit_cost_reported", "unit_cost_operational",
                                                    "unit_cost_reduced")},
                "annual_metrics": {k: p[k] for k in ("annual_cost_before", "annual_cost_after",
                                                     "absolute_savings", "percentage_savings")},
                "decision": {"recommendation": p["decision"], "justification_flag":
                             "MEETS_TARGET" if p["decision"] == "ACCEPT" else "DOES_NOT_MEET_TARGET"}}
        (out / "cost_plan.json").write_text(json.dumps(data, indent=2))
        return f"Plan written to cost_plan.json.\n\nDECISION: {p['decision']}\n"
    if cls == "LDP":
        total, dec = (v["lazy"], v["lazy_decision"]) if fall else (v["total"], v["decision"])
        wb = Workbook()
        wb.active.title = "Inputs"
        ws = wb.create_sheet("Contribution")
        ws.append(["Segment", f"Contribution (INR {v['unit']})"])
        ws.append(["Total contribution", round(total, 2)])
        wb.create_sheet("Decision").append(["Decision", dec])
        wb.save(out / "contribution_model.xlsx")
        return (f"## Model\nTotal revenue: INR {v['revenue']:,.2f} {v['unit']}\n"
                f"Total contribution: INR {total:,.2f} {v['unit']}\n\nDECISION: {dec}\n")
    if cls == "RCP":
        cur = v["s_aht"] if "unweighted_average" in falls else v["w_aht"]
        tq = v["headline"] if "footnote_override" in falls else v["true_tq"]
        gap = cur - tq
        wb = Workbook()
        ws = wb.active
        ws.title = "Table 1"
        ws.append(["Metric", "Current", "Industry Average", "Top Quartile", "Gap vs Top Quartile"])
        ws.append(["AHT", cur, 6.5, tq, round(gap, 2)])
        wb.save(out / "benchmark_table.xlsx")
        priority = task.golden.decision
        return (f"Current AHT: {cur:.2f} min\nTop Quartile AHT: {tq:.1f} min\n"
                f"AHT gap: {gap:.2f} min\nFCR gap: {v['fcr_gap']:.1f} pp\n\n"
                "## Section A - Top 3 Gaps\nFCR, AHT and service level are the root gaps; cost "
                "per call and NPS are outcomes.\n\n## Section B - Priority Recommendations\n"
                f"AI routing and real-time coaching.\n\n{priority}\n")
    margin, dec = (v["simple"], v["lazy_decision"]) if fall else (v["weighted"], v["decision"])
    prs = Presentation()
    for title in task.required_outputs[0].sections:
        prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = title
    prs.save(str(out / "gtm_onepager.pptx"))
    return (f"Source: Mordor Intelligence extract and client files.\n"
            f"Blended gross margin: {margin:.2f}%\nAssumption: export-only entry.\n\n"
            f"DECISION: {dec}\n")
