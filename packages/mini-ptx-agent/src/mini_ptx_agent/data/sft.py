"""``ptxbench data sft``: the SFT dataset of a recipe, as parquet and JSON Lines, with its dataset card.

``--recipe fixit`` reads ``pairs.jsonl`` (:mod:`mini_ptx_agent.data.pairs`), ``--recipe kernelgen`` reads
``reasoning.jsonl`` (:mod:`mini_ptx_agent.data.reasoning`), and each record becomes one
:class:`~mini_ptx_agent.data.rows.SFTRow`. A row is left out when the evaluator flagged the kernel it teaches
(unless ``include_flagged``: then it is kept with its flags), when it has no reasoning, or when its tokens exceed
``max_tokens``; the card counts each reason. Writes ``sft.parquet`` (pyarrow, nested columns), ``sft.jsonl``
(the same rows), ``card.json`` and ``README.md`` (:mod:`mini_ptx_agent.data.card`), each through a temporary file
and a rename, so running it again rewrites them whole.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from .card import write_card
from .pairs import PAIRS_FILE, PairRecord
from .reasoning import REASONING_FILE, ReasoningEntry
from .records import DataStepError, read_jsonl, step_file, write_jsonl
from .rows import FixOutcome, SFTRow, final_answer, loss_mask, normalise, token_counts

Recipe = Literal["fixit", "kernelgen"]
SFT_JSONL = "sft.jsonl"
SFT_PARQUET = "sft.parquet"
DEFAULT_MAX_TOKENS = 32768
"""Default token cap of a row (cl100k_base): the agent's largest system prompts are about 26k tokens."""


def fixit_row(pair: PairRecord) -> SFTRow:
    """The 5-message row of one pair (system, task, wrong kernel, error log, reasoning and fixed kernel).

    Raises:
        ValueError: the messages do not make a training conversation.
    """
    from ..extraction import FENCE_TAG, fenced

    failure = pair.failure
    language = failure.task.language
    messages = normalise(
        [
            {"role": "system", "content": failure.system},
            {"role": "user", "content": failure.task_message},
            {"role": "assistant", "content": fenced(failure.kernel, FENCE_TAG[language])},
            {"role": "user", "content": failure.error_log},
            {"role": "assistant", "content": final_answer(pair.reasoning, pair.fixed_kernel, language)},
        ]
    )
    report = pair.report
    fix = FixOutcome(
        kernel_hash=pair.fixed_kernel_hash, status=report.status.value, executed_on_gpu=report.executed_on_gpu,
        min_speedup=report.min_speedup, architecture_families=pair.architecture_families,
        repair_record=pair.repair_record,
    )  # fmt: skip
    return SFTRow(
        id=f"fixit-{pair.id}", recipe="fixit", messages=messages, loss_mask=loss_mask(messages),
        tokens=token_counts(messages), provenance=failure.provenance, kernel_hash=pair.fixed_kernel_hash,
        teacher_model=pair.call.model, fix=fix, flags=pair.flags,
    )  # fmt: skip


def kernelgen_row(entry: ReasoningEntry) -> SFTRow:
    """The 3-message row of one kernel (system, task, reasoning and kernel).

    Raises:
        ValueError: the messages do not make a training conversation.
    """
    record = entry.kernel
    messages = normalise(
        [
            {"role": "system", "content": record.system},
            {"role": "user", "content": record.task_message},
            {
                "role": "assistant",
                "content": final_answer(entry.reasoning, record.kernel, record.task.language),
            },
        ]
    )
    return SFTRow(
        id=f"kernelgen-{record.id}", recipe="kernelgen", messages=messages, loss_mask=loss_mask(messages),
        tokens=token_counts(messages), provenance=record.provenance, kernel_hash=record.provenance.kernel_hash,
        teacher_model=entry.call.model, flags=record.flags,
    )  # fmt: skip


def _candidates(recipe: Recipe, source: Path) -> tuple[list[SFTRow], Counter[str]]:
    left_out = Counter[str]()
    rows = []
    if recipe == "fixit":
        rows = [fixit_row(pair) for pair in read_jsonl(step_file(source, PAIRS_FILE), PairRecord)]
    else:
        for entry in read_jsonl(step_file(source, REASONING_FILE), ReasoningEntry):
            if not entry.reasoning:
                left_out["no_reasoning"] += 1
                continue
            rows.append(kernelgen_row(entry))
    return rows, left_out


def build_sft(
    recipe: Recipe,
    source: Path,
    output: Path,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    include_flagged: bool = False,
) -> dict[str, Any]:
    """Write the dataset of ``recipe`` from ``source`` (the pairs or reasoning file, or its directory) into
    ``output``; returns the card (counts, token statistics, what was left out and why).

    Raises:
        DataStepError: the input file is missing or does not validate; ``max_tokens`` below 1.
    """
    if max_tokens < 1:
        raise DataStepError(f"--max-tokens {max_tokens}: give a positive token cap")
    candidates, left_out = _candidates(recipe, Path(source))
    rows = []
    for row in candidates:
        if row.flags and not include_flagged:
            left_out["flagged"] += 1
            for kind in sorted({f.kind for f in row.flags}):
                left_out[f"flagged:{kind}"] += 1
        elif row.tokens.total > max_tokens:
            left_out["over_token_cap"] += 1
        else:
            rows.append(row)
    output = Path(output)
    write_jsonl(output / SFT_JSONL, rows)
    _write_parquet(output / SFT_PARQUET, rows)
    options = {
        "recipe": recipe,
        "source": str(source),
        "max_tokens": max_tokens,
        "include_flagged": include_flagged,
    }
    return write_card(output, recipe, rows, left_out, options)


def _write_parquet(path: Path, rows: list[SFTRow]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..trajectory import redact_strings

    tmp = path.with_name(f".{path.name}.tmp")
    records = [redact_strings(row.model_dump(mode="json")) for row in rows]
    table = pa.Table.from_pylist(records, schema=arrow_schema())
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def arrow_schema() -> Any:
    """The parquet schema of :class:`SFTRow` (nested columns; nulls where a field is None)."""
    import pyarrow as pa

    from .records import Provenance

    string, flt = pa.string(), pa.float64()
    provenance = pa.struct(
        [(name, pa.int64() if name in ("replica", "turn") else pa.bool_() if name == "executed_on_gpu"
          else flt if name == "min_speedup" else string) for name in Provenance.model_fields]
    )  # fmt: skip
    return pa.schema(
        [
            ("format", string), ("id", string), ("recipe", string),
            ("messages", pa.list_(pa.struct([("role", string), ("content", string)]))),
            ("loss_mask", pa.list_(pa.int8())),
            ("tokens", pa.struct([("prompt", pa.int64()), ("completion", pa.int64()), ("total", pa.int64()),
                                  ("tokenizer", string)])),
            ("provenance", provenance), ("kernel_hash", string), ("teacher_model", string),
            ("fix", pa.struct([("kernel_hash", string), ("status", string), ("executed_on_gpu", pa.bool_()),
                               ("min_speedup", flt), ("architecture_families", pa.list_(string)),
                               ("repair_record", string)])),
            ("flags", pa.list_(pa.struct([("kind", string), ("workload", string), ("detail", string)]))),
        ]
    )  # fmt: skip
