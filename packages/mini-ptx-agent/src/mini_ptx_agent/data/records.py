"""What every training-data record carries: where it came from (:class:`Provenance`), and its JSONL files.

A record of any step (a mined failure, a correct kernel, a repair, an SFT row) names the turn it came from: the
experiment (or single run) directory, the trajectory's run directory inside it, the turn, the model, the task,
the sha256 of the kernel (:meth:`fibserve.trace.Solution.hash`, so equal code on the same task has one hash) and
the file of its evaluation. Paths inside the source are relative to ``source_dir``, so a reader (the inspector)
opens ``source_dir / evaluation`` to see the whole KernelReport.

Files are JSON Lines, written whole through a temporary file and a rename: a step that is killed leaves the
previous file or none, never half of one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..runs.turns import FailureClass
from ..trajectory import redact_text

T = TypeVar("T", bound=BaseModel)


class DataStepError(ValueError):
    """Input a data step cannot use (missing directory, wrong file, bad option); the message says what to fix."""


class Provenance(BaseModel):
    """The turn a record came from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    source_dir: str
    """The experiment or run directory the record was mined from (as resolved when mining)."""
    experiment: str
    """The experiment's name (a single run: its directory's name)."""
    config_hash: str | None = None
    """The experiment config's hash (``plan.json``); None for a single run."""
    run_dir: str
    """The trajectory's run directory, relative to ``source_dir`` (``runs/<trajectory id>``, or ``.``)."""
    trajectory: str
    """The trajectory's id."""
    replica: int = 0
    turn: int
    """1-based model call number within the trajectory."""
    model: str
    """The model that wrote the kernel."""
    definition: str
    language: str
    arch: str
    prompt_tag: str
    kernel_hash: str
    """sha256 of the kernel as a Solution for this task (:meth:`fibserve.trace.Solution.hash`)."""
    evaluation: str
    """The turn's KernelReport file, relative to ``source_dir``
    (``runs/<id>/exp_000/evaluations/turn_NNN.json``)."""
    status: str
    """The evaluator's overall status of the turn (``PASSED``, ``COMPILE_ERROR``, ...)."""
    failure_class: FailureClass
    executed_on_gpu: bool = False
    min_speedup: float | None = None
    """Minimum speedup over workloads (x), when every workload passed and was timed."""


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> int:
    """Write ``records`` as JSON Lines to ``path`` atomically (secrets from the environment redacted);
    returns the number written. Creates parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(redact_text(record.model_dump_json()) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def read_jsonl(path: Path, model: type[T]) -> list[T]:
    """The records of a JSON Lines file written by :func:`write_jsonl`.

    Raises:
        DataStepError: the file is missing, or a line is not a ``model`` (the message names the line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataStepError(f"{path} does not exist: run the step that writes it first")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append(model.model_validate_json(line))
            except ValidationError as exc:
                raise DataStepError(
                    f"{path}, line {number}: not a {model.__name__} record ({exc.error_count()} problem(s), "
                    f"first: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']})"
                ) from None
    return records


def step_file(path: Path, name: str) -> Path:
    """``path`` itself when it is a file, else ``path / name`` (a step's output directory)."""
    path = Path(path)
    return path if path.is_file() else path / name


def read_json(path: Path) -> Any:
    """JSON of ``path``, or None when it is missing or unreadable (a journal entry killed mid-write)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
