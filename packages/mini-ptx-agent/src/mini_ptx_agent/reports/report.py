"""``ptxbench report``: run directories in, ``report.html`` + one PNG and one CSV per figure out."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from rich.table import Table

from .drilldown import trajectory_details
from .figures import (
    Figure,
    heatmap_figure,
    metric_rows,
    release_date_figure,
    scatter_figure,
    tag_figure,
    turn_limit_figure,
)
from .html import METRIC_COLUMNS, metric_cells, render_html
from .inputs import ReportError, Source, read_source
from .metrics import GroupBy, GroupMetrics, default_turn_limits, metrics_by_group, trajectories
from .provenance import ReportProvenance, provenance, release_dates, warnings_for

REPORT_FILE = "report.html"
METRICS_CSV = "metrics.csv"


class ReportResult(BaseModel):
    """What ``ptxbench report`` wrote and found (``--json`` prints this)."""

    model_config = ConfigDict(extra="forbid")

    out_dir: str
    html: str
    """Path of report.html."""
    files: list[str]
    """Every file written: the page, one PNG and one CSV per figure, metrics.csv."""
    by: str
    turn_limits: list[int]
    trajectories: int
    turns: int
    metrics: list[GroupMetrics]
    provenance: ReportProvenance


def parse_turn_limits(text: str) -> list[int]:
    """``"1,4,8"`` -> ``[1, 4, 8]`` (sorted, unique).

    Raises:
        ReportError: a part is not a positive integer.
    """
    try:
        limits = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        limits = []
    if not limits or limits[0] < 1:
        raise ReportError(
            f"--turn-limits must be positive integers separated by commas, e.g. 1,4,8; got {text!r}"
        )
    return limits


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    """Rows as CSV with the first row's keys as header (an empty table writes an empty file)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        if rows:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def build_report(
    run_dirs: Sequence[Path],
    out_dir: Path,
    *,
    by: GroupBy = "model",
    turn_limits: Sequence[int] | None = None,
    include_demo: bool = False,
    step: Callable[[str], None] = lambda _: None,
) -> ReportResult:
    """Read ``run_dirs``, compute every metric and write the report into ``out_dir``.

    ``turn_limits``: the T of the @T metrics; None: :func:`~.metrics.default_turn_limits` (1, 4, 8 up to the
    most turns a trajectory made, and that number). ``step`` is called with a short description before each
    stage (for a progress display).

    Raises:
        ReportError: no input given, an input cannot be read, or there is no finished turn to report on
            (nothing is written then).
    """
    if not run_dirs:
        raise ReportError("give at least one run or experiment directory")
    if turn_limits is not None and (not turn_limits or min(turn_limits) < 1):
        raise ReportError(f"turn limits must be positive integers, got {list(turn_limits)}")
    step("reading run directories")
    sources: list[Source] = [read_source(Path(p)) for p in run_dirs]
    rows = [row for s in sources for row in s.rows]
    try:
        everything = trajectories(rows)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    demo = [t for t in everything if t.first.demo]
    counted = everything if include_demo else [t for t in everything if not t.first.demo]
    pending = sum(s.pending for s in sources)
    if not counted:
        names = ", ".join(str(p) for p in run_dirs)
        if demo:
            raise ReportError(f"{names}: only demo trajectories (the bundled demo replay, not a model's result); "
                              "pass --include-demo to report on them anyway")  # fmt: skip
        raise ReportError(f"{names}: no finished turn to report on yet ({pending} trajectory directories without "
                          "one); run the experiment (or resume it) and report again")  # fmt: skip
    limits = sorted(set(turn_limits)) if turn_limits is not None else default_turn_limits(counted)
    step("computing metrics and intervals")
    counted_rows = [row for t in counted for row in t.turns]
    warnings = warnings_for(counted_rows, len(demo), include_demo, pending)
    prov = provenance(sources, warnings)
    metrics = metrics_by_group(counted, by, limits)
    step("drawing figures")
    top = limits[-1]
    figures: list[Figure] = [turn_limit_figure(metrics, by)]
    dates = {m: d for m, d in release_dates(sources).items() if any(t.first.model == m for t in counted)}
    if dates:
        figures.append(release_date_figure(counted, dates, top))
    figures += [heatmap_figure(counted, top), tag_figure(counted, top), scatter_figure(counted, top)]
    step("writing the report")
    run_dirs_of = {key: path for source in sources for key, path in source.trajectory_dirs.items()}
    page = render_html(by, metrics, figures, prov, trajectory_details(counted, run_dirs_of))
    try:
        files = _write(out_dir, figures, metrics, page)
    except OSError as exc:
        raise ReportError(f"cannot write the report into {out_dir}: {exc}; give another --out") from None
    return ReportResult(
        out_dir=str(out_dir), html=files[0], files=files, by=by,
        turn_limits=limits, trajectories=len(counted), turns=len(counted_rows), metrics=metrics, provenance=prov,
    )  # fmt: skip


def _write(out_dir: Path, figures: Sequence[Figure], metrics: Sequence[GroupMetrics], page: str) -> list[str]:
    """Write the page, each figure's PNG and CSV, and metrics.csv; the paths written, the page first."""
    out_dir.mkdir(parents=True, exist_ok=True)
    html = out_dir / REPORT_FILE
    html.write_text(page, encoding="utf-8")
    files = [html]
    for figure in figures:
        (out_dir / f"{figure.name}.png").write_bytes(figure.png)
        write_csv(out_dir / f"{figure.name}.csv", figure.rows)
        files += [out_dir / f"{figure.name}.png", out_dir / f"{figure.name}.csv"]
    write_csv(out_dir / METRICS_CSV, metric_rows(metrics))
    return [str(path) for path in [*files, out_dir / METRICS_CSV]]


def summary_table(result: ReportResult) -> Table:
    """The compact terminal table: one row per group and turn limit, the page's summary cells."""
    table = Table(
        title=f"PTXBench report by {result.by}: {result.trajectories} trajectories, {result.turns} turns"
    )
    for index, column in enumerate(METRIC_COLUMNS):
        table.add_column(column, justify="left" if index == 0 else "right", overflow="fold")
    for m in result.metrics:
        table.add_row(*metric_cells(m))
    return table
