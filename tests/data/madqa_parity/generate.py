"""Make the MADQA parity fixtures and compute their expected numbers with the official code.

Run by hand, never in CI (it needs the official repository and its `anls-star` dependency):

    python tests/data/madqa_parity/generate.py /path/to/OxRML/MADQA [--out tests/data/madqa_parity]

The path is a checkout or a git directory of github.com/OxRML/MADQA. The script writes:
- tasks.jsonl: gold rows in the dataset's fields (question, id, answer_variants, evidence,
  document_category, domain);
- predictions in the official agents' shapes: bm25.jsonl (BM25 MLLM agent: search_history dicts,
  iterations, step-dict trajectory), rlm.jsonl (RLM baseline: trajectory dict with llm_calls and
  tokens), edge.jsonl (error rows, rows without id, text/id mismatches, unmatched rows, unreadable
  citations, null/numeric/empty/long answers, string answers, effort 0 and ties);
- judge.json: the scripted verdict for every (question, predicted) the official judge is asked
  about (some are call failures);
- vectors.json: the official `evaluate_file` output for each file, with and without the judge, by
  hop type, category and domain, and where it came from (repository commit, date, versions).

The official code is imported from the given path and run as it is; only two things are replaced:
`datasets.load_dataset` returns tasks.jsonl (no network), and `_call_llm_judge` answers from
judge.json (no Gemini). Nothing of it is copied into deskbench.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib
import json
import random
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

SEED = 18
DOCS = [f"{1000 + i}.pdf" for i in range(12)]
WORDS = ["Acme Corp", "Globex", "12", "15", "2019", "$4.2 million", "Paris", "yes", "no", "Initech",
         "March 3, 2020", "42", "Jane Doe", "North", "South", "7.5%", "Bell 407", "permit 88-1"]
DOMAINS = ["Finance", "Government", "Legal", "", "Healthcare"]
CATEGORIES = ["Annual report", "Permit", "", "Contract", "Memo"]


def _official_tree(path: Path, into: Path) -> tuple[Path, str]:
    """The official eval/ folder as files, and its commit."""
    git = ["git", "-C", str(path)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    for name in ("evaluate.py", "metrics.py"):
        text = subprocess.run([*git, "show", f"HEAD:eval/{name}"], capture_output=True, text=True, check=True).stdout
        (into / name).write_text(text)
    return into, commit


def _gold(rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for i in range(40):
        hop = i % 3
        doc = rng.choice(DOCS)
        if hop == 0:
            evidence = [{"document": doc, "page": rng.randint(1, 9)}]
        elif hop == 1:
            a = rng.randint(1, 8)
            evidence = [{"document": doc, "page": a}, {"document": doc, "page": a + rng.randint(1, 4)}]
        else:
            other = rng.choice([d for d in DOCS if d != doc])
            evidence = [{"document": doc, "page": rng.randint(1, 9)}, {"document": other, "page": rng.randint(1, 9)}]
        n_items = 2 if rng.random() < 0.25 else 1
        main = rng.sample(WORDS, n_items)
        variants = [main] + ([[main[0].upper()]] if n_items == 1 and rng.random() < 0.3 else [])
        rows.append({"id": f"dev/{i}", "question": f"Question {i}: what does record {rng.randint(100, 999)} say?",
                     "answer_variants": variants, "evidence": evidence,
                     "document_category": rng.choice(CATEGORIES), "domain": rng.choice(DOMAINS)})
    return rows


def _answer(rng: random.Random, gold: dict[str, Any]) -> list[str]:
    main = gold["answer_variants"][0]
    roll = rng.random()
    if roll < 0.45:
        return list(main)
    if roll < 0.6:
        return [m[:-1] + "x" if len(m) > 3 else m for m in main]  # near miss: ANLS* between 0.5 and 1
    if roll < 0.75:
        return list(reversed(main)) + ([rng.choice(WORDS)] if rng.random() < 0.5 else [])
    return [rng.choice(WORDS)]


def _citations(rng: random.Random, gold: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for ev in gold["evidence"]:
        if rng.random() < 0.75:
            out.append({"file": ev["document"], "page": ev["page"] if rng.random() < 0.8 else ev["page"] + 1})
    if rng.random() < 0.3:
        out.append({"file": rng.choice(DOCS), "page": rng.randint(1, 9)})
    return out


def _bm25(rng: random.Random, gold: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for g in gold:
        if rng.random() < 0.1:
            continue  # a task without a prediction: not counted by the official evaluator
        searches = rng.randint(0, 6)
        history = [{"iteration": k + 1, "query": f"q{k}", "num_results": 5} for k in range(searches)]
        rows.append({"question": g["question"], "id": g["id"], "answer": _answer(rng, g),
                     "citations": _citations(rng, g), "iterations": max(1, searches),
                     "search_history": history,
                     "trajectory": [{"iteration": 1, "tool_calls": [], "parsed_answer": None}],
                     "model": "gpt-5-mini"})
    rng.shuffle(rows)
    return rows


def _rlm(rng: random.Random, gold: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for g in gold:
        traj = {"execution_time": round(rng.uniform(3, 90), 2), "llm_calls": rng.randint(1, 12),
                "input_tokens": rng.randint(1000, 90000), "output_tokens": rng.randint(50, 4000)}
        rows.append({"question": g["question"], "answer": _answer(rng, g), "citations": _citations(rng, g),
                     "model": "openai/gpt-5", "raw_response": "...", "trajectory": traj, "id": g["id"]})
    return rows


def _edge(rng: random.Random, gold: list[dict[str, Any]]) -> list[dict[str, Any]]:
    g = gold
    rows: list[dict[str, Any]] = [
        {"question": g[0]["question"], "id": g[0]["id"], "error": "timeout", "error_details": "Timed out"},
        {"question": g[1]["question"], "id": g[1]["id"], "error": "boom", "error_traceback": "Traceback ...",
         "ground_truth_answers": None, "category": None},
        {"question": "  " + g[2]["question"] + " ", "answer": g[2]["answer_variants"][0],
         "citations": [{"file": g[2]["evidence"][0]["document"], "page": g[2]["evidence"][0]["page"]}],
         "search_history": ["plain string query"], "iterations": 1},
        {"question": "a rephrased question the gold does not have", "id": g[3]["id"],
         "answer": g[3]["answer_variants"][0], "citations": [], "iterations": 2},
        {"id": g[4]["id"], "answer": ["wrong"], "citations": [], "iterations": 3},
        {"question": g[5]["question"], "id": g[6]["id"], "answer": g[5]["answer_variants"][0], "citations": [],
         "iterations": 2},
        {"question": "nobody asked this", "id": "dev/999", "answer": ["x"], "citations": [], "iterations": 1},
        {"question": g[7]["question"], "id": g[7]["id"], "answer": g[7]["answer_variants"][0],
         "citations": [{"file": g[7]["evidence"][0]["document"]}, {"file": g[7]["evidence"][0]["document"],
                                                                     "page": "p. 2"},
                       {"document": g[7]["evidence"][0]["document"], "page": str(g[7]["evidence"][0]["page"])},
                       {"file": g[7]["evidence"][-1]["document"], "page": float(g[7]["evidence"][-1]["page"])}],
         "search_history": [], "iterations": 0},
        {"question": g[8]["question"], "id": g[8]["id"], "answer": [None, g[8]["answer_variants"][0][0]],
         "citations": [], "iterations": 4},
        {"question": g[9]["question"], "id": g[9]["id"], "answer": [None], "citations": [], "iterations": 4},
        {"question": g[10]["question"], "id": g[10]["id"], "answer": [], "citations": [], "iterations": 5},
        {"question": g[11]["question"], "id": g[11]["id"], "answer": "", "citations": [], "iterations": 5},
        {"question": g[12]["question"], "id": g[12]["id"], "answer": ["word " * 450], "citations": [],
         "iterations": 6},
        {"question": g[13]["question"], "id": g[13]["id"], "answer": ", ".join(g[13]["answer_variants"][0]) + " etc",
         "citations": [], "iterations": 2},
        {"question": g[14]["question"], "id": g[14]["id"], "answer": [3.0, True], "citations": [], "iterations": 2},
        {"question": g[15]["question"], "id": g[15]["id"], "answer": g[15]["answer_variants"][0],
         "citations": [], "iterations": None, "search_history": None},
    ]
    for k in range(16, 40):
        rows.append({"question": g[k]["question"], "id": g[k]["id"], "answer": _answer(rng, g[k]),
                     "citations": _citations(rng, g[k]), "iterations": rng.choice([1, 2, 2, 3, 3, 3, 5])})
    return rows


def _verdict(question: str, predicted: Any) -> str:
    digest = hashlib.sha256(json.dumps([question, predicted]).encode()).digest()[0]
    return ["correct", "partial", "incorrect", "incorrect", "correct", "error"][digest % 6]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("official", type=Path)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = ap.parse_args()
    rng = random.Random(SEED)
    gold = _gold(rng)
    files = {"bm25": _bm25(rng, gold), "rlm": _rlm(rng, gold), "edge": _edge(rng, gold)}
    args.out.mkdir(parents=True, exist_ok=True)

    def dump(name: str, rows: list[dict[str, Any]]) -> None:
        (args.out / name).write_text("".join(json.dumps(r) + "\n" for r in rows))

    dump("tasks.jsonl", gold)
    for name, rows in files.items():
        dump(f"{name}.jsonl", rows)

    tmp = Path(tempfile.mkdtemp())
    _official_tree(args.official, tmp)
    commit = subprocess.run(["git", "-C", str(args.official), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    fake_datasets = types.ModuleType("datasets")
    fake_datasets.load_dataset = lambda name, split=None: gold  # type: ignore[attr-defined]
    sys.modules["datasets"] = fake_datasets
    sys.path.insert(0, str(tmp))
    metrics = importlib.import_module("metrics")
    evaluate = importlib.import_module("evaluate")
    asked: dict[str, str] = {}

    def scripted(question: str, predicted: Any, gold_variants: Any, **_: Any) -> dict[str, Any]:
        verdict = _verdict(question, predicted)
        asked[json.dumps([question, predicted])] = verdict
        if verdict == "error":
            return {"judgment": "error", "main_issue": "error", "explanation": "scripted failure", "score": 0.0}
        return {"judgment": verdict, "main_issue": "none", "explanation": "scripted",
                "score": {"correct": 1.0, "partial": 0.5, "incorrect": 0.0}[verdict]}

    metrics._call_llm_judge = scripted
    by_text, by_id = evaluate.load_gold_standard()
    vectors: dict[str, Any] = {}
    for name in files:
        for semantic in (False, True):
            out = evaluate.evaluate_file(args.out / f"{name}.jsonl", by_text, by_id, by_category=True,
                                         by_domain=True, use_semantic=semantic)
            vectors[f"{name}/{'semantic' if semantic else 'anls'}"] = out
    (args.out / "judge.json").write_text(json.dumps(
        [{"question_and_predicted": k, "verdict": v} for k, v in sorted(asked.items())], indent=1) + "\n")

    def clean(x: Any) -> Any:  # the official --json rule: NaN and inf are null; tuples are lists
        if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    import anls_star
    import numpy
    import scipy

    (args.out / "vectors.json").write_text(json.dumps({
        "source": {"repository": "github.com/OxRML/MADQA", "commit": commit, "files": ["eval/evaluate.py",
                                                                                      "eval/metrics.py"],
                   "computed": dt.date.today().isoformat(),
                   "versions": {"python": sys.version.split()[0], "numpy": numpy.__version__,
                                "scipy": scipy.__version__, "anls_star": getattr(anls_star, "__version__", "?")},
                   "replaced": {"datasets.load_dataset": "returns tasks.jsonl",
                                "metrics._call_llm_judge": "answers from judge.json"}},
        "results": clean(vectors)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
