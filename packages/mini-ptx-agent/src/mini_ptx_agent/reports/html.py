"""``report.html``: one self-contained page (figures inlined as PNG data URIs, CSS inline, no script, no
network), so it opens offline and can be mailed as one file."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape

from .drilldown import TrajectoryDetail, details_html
from .figures import Figure
from .metrics import GroupMetrics
from .provenance import ReportProvenance
from .stats import Estimate

DEFINITIONS = (
    (
        "correct@T",
        "the share of trajectories in which any of the first T turns PASSED every workload, over the "
        "trajectories whose answer is known (one with no PASSED turn and a turn not executed or hit by an outage "
        "is unknown and left out).",
    ),
    (
        "best speedup@T",
        "per trajectory, the best minimum-over-workloads speedup (x, the baseline's or else the "
        "reference's latency over the kernel's) of a PASSED, GPU-timed turn within the first T turns, summarized "
        "by the median and the geometric mean over the trajectories that have one.",
    ),
    ("target@T", "the share of known trajectories whose best speedup within T turns reached the target."),
    (
        "verified@T",
        "the share of known trajectories with a PASSED turn within T whose SASS holds the target "
        "architecture's required families (sm_90a: HGMMA and UTMALDG; sm_100a: a UTC* tcgen05 opcode); the "
        "count in brackets is how many of them Nsight Compute confirmed executing those families.",
    ),
    (
        "tokens vs speedup",
        "one point per trajectory: its completion tokens (reasoning included) over all turns "
        "against its best speedup.",
    ),
    (
        "intervals",
        "95% intervals: Wilson score intervals for rates, percentile bootstrap (2,000 resamples, "
        "seeded) for the median and geometric mean; n is the number of trajectories behind each number.",
    ),
)
"""Every metric of the page, one sentence each (shown in the report)."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: .9em; } td, th { border: 1px solid #ddd; padding: .3em .6em; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warning { background: #fff3cd; border: 1px solid #e0b400; padding: .6em 1em; margin: .5em 0; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #444; } dt { font-weight: bold; } dd { margin: 0 0 .5em 1.5em; }
details.trajectory { margin: .3em 0; } details.trajectory > table { margin: .4em 0 1em 1.5em; }
pre { white-space: pre-wrap; max-height: 40em; overflow: auto; font-size: .8em; margin: .3em 0; }
"""


def _rate(e: Estimate) -> str:
    if e.value is None:
        return "n/a (n=0)"
    return f"{e.value:.0%} [{e.low:.0%}, {e.high:.0%}] n={e.n}"


def _speed(e: Estimate) -> str:
    if e.value is None:
        return "n/a (n=0)"
    return f"{e.value:.2f}x [{e.low:.2f}, {e.high:.2f}] n={e.n}"


def metric_cells(m: GroupMetrics) -> list[str]:
    """The summary table's cells of one group at one limit (the same text in the page and the terminal)."""
    verified = _rate(m.verified) + (f" ({m.nsight_confirmed} Nsight-confirmed)" if m.verified.n else "")
    return [m.group, str(m.turn_limit), str(m.trajectories), str(m.unknown), _rate(m.correct),
            _speed(m.speedup_median), _speed(m.speedup_geomean), _rate(m.target), verified]  # fmt: skip


METRIC_COLUMNS = ("group", "T", "trajectories", "unknown", "correct@T", "median best speedup@T",
                  "geomean best speedup@T", "target@T", "verified@T")  # fmt: skip


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numbers: bool = True) -> str:
    """An HTML table; with ``numbers`` every cell after the first is right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(c)}</td>' if i and numbers else f"<td>{escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return (
        f'<figure id="{escape(figure.name)}"><h3>{escape(figure.title)}</h3>'
        f'<img alt="{escape(figure.title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{escape(figure.caption)} Data: <code>{escape(figure.name)}.csv</code>; image: "
        f"<code>{escape(figure.name)}.png</code>.</figcaption></figure>"
    )


def render_html(
    by: str,
    metrics: Sequence[GroupMetrics],
    figures: Sequence[Figure],
    prov: ReportProvenance,
    details: Sequence[TrajectoryDetail] = (),
) -> str:
    """The whole page as one string (UTF-8 HTML5); ``details``: the per-trajectory drill-down."""
    warnings = "".join(f'<p class="warning">{escape(line)}</p>' for line in prov.warnings)
    definitions = "".join(f"<dt>{escape(name)}</dt><dd>{escape(text)}</dd>" for name, text in DEFINITIONS)
    summary = _table(METRIC_COLUMNS, [metric_cells(m) for m in metrics])
    what_ran = [
        ("report made", f"{prov.made_at} by {prov.made_by}"),
        *(("input", line) for line in prov.inputs),
        ("GPU", "; ".join(prov.gpus)),
        ("driver", prov.driver),
        ("clocks", prov.clocks),
        *((f"version: {name}", value) for name, value in sorted(prov.versions.items())),
    ]
    if not prov.versions:
        what_ran.append(("versions", "unknown"))
    nothing_timed = ("(every definition)", "none: no kernel was timed on a GPU, so no speedup was measured")
    baselines = [(d, line) for d, lines in prov.baselines.items() for line in lines] or [
        ("(any)", "unknown") if prov.gpu_timed else nothing_timed
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>PTXBench report</title><style>{_STYLE}</style></head><body>"
        f"<h1>PTXBench report, by {escape(by)}</h1>{warnings}"
        f"<h2>Metrics</h2><dl>{definitions}</dl>"
        f'<h2>Summary</h2><div id="summary">{summary}</div>'
        f"<p>Table: <code>metrics.csv</code>.</p>"
        f"<h2>Figures</h2>{''.join(_figure(f) for f in figures)}"
        f"{details_html(details)}"
        f'<h2>What ran it</h2><div id="provenance">{_table(("", ""), what_ran, numbers=False)}'
        f"<h3>Baselines per definition</h3>{_table(('definition', 'baseline'), baselines, numbers=False)}</div>"
        "</body></html>"
    )
