"""Command line: ``python -m diagnostics demo|run``; see ``--help``."""

from __future__ import annotations

import argparse
import os
import re
import runpy
import sys
import textwrap
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.text import Text

import tapegrad as tg
from diagnostics.history import on_tape
from diagnostics.render import render_cleanup, render_line, terminal_console
from diagnostics.report import LeakReport, leak_report
from tapegrad.tape import live_tapes

__all__ = ["INTERRUPTED", "main"]

INTERRUPTED = 130
"""The status of a script stopped by ``KeyboardInterrupt``: what ``python SCRIPT`` gives
(128 + SIGINT)."""

_DESCRIPTION = (
    "Show what the tapegrad tape holds that it should not: hanging nodes (freed by "
    "tg.graph_cleanup()), graphs kept alive by mistake (fix the code), where each node was "
    "created, and how many bytes it holds."
)

# One line per entry: ``_HelpFormatter`` wraps them to the terminal's width.
_EPILOG = "\n".join(
    [
        "subcommands:",
        "  demo [--model {mlp,cnn,transformer}] [--epochs N] [--no-cleanup] [--fixed] [--seed S]"
        " [--checkpoint PATH] [--steps N] [--jit]",
        "      Train a network on real data with a planted graph-memory mistake typical of its"
        " kind, printing the leak report at each epoch end and cleaning up.",
        "        --model M          mlp (default; hanging tensors), cnn (a running loss kept as a"
        " tensor), transformer (attention maps kept with their graphs)",
        "        --epochs N         number of epochs",
        "        --no-cleanup       do not call graph_cleanup() at epoch ends (watch the tape"
        " grow)",
        "        --fixed            run the corrected training loop (no leak to report)",
        "        --seed S           random seed (0 or more)",
        "        --checkpoint PATH  cnn/transformer: resume from PATH if it exists, save after each"
        " epoch",
        "        --steps N          cnn/transformer: at most N batches per epoch",
        "        --jit              mlp: compile the training step with tg.jit",
        "  run [--cleanup] [--html PATH] SCRIPT [ARGS...]",
        "      Run SCRIPT as __main__ with ARGS as its sys.argv[1:] (exactly, a -- included), wait"
        " for the threads it started, then print a leak report of each tape that holds something"
        " (also when the script raises: its traceback is shown and its exit status kept).",
        "        --cleanup          after each report, clean that tape up and print what it freed",
        "        --html PATH        also write the report, its graph picture and the epoch history"
        " (if the script called epoch_end) to one self-contained HTML file (another tape's to"
        " PATH numbered: leak-2.html)",
        "",
        "exit status of run: the script's (0, its SystemExit code, 130 when interrupted with"
        " Ctrl-C, or 1 for another exception); 2 when SCRIPT is missing or unreadable.",
        "",
        "examples:",
        "  python -m diagnostics demo --epochs 3",
        "  python -m diagnostics demo --model transformer --checkpoint run.safetensors",
        "  python -m diagnostics run --cleanup train.py --lr 0.1",
        "  python -m diagnostics run --html leak.html train.py",
    ]
)

_HANG = re.compile(r" *(?:[a-z]+ (?=\[)|-\S+(?: [A-Z]+)? +)?")
"""What a wrapped epilog line continues under: a usage line's first argument, an option's
description, else the line's own indent."""
_BRACKETS = re.compile(r"\[[^]]*\]")  # an optional argument of a usage line: never split
_NBSP = "\xa0"


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps the description and the epilog to the terminal's width as argparse does, but
    line by line: each line keeps its indent, and continues under its text (``_HANG``)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        for line in text.splitlines():
            # _HANG matches every line (each of its parts is optional): never None
            hang = indent + " " * _HANG.match(line).end()  # type: ignore[union-attr]
            whole = _BRACKETS.sub(lambda m: m[0].replace(" ", _NBSP), line)  # [--seed S]
            lines += textwrap.wrap(
                whole,
                width,
                initial_indent=indent,
                subsequent_indent=hang,
                break_long_words=False,
                break_on_hyphens=False,  # --no-cleanup, tg.graph_cleanup() whole
            ) or [""]
        return "\n".join(lines).replace(_NBSP, " ")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m diagnostics",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=_HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="{demo,run}", required=True)
    sub.add_parser(
        "demo",
        help="train a small network with a planted leak, reporting at each epoch end",
        add_help=False,  # demo parses its own flags (see the epilog)
    )
    run = sub.add_parser(
        "run",
        help="run a script as __main__, then print a leak report",
        description="Run SCRIPT as __main__ with ARGS, then print a leak report.",
        usage="%(prog)s [-h] [--cleanup] [--html PATH] SCRIPT [ARGS...]",
    )
    run.add_argument("--cleanup", action="store_true", help="run graph_cleanup() after it")
    run.add_argument(
        "--html", metavar="PATH", help="also write the report to one self-contained HTML file"
    )
    # One REMAINDER for SCRIPT and ARGS: argparse keeps a "--" there (it drops one that
    # follows a SCRIPT of its own), and main names SCRIPT alone when it is missing.
    run.add_argument(
        "argv",
        metavar="SCRIPT [ARGS...]",
        nargs=argparse.REMAINDER,
        help="path of the Python script, then its arguments, passed on exactly",
    )
    run.set_defaults(run_parser=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: the arguments after ``python -m diagnostics`` (``sys.argv[1:]`` by default).

    Returns:
        The exit status.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "demo":
        from diagnostics import demo  # lazy: it needs the demo extras (scikit-learn)

        status = demo.main(args[1:])
        return int(status) if isinstance(status, int) else 0
    ns = _parser().parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv  # ``run -- SCRIPT``: run's own
    if not argv:
        ns.run_parser.error("the following arguments are required: SCRIPT")
    return run_script(argv[0], argv[1:], cleanup=ns.cleanup, html=ns.html)


def run_script(
    script: str,
    args: Sequence[str],
    *,
    cleanup: bool = False,
    console: Console | None = None,
    html: str | None = None,
) -> int:
    """Run ``script`` as ``__main__`` with ``args``, then print a leak report of every live
    tape that holds something (the current tape's always, first).

    As ``python SCRIPT`` does before it exits, the report waits for the non-daemon threads
    the script started. It is taken while the script's globals still exist (so a global
    keeping a graph alive is named), also when the script raises.

    Args:
        script: path of the script, or of a folder holding a ``__main__.py``.
        args: its ``sys.argv[1:]``, passed exactly (a ``--`` included).
        cleanup: after each report, clean up that tape and print what it freed.
        console: where the reports go (stdout by default).
        html: also write the current tape's report as a self-contained HTML file there
            (``save_html``), and another tape's next to it, numbered (``leak-2.html``).

    Returns:
        0; the ``SystemExit`` code; ``INTERRUPTED`` (130) when it was interrupted (Ctrl-C),
        1 when it raised another exception; 2 when it cannot be read (one line on stderr).
    """
    # a folder runs its __main__.py, as ``python FOLDER`` does
    entry = os.path.join(script, "__main__.py") if os.path.isdir(script) else script
    try:
        with open(entry, "rb"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        print(f"python -m diagnostics run: cannot read {entry!r}: {reason}", file=sys.stderr)
        return 2
    run = _Run(
        console if console is not None else terminal_console(),
        cleanup,
        html,
        tg.current_tape(),
        set(threading.enumerate()),
    )
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [script, *args]
    path = os.path.abspath(entry)  # as ``python SCRIPT``: ``__file__`` and origins absolute,
    if sys.path:  # shown relative to the working directory at report time
        sys.path[0] = os.path.dirname(path)
    status = 0
    try:
        namespace = runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        status = _exit_status(exc.code)
        run.report()
    except BaseException as exc:  # the script's error: show it, keep its status, still report
        _print_traceback(exc, path)
        status = INTERRUPTED if isinstance(exc, KeyboardInterrupt) else 1
        run.report()
    else:
        run.report()  # ``namespace`` keeps the script's globals alive meanwhile
        del namespace
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    return status


def _print_traceback(exc: BaseException, path: str) -> None:
    """Print the traceback as ``python SCRIPT`` would, from the script's frame on (``path``:
    the script's absolute path); a syntax error in the script shows its line alone."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    if tb is None and isinstance(exc, SyntaxError) and exc.filename == path:
        traceback.print_exception(type(exc), exc, None)  # no frame of the script ran
        return
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what the interpreter does with SystemExit("message")
    return 1


@dataclass(frozen=True)
class _Run:
    """How ``run_script`` reports: where, with what, on which tape first, and the threads
    that were running before the script (it does not wait for those)."""

    console: Console
    cleanup: bool
    html: str | None
    home: tg.Tape
    threads: set[threading.Thread]

    def report(self) -> None:
        """Wait for the script's threads, then print the report of each tape that holds
        something (and write its HTML); called inside the handlers, while the script's
        globals still exist."""
        _join_threads(self.threads)
        others = sorted((t for t in live_tapes() if t is not self.home), key=lambda t: t.name)
        reports = []
        for tape in [self.home, *others]:
            with tg.use_tape(tape):
                report = leak_report(explain=True)
            if tape is self.home or report.total_nodes or report.swept_nodes:
                reports.append((tape, report))
        for n, (tape, report) in enumerate(reports, start=1):
            if len(reports) > 1:
                report = replace(report, label=f"tape {tape.name!r}")
            self._print(tape, report, n)

    def _print(self, tape: tg.Tape, report: LeakReport, n: int) -> None:
        empty = not (report.total_nodes or report.swept_nodes)  # one line: nothing to show
        self.console.print(render_line(report) if empty else report)
        if self.html is not None:
            where = Path(self.html)
            if n > 1:
                where = where.with_name(f"{where.stem}-{n}{where.suffix}")
            try:
                written = report.save_html(where, history=on_tape(tape))
            except OSError as exc:
                print(
                    f"python -m diagnostics run: cannot write {str(where)!r}: {exc}",
                    file=sys.stderr,
                )
            else:
                self.console.print(Text(f"report written to {written}"))
        if self.cleanup:
            self.console.print(render_cleanup(tape.cleanup()))


def _join_threads(before: set[threading.Thread]) -> None:
    """Wait for the non-daemon threads started since ``before`` (also those they start), as
    the interpreter does before it exits, but for the workers of ``concurrent.futures``
    pools: the interpreter stops those (idle, they wait for work forever) through their
    pools' exit hooks."""
    while True:
        waiting = [
            t
            for t in threading.enumerate()
            if t not in before and not t.daemon and not _pool_worker(t)
        ]
        if not waiting:
            return
        for thread in waiting:
            thread.join()


def _pool_worker(thread: threading.Thread) -> bool:
    """Whether ``thread`` runs for a ``concurrent.futures`` pool (its target or its class
    comes from there)."""
    target = getattr(thread, "_target", None)  # Thread's own; deleted once run() returns
    module = getattr(target, "__module__", None) or type(thread).__module__
    return module.startswith("concurrent.futures.")


if __name__ == "__main__":
    sys.exit(main())
