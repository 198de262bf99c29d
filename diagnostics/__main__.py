"""Command line: ``python -m diagnostics demo|run``; see ``--help``."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

import tapegrad as tg
from diagnostics.render import render_cleanup, terminal_console
from diagnostics.report import leak_report

__all__ = ["INTERRUPTED", "main"]

INTERRUPTED = 130
"""The status of a script stopped by ``KeyboardInterrupt``: what ``python SCRIPT`` gives
(128 + SIGINT)."""

_DESCRIPTION = """\
Show what the tapegrad tape holds that it should not: hanging nodes (freed by
tg.graph_cleanup()), graphs kept alive by mistake (fix the code), where each node was created,
and how many bytes it holds."""

_EPILOG = """\
subcommands:
  demo [--model {mlp,cnn,transformer}] [--epochs N] [--no-cleanup] [--fixed] [--seed S]
       [--checkpoint PATH] [--steps N] [--jit]
      Train a network on real data with a planted graph-memory mistake typical of its kind,
      printing the leak report at each epoch end and cleaning up.
        --model M      mlp (default; hanging tensors), cnn (a running loss kept as a tensor),
                       transformer (attention maps kept with their graphs)
        --epochs N     number of epochs
        --no-cleanup   do not call graph_cleanup() at epoch ends (watch the tape grow)
        --fixed        run the corrected training loop (no leak to report)
        --seed S       random seed
        --checkpoint P cnn/transformer: resume from P if it exists, save after each epoch
        --steps N      cnn/transformer: at most N batches per epoch
        --jit          mlp: compile the training step with tg.jit
  run [--cleanup] [--html PATH] SCRIPT [ARGS...]
      Run SCRIPT as __main__ with ARGS as its sys.argv[1:], then print a leak report (also
      when the script raises: its traceback is shown and its exit status kept).
        --cleanup      after the report, call graph_cleanup() and print what it freed
        --html PATH    also write the report, its graph picture and the epoch history (if
                       the script called epoch_end) to one self-contained HTML file

exit status of run: the script's (0, its SystemExit code, 130 when interrupted with Ctrl-C,
or 1 for another exception); 2 when SCRIPT is missing or unreadable.

examples:
  python -m diagnostics demo --epochs 3
  python -m diagnostics demo --model transformer --checkpoint run.safetensors
  python -m diagnostics run --cleanup train.py --lr 0.1
  python -m diagnostics run --html leak.html train.py"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m diagnostics",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    # SCRIPT optional to argparse, checked in main: argparse counts a REMAINDER as required
    # and said "required: SCRIPT, ARGS" when both were missing, though ARGS may be empty
    run.add_argument("script", metavar="SCRIPT", nargs="?", help="path of the Python script")
    run.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="its arguments")
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
    if ns.script is None:
        ns.run_parser.error("the following arguments are required: SCRIPT")
    return run_script(ns.script, ns.args, cleanup=ns.cleanup, html=ns.html)


def run_script(
    script: str,
    args: Sequence[str],
    *,
    cleanup: bool = False,
    console: Console | None = None,
    html: str | None = None,
) -> int:
    """Run ``script`` as ``__main__`` with ``args``, then print a leak report.

    The report is taken while the script's globals still exist (so a global keeping a graph
    alive is named), also when the script raises.

    Args:
        script: path of the script, or of a folder holding a ``__main__.py``.
        args: its ``sys.argv[1:]``.
        cleanup: after the report, run ``tg.graph_cleanup()`` and print what it freed.
        console: where the report goes (stdout by default).
        html: also write the report as a self-contained HTML file there (``save_html``).

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
    console = console if console is not None else terminal_console()
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
        _report(console, cleanup, html)
    except BaseException as exc:  # the script's error: show it, keep its status, still report
        _print_traceback(exc, path)
        status = INTERRUPTED if isinstance(exc, KeyboardInterrupt) else 1
        _report(console, cleanup, html)
    else:
        _report(console, cleanup, html)  # ``namespace`` keeps the script's globals alive meanwhile
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


def _report(console: Console, cleanup: bool, html: str | None) -> None:
    """Print the report (and write its HTML); called inside the handlers, while the script's
    globals still exist."""
    report = leak_report(explain=True)
    console.print(report)
    if html is not None:
        try:
            path = report.save_html(html)
        except OSError as exc:
            print(f"python -m diagnostics run: cannot write {html!r}: {exc}", file=sys.stderr)
        else:
            console.print(Text(f"report written to {path}"))
    if cleanup:
        console.print(render_cleanup(tg.graph_cleanup()))


if __name__ == "__main__":
    sys.exit(main())
