"""Recompute a generated package's golden figures from its input files alone, and write
hand-made responses (with their output files) that are correct or fall into chosen traps."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

from docx import Document as DocxDocument
from openpyxl import Workbook, load_workbook
from pptx import Presentation

from deskbench.generate.demo import bundled_dir
from deskbench.tracks.deliverables.tasks import DeliverableTask


def bundled_packages(root: Path, *names: str) -> Path:
    """A copy of the named bundled deliverables packages (deskbench's demo bundle) in `root`, for a
    run to write beside: the bundle itself stays untouched."""
    for name in names:
        shutil.copytree(bundled_dir() / "deliverables" / name, root / name)
    return root


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


def best_plan(c: list[float], hours: list[list[float]], cap: list[float], *, integral: bool = True,
              near: float = 0.0) -> tuple[tuple[float, ...], float, int]:
    """max c.x subject to hours @ x <= cap, x >= 0: by enumerating every integer plan (no solver),
    or by scipy's LP solver (linprog, not the generator's milp) when not integral. Also how many
    integer plans earn within `near` of the maximum (the optimum itself included)."""
    if not integral:
        from scipy.optimize import linprog

        res = linprog([-v for v in c], A_ub=hours, b_ub=cap, bounds=[(0, None)] * len(c), method="highs")
        assert res.success
        return tuple(float(v) for v in res.x), -float(res.fun), 1
    plans: list[tuple[float, tuple[float, ...]]] = []

    def walk(i: int, left: list[float], plan: tuple[float, ...]) -> None:
        if i == len(c):
            plans.append((sum(a * b for a, b in zip(c, plan, strict=True)), plan))
            return
        used = [hours[d][i] for d in range(len(cap))]
        top = min((int(left[d] // used[d]) for d in range(len(cap)) if used[d] > 0), default=0)
        for n in range(top + 1):
            walk(i + 1, [left[d] - n * used[d] for d in range(len(cap))], (*plan, float(n)))

    walk(0, list(cap), ())
    total, plan = max(plans)
    return plan, total, sum(t >= total - near for t, _ in plans)


LDP_INDUSTRIES = ("Aerospace", "Automotive", "Defense", "Electronics")


def _ldp(task: DeliverableTask, d: Path) -> dict[str, Any]:
    times = [r for r in _rows(d / "vendor_time_per_unit.xlsx", "Time per Unit")[1:] if r and r[1]]
    deps = list(dict.fromkeys(r[1] for r in times))
    low = {(r[0], r[1]): min(r[2:]) for r in times}
    head, *hist = _rows(d / "historical_contribution.xlsx", "Contribution per Unit")
    cols = [i for i, h in enumerate(head) if str(h).split(" ")[0] in ("2010", "2011", "2012", "2013")]
    draft_col = next(i for i, h in enumerate(head) if "draft" in str(h))
    c = {r[0]: sum(r[i] for i in cols) / len(cols) for r in hist}
    draft = {r[0]: r[draft_col] for r in hist}
    cap = dict.fromkeys(deps, 0.0)
    lazy_cap = dict.fromkeys(deps, 0.0)
    for dep, _sub, amount, unit in _rows(d / "department_capacity.xlsx", "Sub-Activities")[1:]:
        cap[dep] += amount / 60 if unit == "minutes" else amount
        lazy_cap[dep] += amount
    bar = _num(r"qualify as Go is USD ([\d,]+)", task.prompt)

    def plan(hours: dict[tuple[str, str], float], caps: dict[str, float], integral: bool = True,
             contribution: dict[str, float] = c) -> dict[str, Any]:
        coef = [contribution[i] for i in LDP_INDUSTRIES]
        units, total, near = best_plan(coef, [[hours[(i, dep)] for i in LDP_INDUSTRIES] for dep in deps],
                                       [caps[dep] for dep in deps], integral=integral, near=1.0)
        return {"units": units, "total": total, "near": near, "decision": "GO" if total >= bar else "NO GO"}

    right = plan(low, cap)
    lures = {"stale_placeholder": plan(low, cap, contribution=draft), "unit_mismatch": plan(low, lazy_cap),
             "default_assumption": plan(low, cap, integral=False)}
    flipping = [v["decision"] for v in lures.values() if v["decision"] != right["decision"]]
    return {"right": right, "lures": lures, "bar": bar, "decision": right["decision"],
            "lazy_decision": flipping[0] if flipping else right["decision"]}


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


def ldp_response(task: DeliverableTask, units: tuple[float, ...], total: float, decision: str, out: Path) -> str:
    """An LDP answer stating a plan, its total and a decision, in the text and in the required docx
    (its sections as headings, the figures under the second)."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"Maximum total contribution: USD {total:,.0f}",
             *(f"{i} units: {u:g}" for i, u in zip(LDP_INDUSTRIES, units, strict=True))]
    doc = DocxDocument()
    for n, section in enumerate(task.required_outputs[0].sections):
        doc.add_heading(section, level=2)
        for line in lines if n == 1 else [f"DECISION: {decision}"] if n == 2 else ["Integer program."]:
            doc.add_paragraph(line)
    doc.save(str(out / task.required_outputs[0].name))
    return "## Optimal plan\n" + "\n".join(lines) + f"\n\nDECISION: {decision}\n"


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
    if cls == "LDP":  # falls: at most one trap kind (the lure of that trap)
        p = v["lures"][next(iter(falls))] if fall else v["right"]
        return ldp_response(task, p["units"], p["total"], p["decision"], out)
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
