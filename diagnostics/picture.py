"""``graph_picture``: the hanging and kept-alive graphs of a report as one self-contained SVG.

No system binary (no graphviz ``dot``): a small layered layout written here. Each graph is
drawn from its roots (outputs, at the top) down to its leaves, one layer per step of depth;
nodes are boxes labelled with op, origin and function, coloured by class; an arrow runs from
each input to the op that used it; the referrer chain that keeps a kept-alive graph alive (a
report made with ``explain=True``) is drawn above its root. Graphs with the same structure
from the same lines are drawn once with their number; what does not fit in ``max_nodes`` is
summed up in words (ops and origins with counts). Text is escaped for XML and wrapped, never
cut.
"""

from __future__ import annotations

import html
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.cells import cell_len

import tapegrad as tg
from diagnostics.plot import COLOURS
from diagnostics.render import human_bytes, plural
from diagnostics.report import GraphNode, LeakReport, build_report

__all__ = ["GraphPicture", "graph_picture"]


def _tint(colour: str, amount: float = 0.15) -> str:
    """``colour`` (``#rrggbb``) mixed with white: the fill of a box whose border is ``colour``."""
    rgb = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(255 - (255 - c) * amount):02x}" for c in rgb)


FILLS: dict[str, str] = {kind: _tint(colour) for kind, colour in COLOURS.items()}
"""The fill of each class's boxes: its colour, light."""
FONT = 11  # px, monospace
CHAR = 6.7  # px per cell of FONT-sized monospace text
LINE = 14  # px between text lines
WRAP = 34  # cells per line in a node box
PAD = 6
BOX_W = int(WRAP * CHAR + 2 * PAD)
GAP_X, GAP_Y = 16, 34
BLOCK_GAP = 28
MAX_WIDTH = 1500
PER_ROW = int((MAX_WIDTH - 24) // (BOX_W + GAP_X))  # most boxes side by side in a layer
MIN_PART = 4  # the fewest nodes of a graph worth drawing in part
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True)
class GraphPicture:
    """An SVG picture of graphs; Jupyter shows it inline.

    Attributes:
        svg: the SVG document (UTF-8 text, valid XML, no external reference).
        nodes_drawn: node boxes drawn (a repeated graph's boxes once).
        nodes_total: hanging and kept-alive nodes the picture stands for.
        graphs_total: hanging and kept-alive graphs it stands for.
    """

    svg: str
    nodes_drawn: int
    nodes_total: int
    graphs_total: int

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str | Path) -> Path:
        """Write the SVG to ``path`` (UTF-8) and return the path."""
        out = Path(path)
        out.write_text(self.svg, encoding="utf-8")
        return out

    def __str__(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return (
            f"GraphPicture({self.nodes_drawn} node boxes drawn for {self.nodes_total} nodes "
            f"in {self.graphs_total} graphs; .svg, .save(path))"
        )


def graph_picture(
    report_or_snapshot: LeakReport | tg.Snapshot, *, max_nodes: int = 200
) -> GraphPicture:
    """Draw the hanging and kept-alive graphs of a report (or of a snapshot) as SVG.

    Args:
        report_or_snapshot: a ``LeakReport`` (its ``graph_nodes``; with ``explain=True`` the
            referrer chains are drawn too) or a ``tg.snapshot()`` (classified first).
        max_nodes: most node boxes drawn; the rest is summed up in words. Bounded time:
            a graph of 10,000 nodes is summed up in well under a second.

    Returns:
        The picture (``.svg``; ``_repr_svg_`` for Jupyter; ``.save(path)``).

    Raises:
        TypeError: ``report_or_snapshot`` is neither; ``max_nodes`` is not an int.
        ValueError: ``max_nodes`` is below 1.
    """
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int):
        raise TypeError(f"max_nodes must be an int, got {type(max_nodes).__name__}.")
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be at least 1, got {max_nodes}.")
    if isinstance(report_or_snapshot, tg.Snapshot):
        report = build_report(report_or_snapshot)
    elif isinstance(report_or_snapshot, LeakReport):
        report = report_or_snapshot
    else:
        raise TypeError(
            "graph_picture takes a LeakReport (diagnostics.leak_report()) or a tg.snapshot(), "
            f"got {type(report_or_snapshot).__name__}."
        )
    return _Drawing(report, max_nodes).picture()


def _text(s: str) -> str:
    """User text made safe for XML: escaped, characters XML forbids replaced."""
    return html.escape(_XML_BAD.sub("\ufffd", s), quote=True)


def wrap(text: str, width: int = WRAP) -> list[str]:
    """Lines of at most ``width`` cells, breaking after ``/`` or a space when one is near;
    every character is kept."""
    lines: list[str] = []
    line, cells = "", 0
    for ch in text:
        w = cell_len(ch)
        if cells + w > width and line:
            cut = max(line.rfind("/"), line.rfind(" "))
            if cut >= width // 2:
                lines.append(line[: cut + 1])
                line = line[cut + 1 :]
            else:
                lines.append(line)
                line = ""
            cells = cell_len(line)
        line += ch
        cells += w
    lines.append(line)
    return lines


def _summary(nodes: Iterable[GraphNode], limit: int = 4) -> str:
    """``"matmul ×3,000, add ×2,000, … at train.py:12, train.py:14"``."""
    ops: Counter[str] = Counter()
    origins: Counter[str] = Counter()
    for n in nodes:
        ops[n.op] += 1
        origins[n.origin] += 1
    op_text = ", ".join(f"{op} ×{k:,}" for op, k in ops.most_common(limit))
    if len(ops) > limit:
        op_text += ", …"
    where = ", ".join(o for o, _ in origins.most_common(2))
    return f"{op_text} from {where}" + (" and others" if len(origins) > 2 else "")


@dataclass
class _Box:
    node: GraphNode
    lines: list[str]
    x: float = 0.0
    y: float = 0.0

    @property
    def height(self) -> float:
        return 2 * PAD + LINE * len(self.lines)


class _Drawing:
    """Builds the SVG: graphs grouped, laid out in blocks, blocks flowed into rows."""

    def __init__(self, report: LeakReport, max_nodes: int) -> None:
        self.report = report
        self.budget = max_nodes
        self.parts: list[str] = []
        self.drawn = 0
        self.chains = {e.graph: e.path for e in report.explanations}

    # ------------------------------------------------------------------ grouping

    def _graphs(self) -> list[list[GraphNode]]:
        """Graphs holding a hanging or kept-alive node, most urgent first."""
        members: dict[int, list[GraphNode]] = {}
        for n in self.report.graph_nodes:
            members.setdefault(n.graph, []).append(n)
        blamed = {
            g: ns
            for g, ns in members.items()
            if any(n.kind in ("hanging", "kept-alive") for n in ns)
        }
        return sorted(
            blamed.values(),
            key=lambda ns: (
                not any(n.kind == "kept-alive" for n in ns),
                -sum(n.saved_bytes for n in ns),
                -len(ns),
                ns[0].graph,
            ),
        )

    @staticmethod
    def _signature(nodes: Sequence[GraphNode]) -> tuple[object, ...]:
        index = {n.id: i for i, n in enumerate(nodes)}
        return tuple(
            (n.op, n.origin, n.kind, tuple(index[p] for p in n.parents if p in index))
            for n in nodes
        )

    # ------------------------------------------------------------------ layout

    def _block(self, nodes: list[GraphNode], copies: int) -> tuple[list[str], float, float]:
        """One graph (or its top part) laid out at the origin: SVG parts, width, height."""
        by_id = {n.id: n for n in nodes}
        children: dict[int, list[int]] = {n.id: [] for n in nodes}
        for n in nodes:
            for p in n.parents:
                if p in children:
                    children[p].append(n.id)
        roots = [n.id for n in nodes if not children[n.id]]
        # Root by root (newest first), breadth-first down through its parents, within the
        # budget: whole computations rather than many roots without their inputs.
        room = max(self.budget - self.drawn, 0)
        order: list[int] = []
        seen: set[int] = set()
        for start in sorted(roots, reverse=True):
            if len(order) >= room:
                break
            seen.add(start)
            queue = deque([start])
            while queue and len(order) < room:
                nid = queue.popleft()
                order.append(nid)
                for p in sorted(by_id[nid].parents, reverse=True):
                    if p in by_id and p not in seen:
                        seen.add(p)
                        queue.append(p)
        shown = set(order)
        self.drawn += len(order)
        depth: dict[int, int] = {}
        for nid in sorted(shown, reverse=True):  # children have larger ids than parents
            above = [depth[c] for c in children[nid] if c in depth]
            depth[nid] = max(above) + 1 if above else 0
        layers: dict[int, list[int]] = {}
        for nid in sorted(shown):
            layers.setdefault(depth[nid], []).append(nid)
        boxes: dict[int, _Box] = {}
        head = self._header(nodes, copies)
        y = float(LINE * len(head) + 8)
        chain = self.chains.get(nodes[0].graph)
        chain_lines = wrap(chain, 2 * WRAP) if chain else []
        if chain_lines:
            y += LINE * len(chain_lines) + 2 * PAD + GAP_Y // 2
        width = 0.0
        for d in sorted(layers):
            row = layers[d]
            if d:  # barycentre of the children already placed above
                row.sort(key=lambda i: _mean([boxes[c].x for c in children[i] if c in boxes], i))
            x = 0.0
            tallest = 0.0
            for k, nid in enumerate(row):
                if k and k % PER_ROW == 0:  # a wide layer continues on a row below
                    width = max(width, x - GAP_X)
                    x, y, tallest = 0.0, y + tallest + GAP_Y / 2, 0.0
                n = by_id[nid]
                lines = [n.op, *wrap(n.origin), *wrap(n.function)]
                if n.saved_bytes:
                    lines[0] += f"  {human_bytes(n.saved_bytes)}"
                box = boxes[nid] = _Box(n, lines, x, y)
                x += BOX_W + GAP_X
                tallest = max(tallest, box.height)
            width = max(width, x - GAP_X)
            y += tallest + GAP_Y
        parts = [
            f'<text x="0" y="{LINE * (i + 1)}" font-weight="{"bold" if i == 0 else "normal"}">'
            f"{_text(line)}</text>"
            for i, line in enumerate(head)
        ]
        top = LINE * len(head) + 8
        if chain_lines:
            w = max(cell_len(s) for s in chain_lines) * CHAR + 2 * PAD
            h = LINE * len(chain_lines) + 2 * PAD
            parts.append(
                f'<rect x="0" y="{top}" width="{w:.0f}" height="{h}" rx="4" fill="#fff7d6" '
                'stroke="#b58900" stroke-dasharray="4 2"/>'
            )
            parts += [
                f'<text x="{PAD}" y="{top + PAD + LINE * (i + 1) - 3}">{_text(s)}</text>'
                for i, s in enumerate(chain_lines)
            ]
            root = boxes[order[0]] if order else None
            if root is not None:
                parts.append(
                    f'<line x1="{root.x + BOX_W / 2:.0f}" y1="{top + h}" '
                    f'x2="{root.x + BOX_W / 2:.0f}" y2="{root.y}" stroke="#b58900" '
                    'stroke-dasharray="4 2" marker-end="url(#arrow)"/>'
                )
            width = max(width, w)
        for box in boxes.values():
            for p in box.node.parents:
                if p in boxes:
                    src = boxes[p]
                    parts.append(
                        f'<line x1="{src.x + BOX_W / 2:.0f}" y1="{src.y:.0f}" '
                        f'x2="{box.x + BOX_W / 2:.0f}" y2="{box.y + box.height:.0f}" '
                        'stroke="#555" marker-end="url(#arrow)"/>'
                    )
        for box in boxes.values():
            parts.append(_box_svg(box))
        rest = [n for n in nodes if n.id not in shown]
        if rest:
            lines = wrap(f"… {len(rest):,} more nodes: {_summary(rest)}", 2 * WRAP)
            parts += [
                f'<text x="0" y="{y + LINE * i}" font-style="italic">{_text(s)}</text>'
                for i, s in enumerate(lines)
            ]
            width = max(width, max(cell_len(s) for s in lines) * CHAR)
            y += LINE * len(lines)
        width = max(width, max(cell_len(s) for s in head) * CHAR)
        return parts, width, y

    def _header(self, nodes: Sequence[GraphNode], copies: int) -> list[str]:
        kept = any(n.kind == "kept-alive" for n in nodes)
        dead = all(n.kind == "hanging" for n in nodes)
        what = "kept-alive graph" if kept else "dead graph" if dead else "hanging nodes in a graph"
        blamed = [n for n in nodes if n.kind in ("hanging", "kept-alive")]
        size = f"{len(blamed):,} {'node' if len(blamed) == 1 else 'nodes'}, " + human_bytes(
            sum(n.saved_bytes for n in blamed)
        )
        times = f" ×{copies:,} alike" if copies > 1 else ""
        return wrap(f"{what} {nodes[0].graph}{times}: {size}", 2 * WRAP)

    # ------------------------------------------------------------------ document

    def picture(self) -> GraphPicture:
        graphs = self._graphs()
        groups: dict[tuple[object, ...], list[list[GraphNode]]] = {}
        for ns in graphs:
            groups.setdefault(self._signature(ns), []).append(ns)
        blocks: list[tuple[list[str], float, float]] = []
        left: list[list[GraphNode]] = []
        for same in groups.values():
            first = same[0]
            if self.drawn >= self.budget or (
                len(first) > self.budget - self.drawn and self.budget - self.drawn < MIN_PART
            ):
                left += same
                continue
            blocks.append(self._block(first, len(same)))
        total_nodes = sum(1 for n in self.report.graph_nodes if n.kind in ("hanging", "kept-alive"))
        notes = self._notes(left)
        body, width, height = self._flow(blocks, notes)
        svg = (
            '<svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT}">'
            "<title>tapegrad graph picture</title>"
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
            'fill="#555"/></marker></defs>'
            '<rect width="100%" height="100%" fill="white"/>' + "".join(body) + "</svg>"
        )
        return GraphPicture(
            svg, self.drawn, total_nodes + self.report.graph_nodes_omitted, len(graphs)
        )

    def _notes(self, left: list[list[GraphNode]]) -> list[str]:
        report = self.report
        notes = []
        if not report.graph_nodes:
            blamed = any(
                r.kind in ("hanging", "kept-alive") and r.count > r.swept for r in report.rows
            )
            notes.append(
                "nothing to draw: the report keeps no node records (history() keeps reports "
                "without them); draw a report from leak_report() or epoch_end()"
                if blamed
                else "nothing to draw: the report holds no hanging or kept-alive graph"
                + (" (the tape is empty)" if report.total_nodes == 0 else "")
            )
        if left:
            nodes = [n for ns in left for n in ns]
            notes.append(
                f"… {plural(len(left), 'more graph')} ({plural(len(nodes), 'node')}) not drawn "
                f"(max_nodes={self.budget}): {_summary(nodes)}"
            )
        if report.graph_nodes_omitted:
            notes.append(
                f"… {report.graph_nodes_omitted:,} more hanging or kept-alive nodes the report "
                "did not keep (see its table)"
            )
        if report.swept_nodes:
            notes.append(f"{report.swept_nodes:,} hanging nodes already removed by sweeps")
        return notes

    def _flow(
        self, blocks: list[tuple[list[str], float, float]], notes: list[str]
    ) -> tuple[list[str], float, float]:
        """Title and legend, the blocks left to right in rows, then the notes."""
        margin = 12
        title = f"{self.report.title}: hanging and kept-alive graphs (roots at the top)"
        body = [f'<text x="{margin}" y="{margin + LINE}" font-weight="bold">{_text(title)}</text>']
        x = float(margin)
        legend_y = margin + 2 * LINE + 4
        for kind in ("hanging", "kept-alive", "live", "consumed"):
            body.append(
                f'<rect x="{x:.0f}" y="{legend_y - 10}" width="12" height="12" '
                f'fill="{FILLS[kind]}" stroke="{COLOURS[kind]}"/>'
                f'<text x="{x + 16:.0f}" y="{legend_y}">{kind}</text>'
            )
            x += 16 + CHAR * (len(kind) + 3)
        body.append(f'<text x="{x:.0f}" y="{legend_y}">arrow: input → the op that used it</text>')
        width = x + CHAR * 40
        y = float(legend_y + LINE + 8)
        row_x, row_h = float(margin), 0.0
        for parts, w, h in blocks:
            if row_x > margin and row_x + w > MAX_WIDTH:
                y += row_h + BLOCK_GAP
                row_x, row_h = float(margin), 0.0
            body.append(f'<g transform="translate({row_x:.0f},{y:.0f})">{"".join(parts)}</g>')
            row_x += w + BLOCK_GAP
            row_h = max(row_h, h)
            width = max(width, row_x)
        y += row_h + (BLOCK_GAP if blocks else 0)
        for note in notes:
            for line in wrap(note, 120):
                y += LINE
                body.append(f'<text x="{margin}" y="{y:.0f}">{_text(line)}</text>')
                width = max(width, margin + cell_len(line) * CHAR)
        return body, width + margin, y + margin


def _box_svg(box: _Box) -> str:
    kind = box.node.kind
    parts = [
        f'<rect x="{box.x:.0f}" y="{box.y:.0f}" width="{BOX_W}" height="{box.height:.0f}" '
        f'rx="4" fill="{FILLS.get(kind, "#fff")}" stroke="{COLOURS.get(kind, "#333")}"/>'
    ]
    for i, line in enumerate(box.lines):
        weight = ' font-weight="bold"' if i == 0 else ""
        parts.append(
            f'<text x="{box.x + PAD:.0f}" y="{box.y + PAD + LINE * (i + 1) - 3:.0f}"{weight}>'
            f"{_text(line)}</text>"
        )
    return "".join(parts)


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default
