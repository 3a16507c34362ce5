"""Pictures of the bench scripts' results: a PNG beside each CSV, drawn with matplotlib.

matplotlib is an extra (``pip install 'naiad[plot]'``), needed neither by Naiad nor by the
machines the benches run on: without it a script still prints its table and writes its CSV,
says in one line how to get the picture, and its ``--plot CSV`` draws the picture later on a
machine that has matplotlib.  A script describes its picture as panels (`Lines`, `Bars`) made
from its CSV's rows; only this module knows matplotlib, so every picture looks alike.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
from dataclasses import dataclass, field

#: What a script prints when it cannot draw.
INSTALL_HINT = "no plot: matplotlib is not installed -- pip install 'naiad[plot]'"
#: Resolution of the PNGs: sharp enough for the docs, small enough to keep in git.
DPI = 100
#: Inches of width of one panel (by default), and of height of a panel of lines.
PANEL_WIDTH, LINES_HEIGHT = 6.0, 3.6


@dataclass
class Lines:
    """A panel of lines: each series a list of (x, y) points, in order of x."""
    title: str
    xlabel: str
    ylabel: str
    series: dict[str, list[tuple[float, float]]]
    x_log: bool = False
    #: A dashed horizontal line at this y (a goal, parity), or None.
    reference: float | None = None
    #: Series drawn dashed (the peers, beside Naiad's solid lines).
    dashed: tuple[str, ...] = ()
    #: Start the y axis at 0 (rates, whose size matters, not only their ranking).
    y_from_zero: bool = False

    def height(self) -> float:
        return LINES_HEIGHT


@dataclass
class Bars:
    """A panel of horizontal bars: a group per category, in each a bar per series (one value
    per category; NaN leaves the bar out)."""
    title: str
    xlabel: str
    categories: list[str]
    series: dict[str, list[float]] = field(default_factory=dict)
    x_log: bool = False
    #: A dashed vertical line at this x (parity), or None.
    reference: float | None = None

    def height(self) -> float:
        """Room for every bar: long tables make tall panels rather than thin bars."""
        return max(1.8, 0.9 + 0.16 * len(self.categories) * max(1, len(self.series)))


def read_rows(csv_path: str, *columns: str) -> list[dict[str, str]]:
    """The CSV's rows as dicts by column name.  A missing file, or one without the ``columns``
    the picture needs (another script's CSV), ends the script with a one-line message."""
    try:
        with open(csv_path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
    except OSError as e:
        sys.exit(f"cannot read {csv_path}: {e.strerror}")
    missing = [c for c in columns if c not in (reader.fieldnames or ())]
    if missing:
        sys.exit(f"{csv_path} has no column {', '.join(map(repr, missing))} -- fix: give a CSV that "
                 f"this script wrote")
    return rows


def number(text: str | None) -> float:
    """A CSV cell as a float; an empty or non-numeric cell (a failed measurement) is NaN."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def png_path(csv_path: str) -> str:
    """Where the picture of ``csv_path`` goes: beside it, ``.png`` for ``.csv``."""
    return os.path.splitext(csv_path)[0] + ".png"


def write_png(csv_path: str, panels: list[Lines | Bars], title: str, columns: int = 2,
              panel_width: float = PANEL_WIDTH) -> str | None:
    """Draw ``panels`` (``columns`` a row, each ``panel_width`` inches wide: more for long
    labels) under ``title`` into `png_path` of ``csv_path``; returns that path, or None (with
    `INSTALL_HINT` printed) when matplotlib is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from PIL import Image                   # matplotlib's own dependency
    except ImportError:
        print(INSTALL_HINT)
        return None
    if not panels:
        print(f"no plot: {csv_path} has no rows to draw")
        return None
    columns = max(1, min(columns, len(panels)))
    rows = [panels[i:i + columns] for i in range(0, len(panels), columns)]
    heights = [max(panel.height() for panel in row) for row in rows]
    # a Figure of its own on the Agg canvas: no pyplot state, no display needed
    figure = Figure(figsize=(panel_width * columns, sum(heights) + 0.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(rows), columns, squeeze=False, height_ratios=heights)
    for row, row_axes in zip(rows, axes):
        for ax, panel in zip(row_axes, row):
            (_draw_lines if isinstance(panel, Lines) else _draw_bars)(ax, panel)
        for ax in row_axes[len(row):]:
            ax.set_visible(False)
    figure.suptitle(title)
    path = png_path(csv_path)
    drawn = io.BytesIO()
    figure.savefig(drawn, format="png", dpi=DPI)
    # a palette of 256 colours: the same picture in a third of the bytes (the PNGs live in git)
    Image.open(drawn).convert("RGB").quantize(256).save(path, optimize=True)
    print(f"wrote {path}")
    return path


def _draw_lines(ax, panel: Lines) -> None:
    for label, points in panel.series.items():
        if points:
            ax.plot(*zip(*points), marker="o", markersize=3, label=label,
                    linestyle="--" if label in panel.dashed else "-")
    if panel.reference is not None:
        ax.axhline(panel.reference, color="grey", linestyle="--", linewidth=1)
    if panel.x_log:
        ax.set_xscale("log", base=2)
    if panel.y_from_zero:
        ax.set_ylim(bottom=0)
    ax.set_title(panel.title, fontsize="medium")
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def _draw_bars(ax, panel: Bars) -> None:
    count = max(1, len(panel.series))
    thickness = 0.8 / count
    for i, (label, values) in enumerate(panel.series.items()):
        # the first series at the top of each group, the first category at the top of the panel
        positions = [c - 0.4 + thickness * (i + 0.5) for c in range(len(panel.categories))]
        ax.barh(positions, values, height=thickness, label=label)
    ax.set_yticks(range(len(panel.categories)), panel.categories, fontsize="small")
    ax.invert_yaxis()
    if panel.reference is not None:
        ax.axvline(panel.reference, color="grey", linestyle="--", linewidth=1)
    if panel.x_log:
        ax.set_xscale("log")
    ax.set_title(panel.title, fontsize="medium")
    ax.set_xlabel(panel.xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    if len(panel.series) > 1:
        ax.legend(fontsize="small")
