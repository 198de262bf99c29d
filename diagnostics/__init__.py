"""diagnostics: what the tapegrad tape holds that it should not, where it came from, and why.

``leak_report()`` classifies the tape (hanging nodes, dead graphs, kept-alive graphs) by
origin; ``epoch_end()`` prints it, keeps it in ``history()``, warns on growth and cleans up;
``plot_history()`` draws the history, ``graph_picture()`` the graphs, and
``report.save_html()`` writes all of it to one file; ``no_leaks()`` guards a block or a test;
``python -m diagnostics run SCRIPT`` reports on a whole script. It reads only tapegrad's
public ``snapshot()``; tapegrad never imports it.
"""

from diagnostics.epoch import epoch_end
from diagnostics.guard import LeakError, no_leaks
from diagnostics.history import LeakWarning, clear_history, history
from diagnostics.picture import GraphPicture, graph_picture
from diagnostics.plot import plot_history
from diagnostics.report import Explanation, GraphNode, LeakReport, LeakRow, leak_report

__all__ = [
    "Explanation",
    "GraphNode",
    "GraphPicture",
    "LeakError",
    "LeakReport",
    "LeakRow",
    "LeakWarning",
    "clear_history",
    "epoch_end",
    "graph_picture",
    "history",
    "leak_report",
    "no_leaks",
    "plot_history",
]
