"""Operations and strategy deliverables scenarios: RCP (contact-centre benchmarking in a noisy
corpus: a footnote corrects the headline benchmark, and current performance must be weighted
by call volume) and CRP (market entry under a hybrid corpus: the blended margin must be
volume-weighted, and only one external source is authorized)."""

from __future__ import annotations

import random
from pathlib import Path

from openpyxl import Workbook

from deskbench.generate.office import add_table, new_docx, save_docx, save_workbook, write_csv
from deskbench.tracks.deliverables.generate.common import Package, lure_pattern
from deskbench.tracks.deliverables.tasks import (
    AuthorizedSource,
    DeliverableTask,
    Golden,
    GoldenValue,
    table19_rubric,
)

TOP_PRIORITY = ("Top Priority: Implement AI-powered call routing and real-time coaching to "
                "address AHT and FCR gaps, driving cost efficiency and NPS improvement.")
CITIES = ("Pune", "Noida", "Hyderabad", "Kolkata", "Jaipur", "Indore", "Kochi", "Mysuru")


def rcp_contact_centre(rng: random.Random, task_id: str, pkg: Path) -> DeliverableTask:
    for _attempt in range(10_000):  # redraw until the trap separates the answers
        sites = rng.sample(CITIES, 5)
        calls = {s: rng.randrange(20_000, 400_000, 500) for s in sites}
        aht = {s: round(rng.uniform(5.6, 8.2), 1) for s in sites}
        fcr = {s: round(rng.uniform(62, 80), 1) for s in sites}
        total_calls = sum(calls.values())
        w_aht = round(sum(calls[s] * aht[s] for s in sites) / total_calls, 2)
        s_aht = round(sum(aht.values()) / len(sites), 2)
        w_fcr = round(sum(calls[s] * fcr[s] for s in sites) / total_calls, 1)
        if abs(w_aht - s_aht) >= 0.15:
            break
    else:
        raise RuntimeError("could not draw sites whose weighted and simple AHT differ")
    headline_tq = round(rng.uniform(4.8, 5.6), 1)
    true_tq = round(headline_tq + rng.choice((0.5, 0.6, 0.7, 0.8)), 1)
    tq_fcr = float(rng.randrange(80, 86))
    gap = round(w_aht - true_tq, 2)
    lazy_gap = round(w_aht - headline_tq, 2)
    fcr_gap = round(tq_fcr - w_fcr, 1)
    wb = Workbook()
    ws = wb.active
    ws.title = "Benchmarks"
    ws.append(["Metric", "Industry Average", "Top Quartile"])
    ws.append(["Service Level (%)", 80.0, 88.0])
    ws.append(["AHT (min)", round(headline_tq + 1.1, 1), f"{headline_tq}⁹"])
    ws.append(["FCR (%)", 72.0, tq_fcr])
    ws.append(["Cost per Call (INR)", 41.0, 32.0])
    ws.append(["NPS", 68.0, 82.0])
    ws.append([])
    ws.append(["⁹ Headline figure; see Policy Appendix C, footnote 9."])
    save_workbook(wb, pkg / "benchmarks.xlsx")
    write_csv(pkg / "site_operations.csv",
              [["site", "calls_handled", "aht_min", "fcr_pct", "marketing_spend_inr_lakh",
                "esg_score"]]
              + [[s, str(calls[s]), f"{aht[s]:.1f}", f"{fcr[s]:.1f}", str(rng.randrange(5, 90)),
                  str(rng.randrange(40, 95))] for s in sites])
    doc = new_docx()
    doc.add_heading("Operations Policy - Appendix C", level=1)
    doc.add_paragraph("C.1 Benchmarks are reported as published unless a footnote below applies.")
    doc.add_paragraph(f"Footnote 9: the headline top-quartile AHT excludes training, coaching and "
                      f"complex-call handling time. The true top-quartile AHT for benchmarking is "
                      f"{true_tq} minutes.")
    doc.add_paragraph("C.2 Current performance is the call-volume-weighted average across sites.")
    doc.add_heading("Appendix D - Policy relationships", level=2)
    add_table(doc, [["Driver", "Outcome"], ["FCR", "strongly influences NPS"],
                    ["AHT", "strongly influences cost per call"]])
    save_docx(doc, pkg / "policy_appendix.docx")
    noise = new_docx()
    noise.add_heading("Quarterly marketing and ESG update", level=1)
    for line in ("Brand campaign reach rose 14% quarter on quarter.",
                 "Solar panels were installed at two sites; ESG score improved.",
                 "The IT team migrated the intranet to a new content platform."):
        noise.add_paragraph(line)
    save_docx(noise, pkg / "marketing_esg_update.docx")

    p = Package()
    p.output("benchmark_table.xlsx", "xlsx", ["Table 1"])
    v_cur = p.verify("numeric", "current_aht", "Call-weighted current AHT (min)",
                     label="Current AHT", expected=w_aht, abs_tol=0.02)
    v_tq = p.verify("numeric", "true_tq_aht", "Footnote-corrected top-quartile AHT",
                    label="Top Quartile AHT", expected=true_tq, abs_tol=0.01)
    v_gap = p.verify("numeric", "aht_gap", "AHT gap vs corrected top quartile",
                     label="AHT gap", expected=gap, abs_tol=0.02)
    p.verify("numeric", "fcr_gap", "FCR gap (pp), call-weighted", label="FCR gap",
             expected=fcr_gap, abs_tol=0.15)
    v_xlsx = p.verify("numeric", "table_current_aht", "Table 1 AHT row: current (weighted)",
                      file="benchmark_table.xlsx", label="AHT", index=0, expected=w_aht,
                      abs_tol=0.02)
    v_xtq = p.verify("numeric", "table_tq_aht", "Table 1 AHT row: corrected top quartile",
                     file="benchmark_table.xlsx", label="AHT", index=2, expected=true_tq,
                     abs_tol=0.01)
    v_head = p.verify("regex_absent", "headline_tq_not_used", "Headline AHT not used as the "
                      "benchmark", pattern=f"(?:{lure_pattern('Top Quartile AHT', headline_tq, 1)})"
                      f"|(?:{lure_pattern('AHT gap', lazy_gap, 2)})")
    p.verify("regex_absent", "no_filler", "Out-of-scope filler (marketing, ESG) left out",
             pattern=r"\b(?:ESG|brand campaign|marketing spend|intranet)\b")
    p.verify("citation_domains", "no_external_citations", "Closed corpus: no external URL cited", allowed=[])
    p.verify("word_limit", "section_a_words", "Section A at most 180 words", section="Section A",
             max_words=180)
    p.verify("word_limit", "section_b_words", "Section B at most 120 words", section="Section B",
             max_words=120)
    p.verify("decision_line", "top_priority", "Mandatory final line", expected=TOP_PRIORITY,
             prefix="Top Priority:")
    p.verify("llm_check", "derived_metrics", "Judged", criterion="Cost per Call and NPS are "
             "treated as derived outcome metrics, not root gaps.")
    p.trap("footnote_tq_aht", "footnote_override",
           f"The deck's top-quartile AHT {headline_tq} is corrected to {true_tq} by footnote 9.",
           lure=f"Top Quartile AHT {headline_tq}, AHT gap {lazy_gap:.2f}",
           location="benchmarks.xlsx C3 -> policy_appendix.docx footnote 9",
           verifiers=[v_tq, v_gap, v_xtq, v_head])
    p.trap("unweighted_site_aht", "unweighted_average",
           f"Site AHTs must be weighted by calls handled ({w_aht}); the simple mean is {s_aht}.",
           lure=f"Current AHT {s_aht}", location="site_operations.csv",
           verifiers=[v_cur, v_xlsx])
    return DeliverableTask(
        id=task_id, title="Contact-centre benchmarking and gap analysis", prompt_class="RCP",
        corpus_discipline="closed",
        prompt="The COO needs a performance benchmarking and gap analysis. Using ONLY the provided "
        "files (reported benchmarks may be directionally misleading; reconstruct true benchmarks "
        "where policy requires; filter out marketing, ESG and IT material): state 'Current AHT', "
        "'Top Quartile AHT', 'AHT gap' (minutes, 2 decimals) and 'FCR gap' (pp); write Table 1 "
        "to benchmark_table.xlsx (sheet 'Table 1', columns Metric, Current, Industry Average, Top "
        "Quartile, Gap vs Top Quartile; rows Service Level, AHT, FCR, Cost per Call, NPS); then "
        "'Section A - Top 3 Gaps' (<= 180 words) and 'Section B - Priority Recommendations' (<= "
        f"120 words). The mandatory final line is: \"{TOP_PRIORITY}\"",
        inputs=["benchmarks.xlsx", "site_operations.csv", "policy_appendix.docx",
                "marketing_esg_update.docx"],
        required_outputs=p.outputs,
        golden=Golden(answer=f"Current AHT {w_aht} vs true top quartile {true_tq}: gap {gap:.2f} "
                      f"min; FCR gap {fcr_gap} pp.", decision=TOP_PRIORITY,
                      values=[GoldenValue(name="current_aht", value=w_aht),
                              GoldenValue(name="true_tq_aht", value=true_tq),
                              GoldenValue(name="aht_gap", value=gap),
                              GoldenValue(name="fcr_gap", value=fcr_gap)]),
        solution_logic=[f"Footnote 9: top-quartile AHT {headline_tq} -> {true_tq}.",
                        f"Current AHT = sum(calls x AHT) / sum(calls) = {w_aht} (not {s_aht}).",
                        f"AHT gap {w_aht} - {true_tq} = {gap:.2f}; FCR gap {tq_fcr} - {w_fcr} = "
                        f"{fcr_gap}."],
        lazy_ai_test=f"Uses the headline {headline_tq} and the simple site mean {s_aht}.",
        expert_test="Applies footnote 9, weights by calls, treats cost and NPS as outcomes.",
        traps=p.traps, verifiers=p.specs(), rubric=table19_rubric(),
    )


CHANNELS = ("EU aftermarket distributors", "Online marketplaces", "Fleet operators",
            "Independent garages", "Regional importers")
FORBIDDEN = r"\b(?:Statista|Gartner|IBISWorld|Euromonitor|Grand View Research)\b"


def crp_market_entry(rng: random.Random, task_id: str, pkg: Path) -> DeliverableTask:
    """Either decision can be right (drawn per package): the volume-weighted margin is at least
    2 points below the simple mean (NO GO; the mean clears the hurdle) or at least 2 points above
    it (GO; the mean falls short), with the hurdle between the two."""
    go = rng.random() < 0.5
    for _attempt in range(10_000):  # redraw until the trap separates the answers
        chans = rng.sample(CHANNELS, 4)
        volume = {c: rng.randrange(2_000, 60_000, 100) for c in chans}
        margin = {c: round(rng.uniform(12, 38), 1) for c in chans}
        weighted = round(sum(volume[c] * margin[c] for c in chans) / sum(volume.values()), 2)
        simple = round(sum(margin.values()) / len(chans), 2)
        if (weighted - simple if go else simple - weighted) >= 2.0:
            break
    else:
        raise RuntimeError("could not draw channels whose weighted margin is 2 points off the mean")
    hurdle = round(weighted + (simple - weighted) * rng.uniform(0.35, 0.65), 1)
    if go:
        assert simple < hurdle <= weighted
    else:
        assert weighted < hurdle <= simple
    decision, lure_decision = ("DECISION: GO", "DECISION: NO GO") if go else ("DECISION: NO GO",
                                                                             "DECISION: GO")
    verdict, lure_verdict = ("Go", "No Go") if go else ("No Go", "Go")
    market_cr = rng.randrange(30_000, 50_000, 500)
    wb = Workbook()
    ws = wb.active
    ws.title = "Channels"
    ws.append(["Channel", "Mode", "Planned volume (units)", "Gross margin (%)"])
    for c in chans:
        ws.append([c, "export", volume[c], margin[c]])
    ws.append([])
    ws.append(["Note: entry is restricted to export-only channels; no local manufacturing or JV."])
    save_workbook(wb, pkg / "channel_economics.xlsx")
    brief = new_docx()
    brief.add_heading("Client brief: EU entry", level=1)
    brief.add_paragraph("Initial investment INR 500 Cr. The board requires the blended gross "
                        f"margin of the channel plan to be at least {hurdle}% to enter.")
    save_docx(brief, pkg / "client_brief.docx")
    mkt = new_docx()
    mkt.add_heading("Mordor Intelligence extract: EU automotive components", level=1)
    mkt.add_paragraph(f"EU market size 2031: approximately INR {market_cr:,} Cr; OEM about 80%, "
                      "aftermarket about 20%.")
    save_docx(mkt, pkg / "mordor_extract.docx")
    slides = ["Basic Company Information", "Investment Goal", "Product-Market Fit",
              "Value Proposition", "Target Market", "Competitor Analysis"]
    p = Package()
    p.output("gtm_onepager.pptx", "pptx", slides)
    v_margin = p.verify("numeric", "blended_margin", "Volume-weighted blended gross margin (%)",
                        label="Blended gross margin", expected=weighted, abs_tol=0.05,
                        unit="percent")
    v_lure = p.verify("regex_absent", "no_simple_average", "The simple mean is not the answer",
                      pattern=lure_pattern("Blended gross margin", simple, 2))
    v_dec = p.verify("decision_line", "decision", "Exact decision line", expected=decision)
    p.verify("regex_present", "cites_authorized", "Cites the authorized market source",
             pattern=r"Mordor Intelligence")
    p.verify("regex_absent", "no_unauthorized_sources", "No unauthorized market reports",
             pattern=FORBIDDEN)
    p.verify("citation_domains", "cited_domains", "Every cited URL is on the authorized source's domain",
             allowed=["mordorintelligence.com"])
    p.verify("llm_check", "assumptions_stated", "Judged", criterion="States the assumptions "
             "taken, including the export-only entry restriction.")
    p.trap("simple_margin_average", "unweighted_average",
           f"Channel margins must be weighted by planned volume ({weighted}%); the simple mean "
           f"({simple}%) {'falls short of' if go else 'clears'} the {hurdle}% hurdle and flips "
           f"the decision to {lure_verdict.upper()}.",
           lure=f"Blended gross margin {simple}%, {lure_decision}",
           location="channel_economics.xlsx Channels", verifiers=[v_margin, v_lure, v_dec])
    return DeliverableTask(
        id=task_id, title="EU market entry go / no-go", prompt_class="CRP",
        corpus_discipline="hybrid",
        prompt="An Indian automotive component maker wants to enter the EU. Using only the "
        "client's files, and Mordor Intelligence as the only market report, compute the channel "
        "plan's 'Blended gross margin' (%, 2 decimals) and decide against the board's hurdle. "
        "State your assumptions. Produce gtm_onepager.pptx with slides " + ", ".join(slides)
        + ". End with `DECISION: GO` or `DECISION: NO GO`.",
        inputs=["channel_economics.xlsx", "client_brief.docx", "mordor_extract.docx"],
        authorized_sources=[AuthorizedSource(name="channel_economics.xlsx"), AuthorizedSource(name="client_brief.docx"),
                            AuthorizedSource(name="Mordor Intelligence", kind="external",
                                             note="the only market report allowed (extract provided)")],
        required_outputs=p.outputs,
        golden=Golden(answer=f"Blended margin {weighted}% {'>=' if go else '<'} hurdle "
                      f"{hurdle}%: {verdict}.", decision=decision,
                      values=[GoldenValue(name="blended_margin", value=weighted, unit="percent",
                                          abs_tol=0.05)]),
        solution_logic=["Blended margin = sum(volume x margin) / sum(volume).",
                        f"{weighted}% vs hurdle {hurdle}% -> {verdict}."],
        lazy_ai_test=f"Averages channel margins simply ({simple}%) and says {lure_verdict}.",
        expert_test=f"Weights by planned volume, respects export-only entry, says {verdict}.",
        traps=p.traps, verifiers=p.specs(), rubric=table19_rubric(),
    )
