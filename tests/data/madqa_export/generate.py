"""Make the `deskbench export --format madqa` fixture: the export of tests/madqa_export_run.py's run
and the official MADQA evaluator's output on it. Run by hand, never in CI (it needs the official
repository and a Python environment with its eval/requirements.txt):

    .venv/bin/python tests/data/madqa_export/generate.py /path/to/OxRML/MADQA --python /path/to/venv/bin/python

The path is a checkout or a git directory of github.com/OxRML/MADQA. The script builds the run
(tests/madqa_export_run.py: offline, scripted models), exports it with `deskbench export --format
madqa`, copies the exported files to export/ here (the exact bytes the evaluator read), and runs
the official eval/evaluate.py on them with the other Python (official_eval.py: only the hub
download and the Gemini judge replaced, as for tests/data/madqa_parity); official.json gets what it
printed (text and --json, ANLS* and --semantic, by category and domain) and where it came from.
Nothing of the official code is copied into deskbench."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("official", type=Path)
    ap.add_argument("--python", required=True, help="a Python with the official eval/requirements.txt installed")
    args = ap.parse_args()
    sys.path.insert(0, str(TESTS))
    from conftest import run_cli
    from madqa_export_run import FILES, TASKS, build_run

    tmp = Path(tempfile.mkdtemp())
    run = build_run(tmp)
    proc = run_cli("export", str(run), "--format", "madqa", "-o", str(tmp / "export"))
    assert proc.returncode == 0, proc.stderr
    target = HERE / "export"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    for name in FILES.values():
        shutil.copyfile(tmp / "export" / name, target / name)
    git = ["git", "-C", str(args.official)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    eval_dir = tmp / "eval"
    eval_dir.mkdir()
    for name in ("evaluate.py", "metrics.py"):
        text = subprocess.run([*git, "show", f"HEAD:eval/{name}"], capture_output=True, text=True, check=True).stdout
        (eval_dir / name).write_text(text)
    files = [str(target / name) for name in FILES.values()]
    done = subprocess.run([args.python, str(HERE / "official_eval.py"), str(eval_dir), str(TASKS),
                           str(TESTS / "data" / "madqa_parity" / "generate.py"), *files],
                          capture_output=True, text=True, check=True, cwd=tmp)
    official = json.loads(done.stdout)
    for mode, text in official["printed"].items():  # the files' folder is the machine's: kept by name
        official["printed"][mode] = text.replace(str(target) + "/", "")
    (HERE / "official.json").write_text(json.dumps({
        "source": {"repository": "github.com/OxRML/MADQA", "commit": commit,
                   "files": ["eval/evaluate.py", "eval/metrics.py"], "computed": dt.date.today().isoformat(),
                   "versions": official["versions"],
                   "command": "evaluate.py " + " ".join(f"export/{n}" for n in FILES.values())
                              + " --by-category --by-domain [--semantic] [--json]",
                   "replaced": {"datasets.load_dataset": "returns tasks.jsonl",
                                "metrics._call_llm_judge": "_verdict of tests/data/madqa_parity/generate.py"}},
        "printed": official["printed"], "results": official["json"], "judge": official["judge"]},
        indent=1, ensure_ascii=False) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
