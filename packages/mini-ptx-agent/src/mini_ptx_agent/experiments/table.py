"""The experiment's per-turn table: every trajectory's :class:`~mini_ptx_agent.runs.turns.TurnRow` in
``turns.csv`` and ``turns.parquet``, the files reports and training-data pipelines read.

Both hold the same rows in the same order (trajectory in plan order, then turn) and the columns of ``TurnRow``
in its field order. Parquet keeps types (``speedups`` a map of workload uuid to speedup, the families lists of
strings, nulls as nulls); CSV writes those three kinds of column as JSON and a null as an empty cell
(:func:`mini_ptx_agent.reports.inputs.read_turns_csv` reads it back).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from ..runs.directory import RunLayout
from ..runs.turns import TurnRow, turn_rows
from .directory import ExperimentLayout
from .plan import ExperimentPlan


def experiment_rows(plan: ExperimentPlan, root: Path) -> list[TurnRow]:
    """The rows of every trajectory of ``plan`` with a run directory under ``root``, in plan order.

    Raises:
        TrajectoryError, ValueError: a trajectory or evaluation file is unreadable (see
            :func:`~mini_ptx_agent.runs.turns.turn_rows`).
    """
    layout = ExperimentLayout(root)
    rows: list[TurnRow] = []
    for t in plan.trajectories:
        run_dir = layout.run_dir(t.id)
        if RunLayout(run_dir).plan_path.is_file():
            rows += turn_rows(run_dir, experiment=plan.name, trajectory=t.id, replica=t.replica)
    return rows


_JSON_COLUMNS = ("speedups", "ptx_families", "sass_families", "executed_families")


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {
        "replica": pa.int64(), "turn": pa.int64(), "tokens_in": pa.int64(), "tokens_out": pa.int64(),
        "reasoning_tokens": pa.int64(), "target_speedup": pa.float64(), "min_speedup": pa.float64(),
        "latency_ms": pa.float64(), "cost_usd": pa.float64(), "seconds": pa.float64(),
        "executed_on_gpu": pa.bool_(), "target_met": pa.bool_(), "demo": pa.bool_(),
        "speedups": pa.map_(pa.string(), pa.float64()), "ptx_families": pa.list_(pa.string()),
        "sass_families": pa.list_(pa.string()), "executed_families": pa.list_(pa.string()),
    }  # fmt: skip
    return pa.schema([(name, types.get(name, pa.string())) for name in TurnRow.model_fields])


def _replace(path: Path, write: Any) -> None:
    """Write through a temporary file, then rename: a reader never sees half a table."""
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


def write_turns(rows: list[TurnRow], root: Path) -> tuple[Path, Path]:
    """Write ``turns.csv`` and ``turns.parquet`` under ``root``; returns their paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    layout = ExperimentLayout(root)
    data = [row.model_dump(mode="json") for row in rows]
    columns = list(TurnRow.model_fields)

    def csv_file(path: Path) -> None:
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for record in data:
                writer.writerow(
                    {
                        k: json.dumps(v) if k in _JSON_COLUMNS and v is not None else v
                        for k, v in record.items()
                    }
                )

    def parquet_file(path: Path) -> None:
        records = [{**r, "speedups": list(r["speedups"].items())} for r in data]
        pq.write_table(pa.Table.from_pylist(records, schema=_arrow_schema()), path)

    _replace(layout.turns_csv, csv_file)
    _replace(layout.turns_parquet, parquet_file)
    return layout.turns_csv, layout.turns_parquet
