"""The training report: one self-contained HTML file (inline SVG, no scripts) written at the end of the job.

Plots of the logging windows on axes ticked at round values (loss with the tokens seen along the top and
validation loss with ±1 standard-error bars, tokens/s and MFU, the split of step time, learning rate, gradient
norm), for a split of several sources a chart of each source's validation bits per byte (its loss where the
bytes are unknown), the last validation figures with their standard errors (the fixed sample, and the whole split at
the end; each source's beneath), and each health rule's verdict with its numbers and what to change.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from contract.health import Verdict, Window

from observe.metrics import Evaluation, perplexity

REPORT_FILE = "training-report.html"
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
WIDTH, HEIGHT = 460, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 60, 40  # margins around the plot area (the top one holds a second x axis)
STYLE = """body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:24px}
.charts{display:flex;flex-wrap:wrap;gap:12px}svg{background:#fafafa;border:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
.PROBLEM{background:#fdd;font-weight:bold}.ok{background:#dfd}.n\\/a{background:#eee}"""

Point = tuple[float, float] | tuple[float, float, float]  # x, y and optionally the error bar's half height
Series = dict[str, list[Point]]


def tick_spacing(span: float, count: int = 5) -> float:
    """The smallest round spacing (1, 2 or 5 x 10^k) that cuts ``span`` into at most ``count`` intervals."""
    raw = span / count if span > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))


def round_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Multiples of a round spacing from the one at or below ``low`` to the one at or above ``high``."""
    step = tick_spacing(high - low or abs(low) * 0.1, count)  # a flat line: a tenth of its value
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [float(f"{i * step:.12g}") for i in range(first, max(last, first + 1) + 1)]


def tick_label(value: float, ticks: list[float]) -> str:
    """``250``, ``0.0015``, ``1.2M``: the value to the precision of the spacing, large ones with k/M/G/T."""
    largest = max(abs(t) for t in ticks)
    power = 3 * min(4, math.floor(math.log10(largest) / 3)) if largest >= 1e4 else 0
    spacing = (ticks[1] - ticks[0]) / 10**power if len(ticks) > 1 else 0.001  # a lone tick: 3 decimals at most
    digits = max(0, -math.floor(math.log10(spacing) + 1e-9))
    return f"{round(value / 10**power, digits):g}{' kMGT'[power // 3].strip()}" if value else "0"


def _finite(series: Series):
    return [
        (p[0], p[1], p[2] if len(p) > 2 else 0.0) for values in series.values() for p in values if math.isfinite(p[1])
    ]


def line_chart(title: str, series: Series, top_axis: tuple[str, float] | None = None) -> str:
    """An SVG chart, one polyline per series (non-finite points left out, error bars where a point has one),
    axes at round ticks; ``top_axis`` (name, units per step) adds a second x axis along the top."""
    points = _finite(series)
    if not points:
        return f'<svg width="{WIDTH}" height="{HEIGHT}"><text x="10" y="20">{html.escape(title)}: no data</text></svg>'
    x_ticks = round_ticks(min(p[0] for p in points), max(p[0] for p in points))
    y_ticks = round_ticks(min(y - e for _, y, e in points), max(y + e for _, y, e in points))
    (x0, x1), (y0, y1) = (x_ticks[0], x_ticks[-1]), (y_ticks[0], y_ticks[-1])

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)

    def sy(y: float) -> float:
        return HEIGHT - BOTTOM - (y - y0) / (y1 - y0) * (HEIGHT - TOP - BOTTOM)

    parts = [f'<svg width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg" font-size="11">']
    parts.append(f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>')
    parts.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{sx(x1) - LEFT}" height="{sy(y0) - TOP}" fill="none" stroke="#999"/>'
    )
    for y in y_ticks:
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{tick_label(y, y_ticks)}</text>')
    for x in x_ticks:
        parts.append(
            f'<text x="{sx(x):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{tick_label(x, x_ticks)}</text>'
        )
    parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">step</text>')
    if top_axis:
        name, scale = top_axis
        low, high = x0 * scale * (1 - 1e-9), x1 * scale * (1 + 1e-9)
        top = [t for t in round_ticks(x0 * scale, x1 * scale) if low <= t <= high]
        parts.append(f'<text x="{LEFT - 12}" y="{TOP - 6}" text-anchor="end">{html.escape(name)}</text>')
        for t in top:
            parts.append(
                f'<line x1="{sx(t / scale):.1f}" x2="{sx(t / scale):.1f}" y1="{TOP - 4}" y2="{TOP}" stroke="#999"/>'
            )
            parts.append(
                f'<text x="{sx(t / scale):.1f}" y="{TOP - 6}" text-anchor="middle">{tick_label(t, top)}</text>'
            )
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{sx(p[0]):.1f},{sy(p[1]):.1f}" for p in values if math.isfinite(p[1]))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for x, y, e in _finite({name: values}) if len(values) < 30 else ():
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>')
            if e > 0:
                low, high, left, right = sy(y - e), sy(y + e), sx(x) - 3, sx(x) + 3
                parts.append(
                    f'<path class="error-bar" d="M{sx(x):.1f},{low:.1f}V{high:.1f}M{left:.1f},{low:.1f}H{right:.1f}'
                    f'M{left:.1f},{high:.1f}H{right:.1f}" stroke="{colour}" fill="none"/>'
                )
        parts.append(f'<text x="{LEFT + 150 * i}" y="34" fill="{colour}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _series(windows: list[Window], field: str, scale: float = 1.0) -> list[Point]:
    return [(w.step, scale * getattr(w, field)) for w in windows]


def _bits_per_byte(e: Evaluation) -> str:
    return "unknown" if e.bits_per_byte is None else f"{e.bits_per_byte:.4f} ± {e.bits_per_byte_se:.4f}"


def validation_table(validation: list[tuple[int, Evaluation]], split: tuple[int, Evaluation] | None) -> str:
    """The last evaluation of the fixed sample and the whole split's: loss ± standard error, perplexity."""
    rows = [("sample", *validation[-1])] if validation else []
    rows += [("whole split", *split)] if split else []
    rows = [
        row
        for name, step, e in rows
        for row in [(name, step, e), *((f"{name}: {s}", step, v) for s, v in e.sources.items())]
    ]
    cells = "".join(
        f"<tr><td>{name}</td><td>{step}</td><td>{e.sequences:,}</td><td>{e.loss:.4f} ± {e.standard_error:.4f}</td>"
        f"<td>{perplexity(e.loss):.2f}</td><td>{_bits_per_byte(e)}</td></tr>"
        for name, step, e in rows
    )
    return (
        "<h2>Validation</h2><table><tr><th>sequences</th><th>step</th><th>count</th>"
        f"<th>loss ± standard error</th><th>perplexity</th><th>bits per byte ± standard error</th></tr>{cells}</table>"
        if rows
        else ""
    )


def source_charts(validation: list[tuple[int, Evaluation]]) -> list[str]:
    """One chart per source of a mix: its validation bits per byte ± standard error (loss where bytes are unknown)."""
    names = sorted({name for _, e in validation for name in e.sources})
    charts = []
    for name in names:
        figures = [(step, e.sources[name]) for step, e in validation if name in e.sources]
        if all(f.bits_per_byte is not None for _, f in figures):
            points = {"bits per byte ± s.e.": [(step, f.bits_per_byte, f.bits_per_byte_se) for step, f in figures]}
        else:
            points = {"loss ± s.e.": [(step, f.loss, f.standard_error) for step, f in figures]}
        charts.append(line_chart(f"Validation: {name}", points))
    return charts


def render(
    title: str,
    windows: list[Window],
    validation: list[tuple[int, Evaluation]],
    results: list[Verdict],
    split: tuple[int, Evaluation] | None = None,
    tokens_per_step: int = 0,
) -> str:
    """The report's HTML; ``tokens_per_step`` (when known) puts the tokens seen along the loss chart's top."""
    losses = [(step, e.loss, e.standard_error) for step, e in validation]
    tokens = ("tokens", float(tokens_per_step)) if tokens_per_step else None
    charts = [
        line_chart("Loss", {"training loss": _series(windows, "loss"), "validation loss ± s.e.": losses}, tokens),
        line_chart("Tokens per second", {"tokens/s": _series(windows, "tokens_per_sec")}),
        line_chart("Model FLOPs utilization", {"MFU": _series(windows, "mfu")}),
        line_chart(
            "Step time split (%)",
            {
                "input wait": _series(windows, "input_share", 100),
                "compute": _series(windows, "compute_share", 100),
                "synchronisation": _series(windows, "sync_share", 100),
            },
        ),
        line_chart("Learning rate", {"learning rate": _series(windows, "learning_rate")}),
        line_chart("Gradient norm (before clipping)", {"grad norm": _series(windows, "grad_norm")}),
        *source_charts(validation),
    ]
    rows = "".join(
        f'<tr><td>{html.escape(v.rule)}</td><td class="{v.status}">{v.status}</td><td>{html.escape(v.finding)}</td>'
        f"<td>{html.escape(v.advice) if v.ok is False else ''}</td></tr>"
        for v in results
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        "<h2>Health rules</h2><table><tr><th>rule</th><th>verdict</th><th>measured</th><th>what to change</th></tr>"
        f"{rows}</table>{validation_table(validation, split)}"
        f"<h2>Training</h2><div class='charts'>{''.join(charts)}</div></body></html>"
    )


def write_report(
    directory: str | Path, title: str, windows, validation, results, split=None, tokens_per_step: int = 0
) -> Path:
    path = Path(directory) / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(title, windows, validation, results, split, tokens_per_step), encoding="utf-8")
    return path
