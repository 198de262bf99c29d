"""diagnostics: what the tapegrad tape holds that it should not, where it came from, and why.

``leak_report()`` classifies the tape (hanging nodes, dead graphs, kept-alive graphs) by
origin; ``epoch_end()`` prints it and cleans up; ``no_leaks()`` guards a block or a test;
``python -m diagnostics run SCRIPT`` reports on a whole script. It reads only tapegrad's
public ``snapshot()``; tapegrad never imports it.
"""

from diagnostics.epoch import epoch_end
from diagnostics.guard import LeakError, no_leaks
from diagnostics.report import Explanation, LeakReport, LeakRow, leak_report

__all__ = [
    "Explanation",
    "LeakError",
    "LeakReport",
    "LeakRow",
    "epoch_end",
    "leak_report",
    "no_leaks",
]
