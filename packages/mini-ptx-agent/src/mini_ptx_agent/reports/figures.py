"""The report's figures, drawn with matplotlib (object API, Agg canvas: no display, no global pyplot state).

Each figure comes with the table it was drawn from (the CSV written beside it), so every plotted number can
be checked. Intervals are the 95% intervals of :mod:`.stats`; error bars span them. Legends sit outside the
axes (right of the last panel), so they never cover a bar or a point, and each PNG is cropped to what was
drawn (a tight bounding box), so long tick labels (model names, rotated) are never cut off.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.figure import Figure as MplFigure

from .metrics import GroupMetrics, Trajectory, group_metrics, grouped

DPI = 110


@dataclass
class Figure:
    """One figure of the report: its file stem, caption, PNG bytes and the rows behind it."""

    name: str
    title: str
    caption: str
    png: bytes
    rows: list[dict] = field(default_factory=list)
    """The table behind the figure (one dict per CSV row, the same keys in every row)."""


def _png(fig: MplFigure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.15)
    return buffer.getvalue()


def _legend_outside(ax, title: str) -> None:
    """The legend of ``ax``'s artists, right of ``ax`` (the figure's last panel), outside every axes."""
    ax.legend(title=title, fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def _nothing(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, wrap=True, color="0.35")
    ax.set_xticks([])
    ax.set_yticks([])


def _errors(estimates) -> tuple[list[float], list[list[float]]]:
    values, spans = [], [[], []]
    for e in estimates:
        value = math.nan if e.value is None else e.value
        values.append(value)
        spans[0].append(0.0 if e.value is None else value - e.low)
        spans[1].append(0.0 if e.value is None else e.high - value)
    return values, spans


def metric_rows(metrics: Sequence[GroupMetrics], **extra) -> list[dict]:
    """Flat CSV rows of :class:`GroupMetrics`: value, low, high and n of every metric."""
    rows = []
    for m in metrics:
        row = {
            **extra,
            "group": m.group,
            "turn_limit": m.turn_limit,
            "trajectories": m.trajectories,
            "unknown": m.unknown,
        }
        for name in ("correct", "speedup_median", "speedup_geomean", "target", "verified"):
            estimate = getattr(m, name)
            row |= {
                f"{name}": estimate.value,
                f"{name}_low": estimate.low,
                f"{name}_high": estimate.high,
                f"{name}_n": estimate.n,
            }
        row["nsight_confirmed"] = m.nsight_confirmed
        rows.append(row)
    return rows


PANELS = (
    ("correct", "correct@T (rate)"),
    ("speedup_median", "median best speedup@T (x)"),
    ("verified", "verified@T (rate)"),
)


def turn_limit_figure(metrics: Sequence[GroupMetrics], by: str) -> Figure:
    """correct@T, median best speedup@T and verified@T against the turn limit, one line per group."""
    fig = MplFigure(figsize=(13, 4))
    axes = fig.subplots(1, 3, gridspec_kw={"wspace": 0.3})
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.13, top=0.95)
    groups = sorted({m.group for m in metrics})
    for ax, (name, label) in zip(axes, PANELS, strict=True):
        for index, group in enumerate(groups):
            mine = [m for m in metrics if m.group == group]
            values, spans = _errors([getattr(m, name) for m in mine])
            offset = (index - (len(groups) - 1) / 2) * 0.08  # keep overlapping bars apart
            ax.errorbar(
                [m.turn_limit + offset for m in mine], values, yerr=spans, marker="o", capsize=3, label=group
            )
        ax.set_xlabel("turn limit T")
        ax.set_ylabel(label)
        ax.set_xticks(sorted({m.turn_limit for m in metrics}))
        if name != "speedup_median":
            ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if all(getattr(m, name).value is None for m in metrics):
            _nothing(ax, "no data: n = 0 at every turn limit")
    _legend_outside(axes[-1], by)
    return Figure(
        name="metrics_vs_turn_limit",
        title=f"Metrics against turn limit, by {by}",
        caption="Points are the metric at each turn limit; bars span the 95% interval (Wilson for rates, "
        "bootstrap for the median). A missing point has n = 0.",
        png=_png(fig),
        rows=metric_rows(metrics),
    )


def release_date_figure(trajs: Sequence[Trajectory], dates: dict[str, str], limit: int) -> Figure:
    """The three metrics at ``limit`` against each model's release date (ISO ``YYYY-MM-DD``)."""
    from datetime import date

    metrics = [
        group_metrics(name, members, limit)
        for name, members in grouped(trajs, lambda t: t.first.model).items()
        if name in dates
    ]
    metrics.sort(key=lambda m: dates[m.group])
    fig = MplFigure(figsize=(13, 4))
    axes = fig.subplots(1, 3, sharex=True, gridspec_kw={"wspace": 0.3})
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.22, top=0.95)
    when = [date.fromisoformat(dates[m.group]) for m in metrics]
    for ax, (name, label) in zip(axes, PANELS, strict=True):
        values, spans = _errors([getattr(m, name) for m in metrics])
        ax.errorbar(when, values, yerr=spans, marker="o", capsize=3, linestyle="none")
        for x, y, m in zip(when, values, metrics, strict=True):
            if not math.isnan(y):
                ax.annotate(m.group, (x, y), fontsize="x-small", xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("model release date")
        ax.set_ylabel(label.replace("@T", f"@{limit}"))
        ax.grid(alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30)
    return Figure(
        name="metrics_vs_release_date",
        title=f"Metrics at T = {limit} against model release date",
        caption="One point per model whose release date the experiment config names; bars are 95% intervals.",
        png=_png(fig),
        rows=metric_rows(metrics)
        and [{"release_date": dates[r["group"]], **r} for r in metric_rows(metrics)],
    )


def heatmap_figure(trajs: Sequence[Trajectory], limit: int) -> Figure:
    """Median best speedup@``limit`` for each definition x model cell, with the n behind it."""
    definitions = sorted({t.first.definition for t in trajs})
    models = sorted({t.label("model") for t in trajs})
    cells = {
        key: group_metrics(f"{key[0]} / {key[1]}", members, limit)
        for key, members in grouped(trajs, lambda t: (t.first.definition, t.label("model"))).items()
    }
    width, height = max(5, 1.6 * len(models) + 3), max(3, 0.55 * len(definitions) + 2)
    fig = MplFigure(figsize=(width, height))
    ax = fig.subplots()
    # Margins from the label lengths (about 0.095 inch a character at the default size); no tight bbox pass.
    fig.subplots_adjust(left=min(0.6, (0.3 + 0.095 * max(map(len, definitions))) / width),
                        bottom=min(0.6, (0.4 + 0.055 * max(map(len, models))) / height), top=0.9, right=1 - 0.6 / width)  # fmt: skip
    grid = [[math.nan for _ in models] for _ in definitions]
    rows = []
    for (definition, model), m in cells.items():
        estimate = m.speedup_median
        grid[definitions.index(definition)][models.index(model)] = (
            math.nan if estimate.value is None else estimate.value
        )
        rows.append({"definition": definition, "model": model, "turn_limit": limit, "speedup_median": estimate.value,
                     "speedup_median_low": estimate.low, "speedup_median_high": estimate.high, "speedup_n": estimate.n,
                     "trajectories": m.trajectories})  # fmt: skip
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    if any(not math.isnan(v) for line in grid for v in line):
        fig.colorbar(image, ax=ax, label=f"median best speedup@{limit} (x)")
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right")
    ax.set_yticks(range(len(definitions)), definitions)
    known = [v for line in grid for v in line if not math.isnan(v)]
    dark_below = 0.6 * max(known) if known else 0.0  # white text on viridis' dark end, black on its light end
    for (definition, model), m in cells.items():
        value = m.speedup_median.value
        text = f"n={m.speedup_median.n}" if value is None else f"{value:.2f}x\nn={m.speedup_median.n}"
        color = "black" if value is None or value >= dark_below else "white"
        ax.text(models.index(model), definitions.index(definition), text, ha="center", va="center",
                fontsize="small", color=color)  # fmt: skip
    if not any(r["speedup_median"] is not None for r in rows):
        ax.set_title("no GPU-timed correct kernel: no speedups", color="0.35", fontsize="medium")
    return Figure(
        name="definition_model_heatmap",
        title=f"Median best speedup@{limit}: definition x model",
        caption="Each cell is the median over trajectories with a GPU-timed correct kernel; n is that count "
        "(an empty cell has none).",
        png=_png(fig),
        rows=rows,
    )


def tag_figure(trajs: Sequence[Trajectory], limit: int) -> Figure:
    """correct@``limit`` and median best speedup@``limit`` for each prompt tag, one bar per model."""
    tags = sorted({t.first.prompt_tag for t in trajs})
    models = sorted({t.label("model") for t in trajs})
    cells = {
        key: group_metrics(f"{key[0]} / {key[1]}", members, limit)
        for key, members in grouped(trajs, lambda t: (t.first.prompt_tag, t.label("model"))).items()
    }
    fig = MplFigure(figsize=(max(8, 1.2 * len(tags) * max(1, len(models)) + 4), 4.5))
    axes = fig.subplots(1, 2, gridspec_kw={"wspace": 0.25})
    fig.subplots_adjust(left=0.08, right=0.98, bottom=min(0.5, 0.1 + 0.012 * max(map(len, tags))), top=0.95)
    width = 0.8 / max(1, len(models))
    for ax, (name, label) in zip(axes, PANELS[:2], strict=True):
        for index, model in enumerate(models):
            picked = [cells.get((tag, model)) for tag in tags]
            estimates = [getattr(m, name) if m else None for m in picked]
            values, spans = _errors([e for e in estimates if e is not None])
            xs = [
                i + (index - (len(models) - 1) / 2) * width for i, e in enumerate(estimates) if e is not None
            ]
            ax.bar(xs, [0 if math.isnan(v) else v for v in values], width, yerr=spans, capsize=3, label=model)
        ax.set_xticks(range(len(tags)), tags, rotation=20, ha="right")
        ax.set_ylabel(label.replace("@T", f"@{limit}"))
        ax.grid(alpha=0.3, axis="y")
        ax.set_ylim(0, 1.02 if name == "correct" else None)
        if all(getattr(m, name).value is None for m in cells.values()):
            ax.text(
                0.5, 0.5, "no data: n = 0", ha="center", va="center", transform=ax.transAxes, color="0.35"
            )
    _legend_outside(axes[-1], "model")
    rows = [{"prompt_tag": tag, "model": model, **row}
            for (tag, model), m in cells.items() for row in metric_rows([m])]  # fmt: skip
    return Figure(
        name="prompt_tag_comparison",
        title=f"Prompt tags at T = {limit}",
        caption="Bars are correct@T and the median best speedup@T per prompt tag and model; error bars are 95% "
        "intervals. A bar of height 0 with no error bar has n = 0.",
        png=_png(fig),
        rows=rows,
    )


def scatter_figure(trajs: Sequence[Trajectory], limit: int) -> Figure:
    """Completion tokens (reasoning included) against best speedup@``limit``, one point per trajectory."""
    fig = MplFigure(figsize=(7, 4.5))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.95)
    rows = []
    for traj in trajs:
        rows.append({"experiment": traj.experiment, "trajectory": traj.trajectory, "model": traj.label("model"),
                     "definition": traj.first.definition, "tokens_out": traj.tokens_out(),
                     "reasoning_tokens": traj.reasoning_tokens(), "best_speedup": traj.best_speedup(limit)})  # fmt: skip
    plotted = [r for r in rows if r["tokens_out"] is not None and r["best_speedup"] is not None]
    for model in sorted({r["model"] for r in plotted}):
        mine = [r for r in plotted if r["model"] == model]
        ax.scatter(
            [r["tokens_out"] for r in mine], [r["best_speedup"] for r in mine], label=model, alpha=0.7, s=18
        )
    if plotted:
        ax.set_xscale("log")
        _legend_outside(ax, "model")
        ax.grid(alpha=0.3)
    else:
        _nothing(ax, "no trajectory has both token counts and a GPU-timed correct kernel")
    ax.set_xlabel("completion tokens per trajectory (reasoning included)")
    ax.set_ylabel(f"best speedup@{limit} (x)")
    return Figure(
        name="tokens_vs_speedup",
        title=f"Tokens against best speedup@{limit}",
        caption=f"One point per trajectory with token counts and a GPU-timed correct kernel ({len(plotted)} of "
        f"{len(rows)}); the CSV lists every trajectory.",
        png=_png(fig),
        rows=rows,
    )
