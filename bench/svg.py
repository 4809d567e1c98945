"""A line plot as a hand-written SVG (no plotting library): cost per call
against call number, one polyline per series."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 900, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 56, 50  # margins around the plot area (legend on top)
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``."""
    raw = top / count
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(count + 2) if i * step <= top * 1.0001 or i == 0]


def line_plot(title: str, x_label: str, y_label: str,
              series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
              marks: Sequence[tuple[float, str]] = (), y_max: float | None = None) -> str:
    """The SVG document; ``series``: (name, [(x, y), ...]); ``marks``: vertical
    dashed lines at x with a label (e.g. where the calls change tool); ``y_max``:
    the top of the y axis (points above it are drawn on the top edge, and the
    plot says how many), so that a few outliers do not flatten the rest."""
    xs = [x for _n, pts in series for x, _y in pts] or [0.0, 1.0]
    ys = [y for _n, pts in series for _x, y in pts] or [1.0]
    x_max = max(xs) or 1.0
    y_top = (y_max if y_max is not None else max(ys) * 1.05) or 1.0
    clipped = sum(1 for y in ys if y > y_top)
    y_ticks = _ticks(y_top)
    y_top = max(y_top, y_ticks[-1])
    x_ticks = _ticks(x_max)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + pw * x / max(x_max, x_ticks[-1])

    def py(y: float) -> float:
        return TOP + ph * (1 - min(y, y_top) / y_top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="15">'
           f'{escape(title)}</text>']
    for t in y_ticks:
        y = py(t)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in x_ticks:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{TOP + ph}" x2="{x:.1f}" y2="{TOP + ph + 5}" '
                   'stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + ph + 18}" text-anchor="middle">{t:g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" '
               'stroke="black"/>')
    for x, label in marks:
        out.append(f'<line x1="{px(x):.1f}" y1="{TOP}" x2="{px(x):.1f}" y2="{TOP + ph}" '
                   'stroke="#888" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{px(x) + 4:.1f}" y="{TOP + 14}" fill="#555">'
                   f'{escape(label)}</text>')
    for i, (name, pts) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                   'stroke-width="1"/>')
        lx, ly = LEFT + 260 * i, TOP - 14  # the legend, in the top margin
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 20}" y2="{ly}" stroke="{color}" '
                   'stroke-width="2"/>')
        out.append(f'<text x="{lx + 26}" y="{ly + 4}">{escape(name)}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{HEIGHT - 12}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    if clipped:
        out.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 12}" text-anchor="end" '
                   f'fill="#555">{clipped} point(s) above {y_top:g} drawn on the top '
                   'edge</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {TOP + ph / 2})">{escape(y_label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
