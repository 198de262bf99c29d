"""python -m diagnostics: run (normal, raising, exiting, missing script), --help, demo."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from diagnostics.__main__ import main

SCRIPT = """\
import sys
import tapegrad as tg
w = tg.ones(3).require_grad()
running = 0.0
for _ in range(2):
    loss = (w * w).sum()
    loss.backward()
    running = running + loss
tg.ones(2).require_grad()
print("argv", sys.argv[1:])
if "--raise" in sys.argv:
    raise ValueError("boom")
if "--exit" in sys.argv:
    sys.exit(3)
if "--interrupt" in sys.argv:  # Ctrl-C
    raise KeyboardInterrupt
"""


def run_cli(tmp_path: Path, *args: str, columns: str = "100") -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text(SCRIPT)
    env = {**os.environ, "COLUMNS": columns, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "diagnostics", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_run_reports_after_the_script_with_its_argv(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "run", "--cleanup", "--html", "leak.html", "train.py", "--lr", "0.1")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("argv ['--lr', '0.1']\n")
    assert "tapegrad leak report" in out
    assert "1 node (1 leaf), 1 dead graph" in out
    assert "train.py:9" in out  # the dropped leaf's line
    assert "global running → Tensor(shape=(), origin=train.py:8)" in out
    assert "graph_cleanup() freed 1 node (1 leaf, 1 graph)" in out
    assert "report written to leak.html" in out
    page = (tmp_path / "leak.html").read_text(encoding="utf-8")
    assert "train.py:9" in page and "<svg" in page
    assert "global running → Tensor(shape=(), origin=train.py:8)" in page  # the chain, drawn


def test_run_takes_a_folder_with_a_main_module_as_python_does(tmp_path: Path) -> None:
    """``run pkg`` runs ``pkg/__main__.py`` (``python pkg`` does), importing its siblings."""
    pkg = tmp_path / "job"
    pkg.mkdir()
    (pkg / "helper.py").write_text("SCALE = 2.0\n")
    (pkg / "__main__.py").write_text(
        "import tapegrad as tg\nfrom helper import SCALE\n\n"
        "w = tg.ones(3, requires_grad=True)\ntg.ones(3, requires_grad=True) * SCALE\n"
    )
    done = run_cli(tmp_path, "run", "job")
    assert done.returncode == 0, done.stderr
    assert "tapegrad leak report" in done.stdout
    assert "__main__.py:5" in done.stdout  # the dropped product's line
    missing = run_cli(tmp_path, "run", "train.py-folder-that-is-not-there")
    assert missing.returncode == 2


def test_a_terminal_that_says_it_has_no_columns_still_gets_the_report(tmp_path: Path) -> None:
    # COLUMNS=0 (a terminal that reports no size): rich would print nothing at width 0
    done = run_cli(tmp_path, "run", "--cleanup", "train.py", columns="0")
    assert done.returncode == 0, done.stderr
    assert "tapegrad leak report" in done.stdout
    assert "1 node (1 leaf), 1 dead graph" in done.stdout
    assert "train.py:9" in done.stdout
    assert "graph_cleanup() freed 1 node" in done.stdout


def test_run_html_to_an_unwritable_path_says_so_and_keeps_the_status(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "run", "--html", "missing/dir/leak.html", "train.py")
    assert done.returncode == 0
    assert "tapegrad leak report" in done.stdout
    assert done.stderr.startswith("python -m diagnostics run: cannot write 'missing/dir/leak.html'")


def test_run_reports_when_the_script_raises_and_keeps_its_status(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "run", "train.py", "--raise")
    assert done.returncode == 1
    script = tmp_path / "train.py"  # as ``python train.py`` shows it: absolute
    assert done.stderr.startswith(f'Traceback (most recent call last):\n  File "{script}", line 12')
    assert done.stderr.rstrip().endswith("ValueError: boom")
    assert "global running → Tensor(shape=(), origin=train.py:8)" in done.stdout
    assert "graph_cleanup() freed" not in done.stdout  # no --cleanup


def test_run_keeps_a_system_exit_code(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "run", "train.py", "--exit")
    assert done.returncode == 3
    assert "tapegrad leak report" in done.stdout
    assert done.stderr == ""


def test_run_keeps_the_status_of_an_interrupted_script(tmp_path: Path) -> None:
    # ``python train.py`` stopped by Ctrl-C exits with 130 (128 + SIGINT), not 1
    done = run_cli(tmp_path, "run", "train.py", "--interrupt")
    assert done.returncode == 130
    assert "tapegrad leak report" in done.stdout
    assert done.stderr.rstrip().endswith("KeyboardInterrupt")


def test_a_missing_script_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "run", "nope.py")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "python -m diagnostics run: cannot read 'nope.py': No such file or directory\n"
    )


def test_run_without_a_script_names_only_the_script_as_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # ARGS are optional: argparse's own message said "required: SCRIPT, ARGS"
    with pytest.raises(SystemExit) as info:
        main(["run"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith(
        "python -m diagnostics run: error: the following arguments are required: SCRIPT"
    )
    assert err.startswith(
        "usage: python -m diagnostics run [-h] [--cleanup] [--html PATH] SCRIPT [ARGS...]\n"
    )


def test_help_explains_every_subcommand(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # each entry on one line
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for text in (
        "demo [--model {mlp,cnn,transformer}] [--epochs N] [--no-cleanup] [--fixed] [--seed S]",
        "--checkpoint PATH",
        "--steps N",
        "--epochs N",
        "--no-cleanup",
        "--fixed",
        "--seed S",
        "run [--cleanup] [--html PATH] SCRIPT [ARGS...]",
        "--html PATH",
        "--cleanup",
        "exit status",
    ):
        assert text in out


def test_demo_passes_its_flags_to_the_demo_module(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("diagnostics.demo")
    fake.main = lambda argv: seen.append(list(argv)) or 5  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "diagnostics.demo", fake)
    monkeypatch.delattr("diagnostics.demo", raising=False)
    argv = ["demo", "--epochs", "2", "--no-cleanup", "--fixed", "--seed", "7"]
    assert main(argv) == 5
    assert seen == [argv[1:]]


def test_run_takes_a_script_by_relative_path_as_python_does(tmp_path: Path) -> None:
    """``run ../train.py`` from another folder, and a script that changes directory: its
    ``__file__`` is absolute (as under ``python SCRIPT``), and origins are relative to the
    working directory when under it, else absolute (the review found ``../train.py:8``)."""
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "sub").mkdir()
    (tmp_path / "moves.py").write_text(
        "import os\nimport tapegrad as tg\ntg.set_cleanup_policy('manual')\n"
        "here = os.path.dirname(__file__)\nos.chdir('/')\n"
        "open(os.path.join(here, 'train.py')).close()\n"
        "junk = tg.ones(2).require_grad()\ndel junk\n"
    )
    env = {**os.environ, "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "diagnostics", "run", "../train.py"],
        cwd=tmp_path / "sub",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'train.py'}:8" in done.stdout and "../train.py" not in done.stdout
    moved = run_cli(tmp_path, "run", "moves.py")
    assert moved.returncode == 0, moved.stderr  # __file__ absolute: found after chdir('/')
    assert "moves.py:7" in moved.stdout


def test_run_shows_a_syntax_error_as_python_does(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("x = (\n")
    done = run_cli(tmp_path, "run", "broken.py")
    assert done.returncode == 1
    assert done.stderr.startswith(f'  File "{tmp_path / "broken.py"}", line 1')
    assert "SyntaxError" in done.stderr and "runpy" not in done.stderr


def test_run_names_a_local_of_the_function_that_raised_or_exited(tmp_path: Path) -> None:
    """The script's ``main()`` raised (or called ``sys.exit``) with a kept-alive total in a
    local: the report, made while the exception is handled, names it from the traceback's
    frames (the review found ``(no name found)``)."""
    (tmp_path / "mainfn.py").write_text(
        "import sys\nimport tapegrad as tg\n\n\ndef main():\n"
        "    w = tg.ones(3).require_grad()\n    running = 0.0\n    for _ in range(3):\n"
        "        loss = (w * 2).sum()\n        loss.backward()\n        running += loss\n"
        "    if sys.argv[1] == 'raise':\n        raise RuntimeError('crash')\n    sys.exit(5)\n\n\n"
        "main()\n"
    )
    for how, status in (("raise", 1), ("exit", 5)):
        done = run_cli(tmp_path, "run", "mainfn.py", how)
        assert done.returncode == status, done.stderr
        assert "local running in main() → Tensor(shape=(), origin=mainfn.py:11)" in done.stdout


@pytest.mark.parametrize("columns", [60, 80])
def test_help_is_wrapped_to_the_terminal_by_argparse(
    columns: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The epilog was wrapped by hand at about 95 columns: argparse now wraps it, each line
    under its own text, and never inside ``--no-cleanup`` or ``[--seed S]``."""
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit):
        main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns
    text = "\n".join(lines)
    assert "--no-cleanup" in text and "[--seed S]" in text and "tg.graph_cleanup()" in text
    (option,) = [i for i, line in enumerate(lines) if line.lstrip().startswith("--model M")]
    column = lines[option].index("mlp")
    assert len(lines[option + 1]) - len(lines[option + 1].lstrip()) == column  # under its text


def test_run_passes_the_scripts_arguments_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run train.py -- --flag``: argparse dropped the ``--`` (a script parsing its own
    arguments then failed with status 2); a ``--`` before SCRIPT ends run's own options."""
    seen: list[tuple[str, list[str], bool]] = []

    def fake(script: str, args: list[str], *, cleanup: bool, html: str | None) -> int:
        seen.append((script, list(args), cleanup))
        return 0

    monkeypatch.setattr("diagnostics.__main__.run_script", fake)
    main(["run", "train.py", "--", "--flag"])
    main(["run", "--cleanup", "train.py", "a", "--", "b", "--cleanup"])
    main(["run", "--", "train.py", "--"])
    assert seen == [
        ("train.py", ["--", "--flag"], False),
        ("train.py", ["a", "--", "b", "--cleanup"], True),
        ("train.py", ["--"], False),
    ]


TAPES_AND_THREADS = """\
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import tapegrad as tg

mine = tg.Tape("mine")
with tg.use_tape(mine):
    for _ in range(3):
        tg.ones(4).require_grad() * 2.0  # hanging on the script's own tape


def late():
    time.sleep(0.3)
    tg.ones(2).require_grad()  # after the main code returned
    print("worker done", flush=True)


threading.Thread(target=late).start()
pool = ThreadPoolExecutor(1)  # left open: its idle worker must not be waited for
pool.submit(print, "pool ran").result()
print("argv", sys.argv[1:], flush=True)
"""


def test_run_reports_every_tape_after_the_scripts_threads(tmp_path: Path) -> None:
    """The review found a script's own ``tg.Tape`` reported as "0 nodes" (only the process
    tape was read), a leak of a thread still running when the main code returned left out
    (python waits for such threads before it exits), and the ``--`` of the script's
    arguments dropped."""
    (tmp_path / "tapes.py").write_text(TAPES_AND_THREADS)
    done = run_cli(tmp_path, "run", "--cleanup", "--html", "leak.html", "tapes.py", "--", "-x")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "argv ['--', '-x']" in out
    assert out.index("worker done") < out.index("tapegrad leak report")
    process, mine = out.split("tapegrad leak report — tape 'mine'")
    assert "tapegrad leak report — tape 'process'" in process
    assert "tapes.py:16" in process  # the thread's leaf
    assert "graph_cleanup() freed 1 node (1 leaf, 1 graph)" in process
    assert "6 nodes (3 leaves), 3 dead graphs" in mine
    assert "tapes.py:11" in mine
    assert "graph_cleanup() freed 6 nodes (3 leaves, 3 graphs)" in mine
    assert "report written to leak.html" in process and "report written to leak-2.html" in mine
    assert "tapes.py:11" in (tmp_path / "leak-2.html").read_text(encoding="utf-8")


def test_an_empty_tape_of_the_script_adds_no_report(tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_text("import tapegrad as tg\nspare = tg.Tape('spare')\n")
    done = run_cli(tmp_path, "run", "empty.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("tapegrad leak report") == 1
    assert "spare" not in done.stdout
    # the script's own tape holds nothing: one line, not a table of zeros
    assert "tapegrad leak report: 0 hanging nodes, 0 bytes held" in done.stdout
    assert "kind" not in done.stdout and "╭" not in done.stdout
