"""Finance-flavoured deliverables scenarios: FSP (freight sourcing, stale placeholder) and SCP
(cost plan in strict JSON, footnote overriding the headline cost); LDP, an integer program, is
ldp.py. Golden answers are computed here from the same numbers written into the input files."""

from __future__ import annotations

import random
from pathlib import Path

from openpyxl import Workbook

from deskbench.generate.office import new_docx, save_docx, save_workbook, write_csv
from deskbench.tracks.deliverables.generate.common import Package, lure_pattern, money
from deskbench.tracks.deliverables.tasks import (
    AuthorizedSource,
    DeliverableTask,
    Golden,
    GoldenValue,
    table19_rubric,
)

PORTS = ("Shenzhen", "Shanghai", "Ningbo", "Busan", "Singapore", "Chennai", "Mundra")
EU_PORTS = ("Rotterdam", "Hamburg", "Antwerp", "Felixstowe", "Valencia")


def fsp_freight(rng: random.Random, task_id: str, pkg: Path) -> DeliverableTask:
    """Either decision can be right (drawn per package). The stale draft placeholder fuel price
    sits on the other side of the final price, so a response that uses it gets the spot cost on
    the wrong side of the fixed cost: below it (a lower placeholder) when fixed is right, above
    it (a higher placeholder) when spot is right."""
    sign_fixed = rng.random() < 0.5
    lanes = [(o, d) for o in rng.sample(PORTS, 3) for d in rng.sample(EU_PORTS, 2)]
    origin, dest = lanes[rng.randrange(len(lanes))]
    lane = f"{origin} - {dest}"
    teu = rng.randrange(3000, 7000, 50)
    base_rate = rng.randrange(900, 1400, 10)
    fuel_per_teu = rng.choice((1.4, 1.6, 1.8, 2.0))
    final_price = float(rng.randrange(450, 750, 5))
    offset = 50.0 * rng.randrange(2, 6)  # the placeholder: a round figure about 100-250 away
    placeholder = round((final_price - offset if sign_fixed else final_price + offset) / 50) * 50.0
    fixed_rate = round(base_rate + fuel_per_teu * (placeholder + rng.uniform(0.35, 0.65)
                                                   * (final_price - placeholder)), -1)
    fixed = teu * fixed_rate
    base = teu * base_rate
    fuel = round(teu * fuel_per_teu * final_price, 2)
    spot = base + fuel
    lazy_fuel = round(teu * fuel_per_teu * placeholder, 2)
    lazy_spot = base + lazy_fuel
    if sign_fixed:  # the placeholder is lower: the lure makes spot look cheaper than fixed
        assert placeholder < final_price and lazy_spot < fixed < spot
    else:  # the placeholder is higher: the lure makes spot look dearer than fixed
        assert placeholder > final_price and spot < fixed < lazy_spot
    decision = "DECISION: SIGN FIXED CONTRACT" if sign_fixed else "DECISION: USE SPOT MARKET"
    lure_decision = "DECISION: USE SPOT MARKET" if sign_fixed else "DECISION: SIGN FIXED CONTRACT"
    verdict = "sign the fixed contract" if sign_fixed else "use the spot market"

    write_csv(pkg / "lane_volumes.csv", [["lane", "origin", "destination", "annual_teu", "note"]]
              + [[f"{o} - {d}", o, d, str(teu if (o, d) == (origin, dest) else
                                             rng.randrange(800, 9000, 50)), "FY2026 plan"]
                 for o, d in lanes])
    wb = Workbook()
    ws = wb.active
    ws.title = "Fixed Contract"
    ws.append(["Lane", "Fixed rate (USD per TEU, all-in)"])
    for o, d in lanes:
        ws.append([f"{o} - {d}", fixed_rate if (o, d) == (origin, dest) else
                   rng.randrange(1500, 3200, 10)])
    sp = wb.create_sheet("Spot Metrics")
    sp.append(["Lane", "Base spot rate (USD per TEU, ex fuel)", "Fuel burn (tons per TEU)"])
    for o, d in lanes:
        own = (o, d) == (origin, dest)
        sp.append([f"{o} - {d}", base_rate if own else rng.randrange(800, 1600, 10),
                   fuel_per_teu if own else rng.choice((1.2, 1.5, 1.7, 2.1))])
    save_workbook(wb, pkg / "carrier_rates.xlsx")
    draft = Workbook()
    dw = draft.active
    dw.title = "Draft"
    dw.append(["Freight sourcing policy 2026 - DRAFT v1 (superseded by v2)"])
    dw.append(["Marine fuel price (USD per ton)", f"{placeholder:.2f} (placeholder, to be updated)"])
    dw.append(["Fuel index", "TBD"])
    save_workbook(draft, pkg / "fuel_policy_draft_v1.xlsx")
    doc = new_docx()
    doc.add_heading("Freight Sourcing Policy 2026 - v2 (final)", level=1)
    doc.add_paragraph("This version supersedes draft v1 in full. Placeholder values in the draft "
                      "must not be used.")
    doc.add_paragraph(f"Marine fuel reference price for 2026 sourcing decisions: USD "
                      f"{final_price:.2f} per ton (VLSFO 20-port average, fixed by the "
                      "procurement committee).")
    doc.add_paragraph("Spot fuel surcharge = annual TEU x fuel burn per TEU x reference price.")
    save_docx(doc, pkg / "fuel_policy_final_v2.docx")

    p = Package()
    p.output("zbb_memo.docx", "docx", ["Annual TEU Volume", "Fixed Contract Cost",
                                       "Spot Market Cost", "Recommendation"])
    p.verify("numeric", "fixed_cost", "Total Fixed Contract Cost",
             label="Total Fixed Contract Cost", expected=fixed, rel_tol=1e-4)
    v_fuel = p.verify("numeric", "fuel_surcharge", "Spot fuel surcharge at the final policy price",
                      label="Spot Market Fuel Surcharge", expected=fuel, rel_tol=1e-4)
    v_spot = p.verify("numeric", "spot_total", "Spot all-in cost at the final policy price",
                      label="Spot Market All-In Cost", expected=spot, rel_tol=1e-4)
    v_lure = p.verify("regex_absent", "no_placeholder_total", "The placeholder-based totals are "
                      "not given as the answer",
                      pattern=f"(?:{lure_pattern('Fuel Surcharge', lazy_fuel, 0)})|"
                      f"(?:{lure_pattern('All-In Cost', lazy_spot, 0)})")
    v_dec = p.verify("decision_line", "decision", "Exact decision line", expected=decision)
    p.verify("llm_check", "cites_final_policy", "Judged", criterion="The memo says the v2 policy "
             "supersedes the draft placeholder and cites it for the fuel price.")
    p.trap("stale_fuel_placeholder", "stale_placeholder",
           f"The draft policy holds a placeholder fuel price of USD {placeholder:.2f}, superseded "
           f"by USD {final_price:.2f} in the final v2 policy.",
           lure=f"fuel surcharge {money(lazy_fuel)}, spot {money(lazy_spot)}, {lure_decision}",
           location="fuel_policy_draft_v1.xlsx Draft!B2", verifiers=[v_lure, v_spot, v_fuel, v_dec])
    return DeliverableTask(
        id=task_id, title=f"Fixed vs spot freight for {lane}", prompt_class="FSP",
        corpus_discipline="closed",
        prompt=f"A shipper must decide whether to sign the fixed annual contract for the {lane} "
        "lane or buy on the spot market. Using the four files: find the lane's annual TEU volume; "
        "compute the Total Fixed Contract Cost; the Spot Market Base Cost (excluding fuel); the "
        "Spot Market Fuel Surcharge (read the fuel policy carefully for the correct price); and "
        "the Spot Market All-In Cost. Write each on its own line as 'Label: USD value'. Produce "
        "zbb_memo.docx with sections Annual TEU Volume, Fixed Contract Cost, Spot Market Cost, "
        "Recommendation, and end your response with exactly one line `DECISION: SIGN FIXED "
        "CONTRACT` or `DECISION: USE SPOT MARKET`.",
        inputs=["lane_volumes.csv", "carrier_rates.xlsx", "fuel_policy_draft_v1.xlsx",
                "fuel_policy_final_v2.docx"],
        authorized_sources=[AuthorizedSource(name=n) for n in ("lane_volumes.csv", "carrier_rates.xlsx",
                                                               "fuel_policy_draft_v1.xlsx",
                                                               "fuel_policy_final_v2.docx")],
        required_outputs=p.outputs,
        golden=Golden(answer=f"Spot all-in USD {money(spot)} {'>' if sign_fixed else '<'} fixed "
                      f"USD {money(fixed)}: {verdict}.", decision=decision,
                      values=[GoldenValue(name="annual_teu", value=teu),
                              GoldenValue(name="fixed_cost_usd", value=fixed),
                              GoldenValue(name="spot_base_usd", value=base),
                              GoldenValue(name="fuel_surcharge_usd", value=fuel),
                              GoldenValue(name="spot_all_in_usd", value=spot)]),
        solution_logic=[f"Lane {lane}: annual volume {teu} TEU (lane_volumes.csv).",
                        f"Fixed: {teu} x {fixed_rate:g} = {money(fixed)}.",
                        f"Spot base: {teu} x {base_rate} = {money(base)}.",
                        f"Fuel: {teu} x {fuel_per_teu} t x {final_price:.2f} (v2 policy, not the "
                        f"draft placeholder) = {money(fuel, 2)}.",
                        f"Spot all-in {money(spot, 2)} {'>' if sign_fixed else '<'} fixed "
                        f"{money(fixed)} -> {verdict}."],
        lazy_ai_test=f"Uses the USD {placeholder:.0f} draft placeholder: fuel {money(lazy_fuel)}, "
        f"spot {money(lazy_spot)} {'<' if sign_fixed else '>'} fixed, and recommends "
        f"{'the spot market' if sign_fixed else 'the fixed contract'}.",
        expert_test="Treats v2 as superseding the draft, prices fuel at the final reference "
        f"price and recommends to {verdict}.",
        traps=p.traps, verifiers=p.specs(), rubric=table19_rubric(),
    )


def scp_cost_json(rng: random.Random, task_id: str, pkg: Path) -> DeliverableTask:
    """Either decision can be right (drawn per package). The plan is accepted when the absolute
    savings reach a minimum AND the annual cost after the plan stays within a budget ceiling.
    The reported (headline) unit cost overstates both the savings and the cost after, so when
    REJECT is right the minimum savings sits between the true and the overstated savings (the
    lure accepts), and when ACCEPT is right the ceiling sits between the true and the overstated
    cost after (the lure rejects)."""
    accept = rng.random() < 0.5
    materials = float(rng.randrange(45, 70))
    labour = float(rng.randrange(15, 30))
    overhead = float(rng.randrange(18, 30))
    non_op = float(rng.randrange(5, 10))
    reported = materials + labour + overhead
    operational = reported - non_op
    cut = rng.choice((10, 12, 15))
    volume = rng.randrange(1_200_000, 2_500_000, 50_000)
    reduced = round(operational * (1 - cut / 100), 2)
    before = round(operational * volume / 1e7, 2)
    after = round(reduced * volume / 1e7, 2)
    savings = round(before - after, 2)
    pct = round(savings / before * 100, 2)
    lazy_before = round(reported * volume / 1e7, 2)
    lazy_after = round(round(reported * (1 - cut / 100), 2) * volume / 1e7, 2)
    lazy_savings = round(lazy_before - lazy_after, 2)
    if accept:  # savings clear the minimum either way; the overstated cost after breaks the ceiling
        threshold = round(savings * rng.uniform(0.5, 0.9), 2)
        ceiling = round(after + (lazy_after - after) * rng.uniform(0.3, 0.7), 2)
        assert lazy_savings > savings > threshold and after < ceiling < lazy_after
    else:  # both within the ceiling; only the overstated savings reach the minimum
        threshold = round(savings + (lazy_savings - savings) * rng.uniform(0.3, 0.7), 2)
        ceiling = round(lazy_after * rng.uniform(1.05, 1.25), 2)
        assert savings < threshold < lazy_savings and after < lazy_after < ceiling
    meets = savings >= threshold and after <= ceiling
    lazy_meets = lazy_savings >= threshold and lazy_after <= ceiling
    assert meets == accept and lazy_meets != accept
    wb = Workbook()
    ws = wb.active
    ws.title = "Cost Build"
    ws.append(["Component", "INR per unit"])
    ws.append(["Materials", materials])
    ws.append(["Direct labour", labour])
    ws.append(["Manufacturing overhead (1)", overhead])
    ws.append(["Total reported unit cost", reported])
    ws.append([])
    ws.append(["(1) See Note 4 of the plant finance notes."])
    save_workbook(wb, pkg / "unit_cost_build.xlsx")
    doc = new_docx()
    doc.add_heading("Plant finance notes FY2026", level=1)
    doc.add_paragraph("Note 2: Materials are valued at standard cost.")
    doc.add_paragraph(f"Note 4: Manufacturing overhead includes INR {non_op:g} per unit of "
                      "corporate brand allocation. It is non-operational and excluded from the "
                      "operational cost base.")
    save_docx(doc, pkg / "plant_finance_notes.docx")
    write_csv(pkg / "assumptions.csv", [["assumption", "value"],
                                        ["annual_production_volume_units", str(volume)],
                                        ["cost_reduction_on_operational_base_pct", str(cut)],
                                        ["acceptance_min_absolute_savings_inr_cr", f"{threshold:.2f}"],
                                        ["acceptance_max_annual_cost_after_inr_cr", f"{ceiling:.2f}"]])
    schema = {"cost_analysis": {"unit_cost_reported": "number", "unit_cost_operational": "number",
                                "unit_cost_reduced": "number"},
              "annual_metrics": {"annual_cost_before": "number", "annual_cost_after": "number",
                                 "absolute_savings": "number", "percentage_savings": "number"},
              "decision": {"recommendation": "string", "justification_flag": "string"}}
    rec = "ACCEPT" if accept else "REJECT"
    lure_rec = "REJECT" if accept else "ACCEPT"
    p = Package()
    p.output("cost_plan.json", "json", ["cost_analysis", "annual_metrics", "decision"])
    p.verify("json_strict", "json_schema", "Exact keys, order and types", file="cost_plan.json",
             schema=schema)
    v_op = p.verify("numeric", "unit_cost_operational", "Footnote-corrected operational unit cost",
                    file="cost_plan.json", json_path="cost_analysis.unit_cost_operational",
                    expected=operational, abs_tol=0.005)
    v_sav = p.verify("numeric", "absolute_savings", "Savings on the operational base, INR Cr",
                     file="cost_plan.json", json_path="annual_metrics.absolute_savings",
                     expected=savings, abs_tol=0.011, unit="crore")
    v_after = p.verify("numeric", "annual_cost_after", "Annual cost after the plan, operational "
                       "base, INR Cr", file="cost_plan.json",
                       json_path="annual_metrics.annual_cost_after", expected=after, abs_tol=0.011,
                       unit="crore")
    p.verify("numeric", "percentage_savings", "Percentage savings", file="cost_plan.json",
             json_path="annual_metrics.percentage_savings", expected=pct, abs_tol=0.011)
    v_head = p.verify("regex_absent", "headline_not_operational", "The reported (headline) cost is "
                      "not used as the operational cost", file="cost_plan.json",
                      pattern=rf'"unit_cost_operational"\s*:\s*{reported:g}(?:\.0+)?(?![\d.])')
    v_rec = p.verify("exact_value", "recommendation", "Decision field", file="cost_plan.json",
                     json_path="decision.recommendation", expected=rec)
    v_dec = p.verify("decision_line", "decision", "Decision line in the response",
                     expected=f"DECISION: {rec}")
    p.trap("footnote_overhead", "footnote_override",
           f"The workbook's total unit cost INR {reported:g} includes INR {non_op:g} of "
           "non-operational allocation disclosed only in Note 4.",
           lure=f"unit_cost_operational {reported:g}, savings {lazy_savings:.2f} Cr, annual cost "
                f"after {lazy_after:.2f} Cr, DECISION: {lure_rec}",
           location="unit_cost_build.xlsx footnote (1) -> plant_finance_notes.docx Note 4",
           verifiers=[v_op, v_head, v_sav, v_after, v_rec, v_dec])
    return DeliverableTask(
        id=task_id, title="Manufacturing cost-reduction plan", prompt_class="SCP",
        corpus_discipline="closed",
        prompt=f"Using ONLY the three files, find the true operational manufacturing cost per unit "
        "(the reported total may include adjustments explained elsewhere), apply the "
        f"{cut}% reduction to the operational base only, and write cost_plan.json with exactly "
        "this structure (keys in this order, no extra keys): cost_analysis {unit_cost_reported, "
        "unit_cost_operational, unit_cost_reduced}, annual_metrics {annual_cost_before, "
        "annual_cost_after, absolute_savings, percentage_savings}, decision {recommendation: "
        "ACCEPT or REJECT, justification_flag: MEETS_TARGET or DOES_NOT_MEET_TARGET}. Unit costs "
        "in INR, annual figures in INR crore, all to 2 decimals. ACCEPT only if the absolute "
        "savings are at least the minimum AND the annual cost after the plan is at most the "
        "ceiling given in assumptions.csv; otherwise REJECT. End the response with `DECISION: "
        "ACCEPT` or `DECISION: REJECT`.",
        inputs=["unit_cost_build.xlsx", "plant_finance_notes.docx", "assumptions.csv"],
        required_outputs=p.outputs,
        golden=Golden(answer=f"Operational cost INR {operational:g}; savings INR {savings:.2f} Cr "
                      f"vs minimum {threshold:.2f}, cost after INR {after:.2f} Cr vs ceiling "
                      f"{ceiling:.2f}: {rec}", decision=f"DECISION: {rec}",
                      values=[GoldenValue(name="unit_cost_operational", value=operational),
                              GoldenValue(name="unit_cost_reduced", value=reduced),
                              GoldenValue(name="annual_cost_before", value=before, unit="crore"),
                              GoldenValue(name="annual_cost_after", value=after, unit="crore"),
                              GoldenValue(name="absolute_savings", value=savings, unit="crore"),
                              GoldenValue(name="percentage_savings", value=pct, unit="percent")]),
        solution_logic=[f"Reported {reported:g} - Note 4 allocation {non_op:g} = {operational:g}.",
                        f"Reduced: {operational:g} x {1 - cut / 100:.2f} = {reduced:.2f}.",
                        f"Before: {operational:g} x {volume:,} / 1e7 = {before:.2f} Cr; after "
                        f"{after:.2f} Cr; savings {savings:.2f} Cr ({pct:.2f}%).",
                        f"Savings {savings:.2f} {'>=' if savings >= threshold else '<'} minimum "
                        f"{threshold:.2f}; cost after {after:.2f} <= ceiling {ceiling:.2f} -> "
                        f"{rec}."],
        lazy_ai_test=f"Uses the reported INR {reported:g} and gets "
        + (f"cost after {lazy_after:.2f} Cr > ceiling {ceiling:.2f}" if accept else
           f"savings {lazy_savings:.2f} Cr >= minimum {threshold:.2f}")
        + f", flipping the decision to {lure_rec}, or breaks the JSON envelope.",
        expert_test="Removes the Note 4 allocation, computes on the operational base, "
        f"{'accepts' if accept else 'rejects'} and emits strict JSON in the prescribed key order.",
        traps=p.traps, verifiers=p.specs(), rubric=table19_rubric(),
    )
