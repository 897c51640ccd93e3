"""The sandbox API and `deskbench sandbox run`: stateless calls, inputs, collected files,
pandas and CJK charts inside, unsafe-local mode, and refusing to run without bubblewrap."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.errors import UserError
from deskbench.sandbox import ExecResult, Limits, Sandbox, SandboxUnavailable
from deskbench.sandbox import run as sandbox_run

LIMITS = Limits(wall_seconds=10, cpu_seconds=10, memory_bytes=1024**3, processes=64,
                file_bytes=16 * 1024**2, result_bytes=32 * 1024**2, output_bytes=16 * 1024)


@pytest.fixture(scope="module")
def sandbox(bwrap: str) -> Sandbox:
    return Sandbox(LIMITS)


def test_print_and_exit_status(sandbox: Sandbox) -> None:
    r = sandbox.run("print(1)")
    assert (r.stdout, r.stderr, r.exit_code, r.signal, r.limit_hits) == ("1\n", "", 0, None, [])
    assert r.ok and r.files == []  # no bound on its wall time: a loaded machine is slow, not wrong
    text = r.for_model()
    assert "exit status 0" in text and "1" in text
    bad = sandbox.run("import sys\nprint('before')\nsys.exit(3)")
    assert bad.exit_code == 3 and not bad.ok and bad.stdout == "before\n"


def test_traceback_names_the_code_not_the_supervisor(sandbox: Sandbox) -> None:
    r = sandbox.run("x = 1\n1 / 0\n")
    assert r.exit_code == 1
    assert 'File "/sandbox/code.py", line 2' in r.stderr and "1 / 0" in r.stderr
    assert "ZeroDivisionError" in r.stderr and "boot.py" not in r.stderr
    syntax = sandbox.run("def f(:\n")
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


def test_no_state_survives_between_calls(sandbox: Sandbox) -> None:
    first = sandbox.run("import os\nopen('/tmp/mark', 'w').write('x')\nopen('mark', 'w').write('x')\nX = 5")
    assert first.ok and [f.name for f in first.files] == ["mark"]
    second = sandbox.run("import os\nprint(os.path.exists('/tmp/mark'), os.listdir('.'), 'X' in globals())")
    assert second.stdout == "False [] False\n"


def test_files_collected_with_subdirs_and_symlinks_skipped(sandbox: Sandbox, tmp_path: Path) -> None:
    code = ("import os\nos.makedirs('out/deep')\nopen('out/deep/a.csv', 'w').write('a,b\\n1,2\\n')\n"
            "open('/mnt/result/top.txt', 'wb').write(b'x' * 1000)\nos.symlink('top.txt', 'link')\n"
            "os.mkfifo('pipe')\nprint(os.getcwd())")
    r = sandbox.run(code, collect_to=tmp_path / "got")
    assert r.stdout == "/mnt/result\n"
    assert {(f.name, f.size) for f in r.files} == {("out/deep/a.csv", 8), ("top.txt", 1000)}
    assert (tmp_path / "got" / "out" / "deep" / "a.csv").read_text() == "a,b\n1,2\n"
    reasons = dict(r.skipped)
    assert "not followed" in reasons["link"] and "regular" in reasons["pipe"]
    assert not (tmp_path / "got" / "link").exists()
    assert "top.txt (1,000 bytes)" in r.for_model() and "link" in r.for_model()


def test_owned_result_dir_is_cleaned(sandbox: Sandbox) -> None:
    r = sandbox.run("open('a', 'w').write('1')")
    path = r.files[0].path
    assert path.read_text() == "1"
    r.cleanup()
    assert not path.exists()


def test_inputs_read_only_and_pandas_reads_xlsx(sandbox: Sandbox, tmp_path: Path) -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["region", "sales"])
    for i in range(50):
        ws.append([f"r{i % 3}", i])
    wb.save(tmp_path / "sales.xlsx")
    (tmp_path / "notes.txt").write_text("hello")
    code = ("import os, pandas as pd\nprint(sorted(os.listdir('/mnt/data')))\n"
            "df = pd.read_excel('/mnt/data/sales.xlsx')\nprint(len(df), df['sales'].sum())\n"
            "try:\n    open('/mnt/data/new', 'w')\nexcept OSError as e:\n    print('ro', e.errno in (13, 30))\n")
    alone = sandbox.run(code, inputs=[tmp_path])  # one dir alone: its contents at /mnt/data
    assert alone.ok, alone.stderr
    assert alone.stdout.splitlines() == ["['notes.txt', 'sales.xlsx']", "50 1225", "ro True"]
    files = sandbox.run("import os\nprint(sorted(os.listdir('/mnt/data')))",
                        inputs=[tmp_path / "sales.xlsx", tmp_path / "notes.txt"])
    assert files.stdout == "['notes.txt', 'sales.xlsx']\n"
    with pytest.raises(UserError, match="does not exist"):
        sandbox.run("print(1)", inputs=[tmp_path / "missing.csv"])


def test_cjk_chart_renders_with_noto(sandbox: Sandbox) -> None:
    code = ("import matplotlib.pyplot as plt\nfrom matplotlib import font_manager as fm\n"
            "names = {f.name for f in fm.fontManager.ttflist}\n"
            "cjk = sorted(n for n in names if 'CJK' in n)\nprint(cjk[0])\n"
            "plt.rcParams['font.sans-serif'] = [cjk[0], 'DejaVu Sans']\n"
            "fig, ax = plt.subplots()\nax.bar(['北京', '上海', '广州'], [3, 5, 2])\n"
            "ax.set_title('销售额 (万元)')\nfig.savefig('chart.png')\n")
    r = sandbox.run(code)
    assert r.ok, r.stderr
    assert r.stdout.startswith("Noto Sans CJK")
    assert "missing from font" not in r.stderr
    assert [f.name for f in r.files] == ["chart.png"] and r.files[0].size > 5000
    # without a CJK font chosen, matplotlib warns on stderr: kept for a later evaluator
    plain = sandbox.run("import matplotlib.pyplot as plt\nplt.title('销售额')\nplt.savefig('c.png')")
    assert plain.ok and "missing from font" in plain.stderr


def test_scientific_stack_imports(sandbox: Sandbox) -> None:
    r = sandbox.run("import numpy, scipy.stats, openpyxl, docx, pptx, pandas, matplotlib\n"
                    "print(matplotlib.get_backend().lower(), numpy.arange(4).sum())")
    assert r.ok, r.stderr
    assert r.stdout == "agg 6\n"


def test_code_runs_unprivileged(sandbox: Sandbox) -> None:
    r = sandbox.run("import os\nst = open('/proc/self/status').read()\n"
                    "print(os.getuid() != 0, 'CapEff:\\t0000000000000000' in st, 'NoNewPrivs:\\t1' in st)")
    if os.geteuid() == 0:
        assert r.stdout == "True True True\n", r.stderr
    else:
        assert r.ok


def test_arun_does_not_block_the_loop(sandbox: Sandbox) -> None:
    async def main() -> tuple[list[ExecResult], int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(tick())
        results = await asyncio.gather(sandbox.arun("import time; time.sleep(0.5); print('a')"),
                                       sandbox.arun("print('b')"))
        t.cancel()
        return list(results), ticks

    results, ticks = asyncio.run(main())
    assert [r.stdout for r in results] == ["a\n", "b\n"]
    assert ticks >= 10


def test_spawn_long_lived_repl(sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("data")
    repl = tmp_path / "repl.py"
    repl.write_text("import sys, json\nstate = {}\nfor line in sys.stdin:\n"
                    "    msg = json.loads(line)\n    exec(msg['code'], state)\n"
                    "    print(json.dumps({'x': state.get('x')}), flush=True)\n")
    proc = sandbox.spawn(["python", "/opt/repl.py"], inputs=[tmp_path / "in.txt"],
                         result_dir=tmp_path / "res", extra_binds=[(repl, "/opt/repl.py")])
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for code, want in (("x = open('/mnt/data/in.txt').read()", "data"),
                           ("x = x + '!'; open('/mnt/result/o.txt', 'w').write(x)", "data!")):
            proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline()) == {"x": want}
    finally:
        sandbox.kill(proc)
    assert proc.returncode is not None
    assert (tmp_path / "res" / "o.txt").read_text() == "data!"


def test_for_model_truncates_fairly() -> None:
    r = ExecResult(stdout="o" * 50_000, stderr="e" * 50_000 + "THE END", exit_code=1, signal=None,
                   limit_hits=["stdout"], files=[], skipped=[], seconds=1.0)
    text = r.for_model(max_chars=4000)
    assert len(text) <= 4200
    assert "THE END" in text and "omitted" in text and "stdout exceeded 64 kB" in text
    assert text.count("o") > 1000 and text.count("e") > 1000


def test_unavailable_without_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_run.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="install.*bubblewrap.*--unsafe-local"):
        Sandbox(LIMITS)
    result = CliRunner().invoke(app, ["sandbox", "run", __file__])
    assert isinstance(result.exception, SandboxUnavailable)


def test_unsafe_local_substitutes_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("hi")
    sb = Sandbox(LIMITS, unsafe_local=True)
    assert "WITHOUT isolation" in capsys.readouterr().err
    r = sb.run("import os\nprint(open('/mnt/data/a.txt').read())\n"
               "open('/mnt/result/o.txt', 'w').write('x')\nprint(os.environ['DESKBENCH_RESULT'] == os.getcwd())",
               inputs=[tmp_path / "in"])
    assert r.ok, r.stderr
    assert r.stdout == "hi\nTrue\n" and [f.name for f in r.files] == ["o.txt"]
    assert "unsafe-local" in r.for_model()
    hog = Sandbox(Limits(wall_seconds=1, cpu_seconds=5), unsafe_local=True).run("import time; time.sleep(3600)")
    assert hog.limit_hits == ["wall_time"] and hog.seconds < 600  # killed at 1 s, not after the hour's sleep


def test_cli_run_text_json_and_exit_codes(sandbox: Sandbox, tmp_path: Path) -> None:
    runner = CliRunner()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "n.txt").write_text("7")
    ok = tmp_path / "ok.py"
    ok.write_text("v = int(open('/mnt/data/n.txt').read())\nprint(v * 6)\nopen('o.txt', 'w').write('42')\n")
    res = runner.invoke(app, ["sandbox", "run", str(ok), "--input", str(tmp_path / "data")])
    assert res.exit_code == 0, res.output
    assert "42" in res.output and "o.txt (2 bytes)" in res.output
    res = runner.invoke(app, ["sandbox", "run", str(ok), "--input", str(tmp_path / "data"), "--json",
                              "--keep", str(tmp_path / "kept")])
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["stdout"] == "42\n" and data["exit_code"] == 0 and data["limit_hits"] == []
    assert data["files"] == [{"name": "o.txt", "size": 2}]
    assert set(data) >= {"stdout", "stderr", "exit_code", "signal", "limit_hits", "files", "skipped", "seconds"}
    assert (tmp_path / "kept" / "o.txt").read_text() == "42"
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    res = runner.invoke(app, ["sandbox", "run", str(slow), "--timeout", "1", "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["limit_hits"] == ["wall_time"]
    res = runner.invoke(app, ["sandbox", "run", str(tmp_path / "nope.py")])
    assert isinstance(res.exception, UserError)
    res = runner.invoke(app, ["sandbox", "run", str(ok), "--input", str(tmp_path / "nope")])
    assert isinstance(res.exception, UserError)


def test_cli_user_error_exit_2(tmp_path: Path) -> None:
    from conftest import run_cli

    proc = run_cli("sandbox", "run", str(tmp_path / "missing.py"), timeout=60)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
