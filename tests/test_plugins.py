"""Plugins (deskbench/plugins.py): the examples/ agent run by module path and installed as an
entry point in a throwaway venv, `deskbench list`, and broken plugins named in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli
from fake_openai import FakeOpenAI

from deskbench.corpus import Corpus
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.tasks import DocQATask

EXAMPLES = REPO / "examples"
TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(TASK.model_dump_json() + "\n")
    return path


def _answer_from_pages(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The fake model answers only when the agent put the retrieved page text in its prompt."""
    prompt = body["messages"][-1]["content"]
    text = prompt if isinstance(prompt, str) else json.dumps(prompt)
    ok = "[alpha.pdf page 1]" in text and "winter" in text.lower()
    answer = ["Mountain car"] if ok else ["no pages seen"]
    return {"kind": "text", "text": json.dumps({"answer": answer, "citations": [{"file": "alpha.pdf", "page": 1}]})}


def _run(agent: str, corpus: Corpus, tmp_path: Path, fake: FakeOpenAI, *, python: str = sys.executable,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    args = [python, "-m", "deskbench.cli", "run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(corpus.root),
            "--agent", agent, "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(tmp_path / "run"),
            "--json", "--quiet"]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
                          cwd=tmp_path)


def _run_from(folder: Path, agent: str, corpus: Corpus, tmp_path: Path, fake: FakeOpenAI,
              ) -> subprocess.CompletedProcess[str]:
    """`deskbench run --agent MODULE:CLASS` from `folder` (the module is found there, as `python -m`
    puts the working folder first), through conftest.run_cli: in this process. The README's
    PYTHONPATH= form runs in a fresh interpreter in tests/test_first_hour_readme.py."""
    return run_cli("run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(corpus.root), "--agent", agent,
                   "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(tmp_path / "run"), "--json",
                   "--quiet", cwd=folder)


def test_example_agent_by_module_path(operator_corpus: Corpus, tmp_path: Path) -> None:
    with FakeOpenAI(script=_answer_from_pages) as fake:
        proc = _run_from(EXAMPLES / "custom_agent", "keyword_agent:KeywordAgent", operator_corpus, tmp_path, fake)
    assert proc.returncode == 0, proc.stderr
    (system, report), = json.loads(proc.stdout).items()
    assert system == "keyword_agent:KeywordAgent:openai-compat/fake"
    assert report["n"] == 1 and report["accuracy"] == 1.0  # the page text reached the model: its context's search
    (episode,) = RunStore(tmp_path / "run").episodes()
    assert episode.status == "ok"
    # its search, then its model call (recorded by the harness: agents/plugin_calls.py)
    assert [s.kind for s in episode.trajectory] == ["tool_call", "model_call"]
    assert episode.trajectory[0].name == "search_documents"


@pytest.mark.parametrize(("agent", "says"), [
    ("no_such_module:Agent", "no module named 'no_such_module'"),
    ("keyword_agent:Missing", "has no 'Missing'"),
])
def test_module_path_mistakes_are_one_line(agent: str, says: str, operator_corpus: Corpus, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        proc = _run_from(EXAMPLES / "custom_agent", agent, operator_corpus, tmp_path, fake)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway venv that sees deskbench's environment (a .pth to its site-packages) and has
    both examples installed as plugins, offline: --no-index, --no-deps, no build isolation
    (pip and setuptools come from deskbench's environment)."""
    import site
    import sysconfig

    venv = tmp_path_factory.mktemp("venv") / "v"
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < 77:  # older ones need the `wheel` package to build
        pytest.fail(f"setuptools {setuptools.__version__} cannot build the examples offline; install the test extra")
    # without its own pip and setuptools (ensurepip's 65.x would shadow deskbench's): the .pth brings both
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    # addsitedir, not a plain path line: deskbench's own editable install is a .pth there too
    Path(purelib, "deskbench-env.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in dict.fromkeys(ours)))
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation",
                           "-q", *(a for example in ("custom_agent", "custom_scorer") for a in ("-e", str(EXAMPLES / example)))],
                          capture_output=True, text=True, timeout=600)  # one pip for both: it takes seconds to start
    assert proc.returncode == 0, proc.stderr
    return venv


def _venv_cli(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(venv / "bin" / "python"), "-m", "deskbench.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def test_installed_examples_are_listed_run_and_score(plugin_venv: Path, operator_corpus: Corpus, tmp_path: Path) -> None:
    listed = _venv_cli(plugin_venv, "list", "agents", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    origins = {r["name"]: r["origin"] for r in json.loads(listed.stdout)}
    assert origins["keyword-agent"] == "entry point of deskbench-keyword-agent 0.1.0"
    assert origins["bm25-agent"] == "built-in (docqa)"
    scorers = {r["name"]: r["origin"] for r in json.loads(_venv_cli(plugin_venv, "list", "scorers", "--json",
                                                                      cwd=tmp_path).stdout)}
    assert scorers["exact-match"] == "entry point of deskbench-exact-scorer 0.1.0"
    assert "keyword-agent" not in json.loads(run_cli("list", "agents", "--json").stdout)  # only where installed

    with FakeOpenAI(script=_answer_from_pages) as fake:
        proc = _run("keyword-agent", operator_corpus, tmp_path, fake, python=str(plugin_venv / "bin" / "python"),
                    env={"PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["keyword-agent:openai-compat/fake"]["accuracy"] == 1.0

    scored = _venv_cli(plugin_venv, "score", str(tmp_path / "run"), "--scorer", "exact-match", "--json", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)["keyword-agent:openai-compat/fake"]
    assert report["scorer"] == "exact-match" and report["n"] == 1 and report["accuracy"] == 1.0


def test_scorer_by_module_path_counts_wrong_answers(operator_corpus: Corpus, tmp_path: Path) -> None:
    with FakeOpenAI(script=lambda b, n: {"kind": "text", "text": '{"answer": ["Bicycle"], "citations": []}'}) as fake:
        done = _run_from(EXAMPLES / "custom_agent", "keyword_agent:KeywordAgent", operator_corpus, tmp_path, fake)
        assert done.returncode == 0, done.stderr
    proc = run_cli("score", str(tmp_path / "run"), "--scorer", "exact_scorer:ExactMatchScorer", "--json",
                   cwd=EXAMPLES / "custom_scorer")
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()
    assert report["n_scored"] == 1 and report["accuracy"] == 0.0


def test_broken_entry_point_is_one_line(plugin_venv: Path, tmp_path: Path) -> None:
    """An installed plugin whose module raises on import: named in one line, exit 2. Installed
    as an install leaves it (its module and a .dist-info declaring the entry point, in the venv's
    site-packages), without a pip run of its own: the fixture's pip installs the examples."""
    purelib = Path(subprocess.run([str(plugin_venv / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    module, info = purelib / "broken_agent.py", purelib / "deskbench_broken_agent-0.1.0.dist-info"
    module.write_text("raise RuntimeError('needs a GPU')\n")
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deskbench-broken-agent\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[deskbench.agents]\nbroken-agent = broken_agent:BrokenAgent\n")
    try:
        run = _venv_cli(plugin_venv, "run", "--tasks", str(_tasks(tmp_path)), "--agent", "broken-agent", "--model",
                        "openai-compat/x@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"), cwd=tmp_path)
        assert run.returncode == 2, run.stderr
        assert run.stderr.strip() == ("error: agent plugin 'broken-agent' (broken_agent:BrokenAgent, entry point of "
                                      "deskbench-broken-agent 0.1.0) failed to load: RuntimeError: needs a GPU; "
                                      "fix or uninstall that package")
        listed = _venv_cli(plugin_venv, "list", "agents", cwd=tmp_path)  # listing imports no plugin
        assert listed.returncode == 0 and "broken-agent" in listed.stdout
    finally:  # uninstalled: the other tests of this venv list its agents
        module.unlink()
        shutil.rmtree(info)


def test_an_installed_track_plugin_runs_and_scores(tmp_path: Path) -> None:
    """tests/echo_track as a distribution on the path declares `deskbench.tracks: echo` (a
    .dist-info is what an install leaves); `deskbench run` finds the track by its entry point
    alone (nothing registers it in Python), then `score` and `list tracks` know it."""
    site_dir = tmp_path / "site"
    info = site_dir / "deskbench_echo_track-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deskbench-echo-track\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[deskbench.tracks]\necho = echo_track:TRACK\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site_dir), str(REPO / "tests")])}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "deskbench.cli", *args], capture_output=True, text=True,
                              timeout=300, env=env, cwd=tmp_path)

    listed = {r["name"]: r["origin"] for r in json.loads(cli("list", "tracks", "--json").stdout)}
    assert "deskbench-echo-track" in listed["echo"]
    tasks = tmp_path / "tasks.jsonl"
    rows = [("abc", "ABC"), ("Q", "q"), ("hi", "HI")]
    tasks.write_text("".join(json.dumps({"id": f"e{i}", "text": t, "expected": e}) + "\n" for i, (t, e) in enumerate(rows)))
    run = cli("run", "--tasks", str(tasks), "--agent", "echo-upper", "--out", str(tmp_path / "run"), "--quiet", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["echo-upper"]["accuracy"] == pytest.approx(2 / 3)
    assert RunStore(tmp_path / "run", create=False).meta("track") == "echo"
    scored = cli("score", str(tmp_path / "run"), "--json")
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["echo-upper"]["accuracy"] == pytest.approx(2 / 3)
    without = subprocess.run([sys.executable, "-m", "deskbench.cli", "score", str(tmp_path / "run")], capture_output=True,
                             text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO / "tests")}, cwd=tmp_path)
    assert without.returncode == 2 and "echo" in without.stderr and "Traceback" not in without.stderr
