"""The training report: one self-contained HTML file (inline SVG, no scripts) written at the end of the job.

Plots of the logging windows (loss and validation loss, tokens/s and MFU, the split of step time,
learning rate, gradient norm), the last validation figures with their standard errors (the fixed sample, and the
whole split at the end), and each health rule's verdict with its numbers and what to change.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from contract.health import Verdict, Window

from observe.metrics import Evaluation, perplexity

REPORT_FILE = "training-report.html"
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
WIDTH, HEIGHT = 460, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 44, 40  # margins around the plot area
STYLE = """body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:24px}
.charts{display:flex;flex-wrap:wrap;gap:12px}svg{background:#fafafa;border:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
.PROBLEM{background:#fdd;font-weight:bold}.ok{background:#dfd}.n\\/a{background:#eee}"""

Series = dict[str, list[tuple[float, float]]]


def _ticks(low: float, high: float) -> list[float]:
    return [low + (high - low) * i / 4 for i in range(5)]


def line_chart(title: str, series: Series) -> str:
    """An SVG chart, one polyline per series (non-finite points left out), axes labelled at 5 ticks."""
    points = [(x, y) for values in series.values() for x, y in values if math.isfinite(y)]
    if not points:
        return f'<svg width="{WIDTH}" height="{HEIGHT}"><text x="10" y="20">{html.escape(title)}: no data</text></svg>'
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + abs(min(ys)) * 0.1 + 1e-9

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)

    def sy(y: float) -> float:
        return HEIGHT - BOTTOM - (y - y0) / (y1 - y0) * (HEIGHT - TOP - BOTTOM)

    parts = [f'<svg width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg" font-size="11">']
    parts.append(f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>')
    for y in _ticks(y0, y1):
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
    for x in _ticks(x0, x1):
        parts.append(f'<text x="{sx(x):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{x:.0f}</text>')
    parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">step</text>')
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values if math.isfinite(y))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for x, y in values if len(values) < 30 else ():
            if math.isfinite(y):
                parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>')
        parts.append(f'<text x="{LEFT + 130 * i}" y="34" fill="{colour}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _series(windows: list[Window], field: str, scale: float = 1.0) -> list[tuple[float, float]]:
    return [(w.step, scale * getattr(w, field)) for w in windows]


def validation_table(validation: list[tuple[int, Evaluation]], split: tuple[int, Evaluation] | None) -> str:
    """The last evaluation of the fixed sample and the whole split's: loss ± standard error, perplexity."""
    rows = [("sample", *validation[-1])] if validation else []
    rows += [("whole split", *split)] if split else []
    cells = "".join(
        f"<tr><td>{name}</td><td>{step}</td><td>{e.sequences:,}</td><td>{e.loss:.4f} ± {e.standard_error:.4f}</td>"
        f"<td>{perplexity(e.loss):.2f}</td></tr>"
        for name, step, e in rows
    )
    return (
        "<h2>Validation</h2><table><tr><th>sequences</th><th>step</th><th>count</th>"
        f"<th>loss ± standard error</th><th>perplexity</th></tr>{cells}</table>"
        if rows
        else ""
    )


def render(
    title: str,
    windows: list[Window],
    validation: list[tuple[int, Evaluation]],
    results: list[Verdict],
    split: tuple[int, Evaluation] | None = None,
) -> str:
    losses = [(step, e.loss) for step, e in validation]
    charts = [
        line_chart("Loss", {"training loss": _series(windows, "loss"), "validation loss": losses}),
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


def write_report(directory: str | Path, title: str, windows, validation, results, split=None) -> Path:
    path = Path(directory) / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(title, windows, validation, results, split), encoding="utf-8")
    return path
