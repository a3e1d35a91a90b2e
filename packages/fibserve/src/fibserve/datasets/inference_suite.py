"""The inference-op suite of the bundled trace set: GQA, MLA and GDN from the PTXBench problem lists, and the
FP8 block-scaled GEMMs, each definition with its workloads (axes and scalar inputs).

Names and workload uuids are the public ones of ``single_op_problems.csv`` (one workload per GQA/MLA
definition, "one large workload per definition") and ``gdn_problems.csv`` (six per GDN definition). Neither
list gives the workloads' axes, so they come from here:

* GDN: the public selection of these workloads (in the lists' row order) is batch sizes 1, 4, 8, 16, 32, 64
  for decode; batch sizes 1, 4, 8, 16, 32, 48 with 4 tokens each and a pool of 49 states for MTP; for prefill
  the lists' ``seq_len`` is the total token count, split into 1, 2, 4, 4, 2 and 57 sequences (``qk4_v8``; 51
  for ``qk8_v16``'s 8192 tokens).
* GQA and MLA: the totals of :data:`GEOMETRY` per kind. Two of them are the public records' exact totals:
  ``5444fc56`` (``gqa_paged_decode_h32_kv8_d128_ps1``: 64 sequences, 58966 pages referenced in a cache of
  68237) and ``820d93c0`` (``gqa_paged_prefill_causal_h16_kv1_d128_ps64``: 15 sequences, 969 queries, 969
  pages of 64, a cache of 4166 pages); every definition of the same kind takes that geometry. The other kinds'
  totals are PTXBench's own stand-ins (sized like those two: thousands of queries, tens of thousands of KV
  tokens), because the public records of those uuids were not available offline; ``fibserve datasets pull
  flashinfer-ai/flashinfer-trace`` fetches them from the Hugging Face Hub.

How each sequence's share of the totals is drawn (from the workload uuid) is in
:mod:`fibserve.bench.data.paged`. Scalars: ``sm_scale`` is ``1/sqrt(head_dim)`` for GQA and ``1/sqrt(192)``
for MLA (DeepSeek-V3's query-key head size), GDN's ``scale`` is ``1/sqrt(128)``.
"""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from fibserve.trace import Definition

from . import gdn, gqa, mla
from .fp8_gemm import fp8_gemm_definitions

GEOMETRY: dict[str, dict[str, int]] = {
    "gqa_paged_decode_ps1": {"batch_size": 64, "len_indptr": 65, "num_kv_indices": 58966, "num_pages": 68237},
    "gqa_paged_decode_ps64": {"batch_size": 64, "len_indptr": 65, "num_kv_indices": 1024, "num_pages": 1184},
    "gqa_paged_prefill_ps1": {"len_indptr": 16, "total_q": 4096, "num_kv_indices": 8192, "num_pages": 9472},
    "gqa_paged_prefill_ps64": {
        "batch_size": 15,
        "len_indptr": 16,
        "total_q": 969,
        "num_kv_indices": 969,
        "num_pages": 4166,
    },
    "gqa_ragged_prefill": {"len_indptr": 33, "total_q": 8192, "total_kv": 16384},
    "mla_paged_decode": {"batch_size": 64, "len_indptr": 65, "num_kv_indices": 58966, "num_pages": 68237},
    "mla_paged_prefill": {"len_indptr": 16, "total_q": 4096, "num_kv_indices": 8192, "num_pages": 9472},
    "mla_ragged_prefill": {"len_indptr": 9, "total_tokens": 8192},
}
"""Kind -> the var axes of its workload (see the module docstring for which are exact)."""

GDN_DECODE_BATCHES = (1, 4, 8, 16, 32, 64)
GDN_MTP_BATCHES = (1, 4, 8, 16, 32, 48)
GDN_MTP_TOKENS, GDN_MTP_POOL = 4, 49
GDN_PREFILL_SEQUENCES = {4: (1, 2, 4, 4, 2, 57), 8: (1, 2, 4, 4, 2, 51)}
"""Query/key heads -> sequences of each prefill workload, in the list's row order."""

MLA_SCALE = 1.0 / math.sqrt(192)
GDN_SCALE = 1.0 / math.sqrt(gdn.HEAD_SIZE)

Workloads = list[tuple[str, dict[str, int], dict[str, float]]]
"""(uuid, var axes, scalar inputs) of a definition's workloads."""

_GQA = re.compile(
    r"gqa_(paged_decode|paged_prefill_causal|ragged_prefill_causal)_h(\d+)_kv(\d+)_d(\d+)(?:_ps(\d+))?"
)
_MLA: dict[str, tuple[Callable[[], Definition], str]] = {
    "mla_paged_decode_h16_ckv512_kpe64_ps1": (mla.paged_decode, "mla_paged_decode"),
    "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1": (mla.paged_prefill, "mla_paged_prefill"),
    "mla_ragged_prefill_causal_h16_qk192_vo128": (mla.ragged_prefill, "mla_ragged_prefill"),
}


def attention_workload(name: str, uuid: str) -> tuple[str, Definition, Workloads]:
    """The folder, definition and workload of one row of ``single_op_problems.csv``.

    Raises:
        ValueError: a name that is no GQA or MLA definition of this suite.
    """
    if name in _MLA:
        build, kind = _MLA[name]
        folder = "mla_ragged" if "ragged" in name else "mla_paged"
        return folder, build(), [(uuid, GEOMETRY[kind], {"sm_scale": MLA_SCALE})]
    match = _GQA.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is no GQA or MLA definition of the inference suite")
    kind, heads, page = match[1], (int(match[2]), int(match[3]), int(match[4])), match[5]
    scale = {"sm_scale": 1.0 / math.sqrt(heads[2])}
    if kind == "ragged_prefill_causal":
        return "gqa_ragged", gqa.ragged_prefill(heads), [(uuid, GEOMETRY["gqa_ragged_prefill"], scale)]
    build = gqa.paged_decode if kind == "paged_decode" else gqa.paged_prefill
    key = f"gqa_{kind.removesuffix('_causal')}_ps{page}"
    return "gqa_paged", build(heads, int(page)), [(uuid, GEOMETRY[key], scale)]


def gdn_workloads(definition: Definition, rows: list[tuple[str, int]]) -> Workloads:
    """The workloads of one GDN definition from its rows ``(uuid, seq_len)`` of ``gdn_problems.csv``.

    Raises:
        ValueError: the definition has another number of rows than the public selection (six).
    """
    scale = {"scale": GDN_SCALE}
    stage = definition.name.split("_")[1]
    if len(rows) != len(GDN_DECODE_BATCHES):
        raise ValueError(f"{definition.name}: {len(rows)} rows in gdn_problems.csv, expected 6")
    if stage == "decode":
        return [(u, {"batch_size": b}, scale) for (u, _), b in zip(rows, GDN_DECODE_BATCHES, strict=True)]
    if stage == "mtp":
        return [
            (u, {"batch_size": b, "seq_len": t, "pool_size": GDN_MTP_POOL}, scale)
            for (u, t), b in zip(rows, GDN_MTP_BATCHES, strict=True)
        ]
    sequences = GDN_PREFILL_SEQUENCES[definition.const_axes["num_q_heads"]]
    return [
        (u, {"total_seq_len": t, "num_seqs": n, "len_cu_seqlens": n + 1}, scale)
        for (u, t), n in zip(rows, sequences, strict=True)
    ]


def inference_definitions(
    problems: Path, uuid_for: Callable[[str, dict[str, int]], str]
) -> list[tuple[str, Definition, Workloads]]:
    """Every definition of the suite with its folder under ``definitions/`` and its workloads.

    Args:
        problems: the folder of the PTXBench problem CSVs.
        uuid_for: (definition name, axes) -> the uuid of a workload PTXBench defines itself (FP8 GEMM).

    Raises:
        ValueError, KeyError: the problem lists do not have the rows this suite expects.
    """
    out = []
    with (problems / "single_op_problems.csv").open() as fh:
        for row in csv.DictReader(fh):
            out.append(attention_workload(row["definition"], row["workload_uuid"]))
    gdn_rows: dict[str, list[tuple[str, int]]] = defaultdict(list)
    with (problems / "gdn_problems.csv").open() as fh:
        for row in csv.DictReader(fh):
            gdn_rows[row["definition_name"]].append((row["workload_uuid"], int(row["seq_len"])))
    for definition in gdn.gdn_definitions():
        out.append(("gdn", definition, gdn_workloads(definition, gdn_rows[definition.name])))
    for definition, m_values in fp8_gemm_definitions():
        workloads = [(uuid_for(definition.name, {"M": m}), {"M": m}, {}) for m in m_values]
        out.append(("fp8_gemm", definition, workloads))
    return out
