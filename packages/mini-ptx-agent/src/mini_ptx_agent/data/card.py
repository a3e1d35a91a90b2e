"""The dataset card of an SFT dataset: ``card.json`` for programs, ``README.md`` for people.

It says what the rows are (format, recipe, tokenizer), how many there are per definition, failure class (Fixit:
the class of the wrong kernel; KernelGen: ``PASSED``), language, the model that wrote the kernels and the
model that wrote the reasoning, token statistics of the rows (min, median, p90, max, mean of the total, and
the prompt/completion sums), and how many candidates were left out and why (flagged by the evaluator, per
flag kind; over the token cap; no reasoning).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..prompts.tokens import TOKENIZER_DESCRIPTION
from ..trajectory import write_json, write_text_atomic
from .rows import SFT_FORMAT, SFTRow

CARD_JSON = "card.json"
CARD_MD = "README.md"


def _quantile(values: Sequence[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def token_statistics(rows: Sequence[SFTRow]) -> dict[str, Any]:
    """Totals per row (min, median, p90, max, mean) and the prompt and completion sums (tokens)."""
    totals = [r.tokens.total for r in rows]
    if not totals:
        return {"rows": 0}
    return {
        "rows": len(totals), "min": min(totals), "median": int(statistics.median(totals)),
        "p90": _quantile(totals, 0.9), "max": max(totals), "mean": round(statistics.fmean(totals), 1),
        "prompt_sum": sum(r.tokens.prompt for r in rows), "completion_sum": sum(r.tokens.completion for r in rows),
    }  # fmt: skip


def write_card(
    output: Path, recipe: str, rows: Sequence[SFTRow], left_out: Counter[str], options: dict[str, Any]
) -> dict[str, Any]:
    """Write ``card.json`` and ``README.md`` into ``output``; returns the card."""
    card = {
        "format": SFT_FORMAT,
        "recipe": recipe,
        "rows": len(rows),
        "tokenizer": TOKENIZER_DESCRIPTION,
        "options": options,
        "by_definition": dict(Counter(r.provenance.definition for r in rows)),
        "by_class": dict(Counter(r.provenance.failure_class for r in rows)),
        "by_language": dict(Counter(r.provenance.language for r in rows)),
        "by_model": dict(Counter(r.provenance.model for r in rows)),
        "by_teacher_model": dict(Counter(r.teacher_model for r in rows)),
        "tokens": token_statistics(rows),
        "left_out": dict(left_out),
        "files": ["sft.parquet", "sft.jsonl"],
    }
    write_json(Path(output) / CARD_JSON, card)
    write_text_atomic(Path(output) / CARD_MD, card_markdown(card))
    return card


def _table(title: str, counts: dict[str, int]) -> list[str]:
    lines = [f"| {title} | rows |", "| --- | ---: |"]
    lines += [
        f"| {name} | {count} |" for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return [*lines, ""]


def card_markdown(card: dict[str, Any]) -> str:
    """The card as a page for people."""
    layout = (
        "system, task, assistant (the wrong kernel), user (its error log), assistant (`<think>` reasoning "
        "`</think>` and the fixed kernel)"
        if card["recipe"] == "fixit"
        else "system, task, assistant (`<think>` reasoning `</think>` and the kernel)"
    )
    tokens = card["tokens"]
    lines = [
        f"# PTXBench SFT dataset: {card['recipe']}",
        "",
        f"{card['rows']} rows of format `{card['format']}` in `sft.parquet` and `sft.jsonl`. Each row is {layout}; "
        "the loss mask is 1 on the final assistant message only. Every row names the run, trajectory, turn, "
        "kernel hash and evaluation it came from (`provenance`).",
        "",
        f"Tokens ({card['tokenizer']}): "
        + (
            f"median {tokens['median']}, p90 {tokens['p90']}, max {tokens['max']}, mean {tokens['mean']} per row; "
            f"{tokens['prompt_sum']} prompt and {tokens['completion_sum']} completion tokens in all."
            if tokens["rows"]
            else "no rows."
        ),
        "",
    ]
    for title, key in (("definition", "by_definition"), ("failure class", "by_class"),
                       ("kernel model", "by_model"), ("reasoning model", "by_teacher_model")):  # fmt: skip
        lines += _table(title, card[key])
    left = card["left_out"]
    lines += ["Left out: " + (", ".join(f"{k} {v}" for k, v in sorted(left.items())) or "none") + ".", ""]
    return "\n".join(lines)
