"""Compose the agent's system prompt from fragments, and write the first user message.

A prompt *tag* (``hopper-no-hint``, ``triton-hopper``, ...) names an ordered list of markdown fragments under
``prompts/fragments/`` plus the target it is written for (language, ``sm`` and nvcc ``-gencode`` flag). Inside a
fragment, ``{{name}}`` is replaced by the tag's variable ``name`` and a line ``@include <path>`` is replaced by
the file at ``prompts/<path>`` verbatim, inside a fenced block (```` ```cuda ```` for ``.cu``/``.cuh``,
```` ```python ```` for ``.py``), so the helper headers and examples the model sees are exactly the files CI
compiles.

Only the standard library and pydantic are imported, so ``import mini_ptx_agent.prompts`` stays cheap.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Language = Literal["cuda", "triton"]

_HOPPER = {
    "arch_name": "Hopper (H100/H200)",
    "sm": "sm_90a",
    "gencode": "-gencode=arch=compute_90a,code=sm_90a",
}
_BLACKWELL = {
    "arch_name": "Blackwell (B200)",
    "sm": "sm_100a",
    "gencode": "-gencode=arch=compute_100a,code=sm_100a",
}
_FENCE_LANGUAGE = {".cu": "cuda", ".cuh": "cuda", ".py": "python"}
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
_INCLUDE = re.compile(r"^@include\s+(\S+)\s*$", re.MULTILINE)


class PromptTag(BaseModel):
    """One selectable system prompt: which fragments, in which order, for which target."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The tag, e.g. ``hopper-no-hint``."""
    description: str
    """One line for humans (shown by ``list_prompt_tags``)."""
    language: Language
    """Kernel language the prompt asks for: ``cuda`` (tvm-ffi binding) or ``triton``."""
    sm: str
    """Target architecture, e.g. ``sm_90a``."""
    gencode: str
    """nvcc ``-gencode`` flag the service builds CUDA kernels with (the README's "Writing a kernel")."""
    fence_languages: tuple[str, ...]
    """Info strings of fenced blocks that carry the kernel (the agent extracts the last one)."""
    fragments: tuple[str, ...] = Field(min_length=1)
    """Fragment file stems under ``prompts/fragments/``, in prompt order."""
    variables: dict[str, str]
    """Values for ``{{name}}`` placeholders in the fragments."""


def _tag(
    name: str, description: str, language: Language, target: dict[str, str], fragments: list[str]
) -> PromptTag:
    fences = ("cuda", "cpp", "cu") if language == "cuda" else ("python",)
    return PromptTag(
        name=name,
        description=description,
        language=language,
        sm=target["sm"],
        gencode=target["gencode"],
        fence_languages=fences,
        fragments=tuple(fragments),
        variables=dict(target),
    )


_HOPPER_KNOWLEDGE = [
    "hopper_params",
    "hopper_tma_mbarrier",
    "hopper_wgmma",
    "hopper_warpspec_clusters",
    "hopper_gemm_recipe",
    "hopper_helpers",
]

PROMPT_TAGS: dict[str, PromptTag] = {
    tag.name: tag
    for tag in [
        _tag(
            "hopper-no-hint",
            "CUDA + inline PTX for H100/H200 (sm_90a): ABI, Hopper knowledge, helper header, example; no per-task hint",
            "cuda",
            _HOPPER,
            ["role_cuda", "abi_cuda", "workflow", *_HOPPER_KNOWLEDGE, "example_cuda"],
        ),
        _tag(
            "hopper-abi-only",
            "CUDA for H100/H200 (sm_90a) with the ABI and example only (ablation: no architecture knowledge)",
            "cuda",
            _HOPPER,
            ["role_cuda", "abi_cuda", "workflow", "example_cuda"],
        ),
        _tag(
            "triton-hopper",
            "Triton for H100/H200 (sm_90a): ABI, Hopper numbers, Triton-on-Hopper knowledge, example",
            "triton",
            _HOPPER,
            ["role_triton", "abi_triton", "workflow", "hopper_params", "triton_hopper", "example_triton"],
        ),
        _tag(
            "blackwell-no-hint",
            "CUDA + inline PTX for B200 (sm_100a): ABI, TMA/mbarrier, tcgen05/TMEM basics, example; no per-task hint",
            "cuda",
            _BLACKWELL,
            [
                "role_cuda",
                "abi_cuda",
                "workflow",
                "blackwell_tcgen05",
                "hopper_tma_mbarrier",
                "blackwell_helpers",
                "example_cuda",
            ],
        ),
    ]
}


def list_prompt_tags() -> list[str]:
    """Names of all prompt tags, sorted."""
    return sorted(PROMPT_TAGS)


def get_prompt_tag(tag: str) -> PromptTag:
    """The :class:`PromptTag` called ``tag``.

    Raises:
        KeyError: unknown tag; the message lists the known ones.
    """
    try:
        return PROMPT_TAGS[tag]
    except KeyError:
        raise KeyError(f"unknown prompt tag {tag!r}; known tags: {', '.join(list_prompt_tags())}") from None


def read_prompt_file(relative_path: str) -> str:
    """Text of a file shipped under ``mini_ptx_agent/prompts/`` (e.g. ``headers/hopper_ptx.cuh``).

    Raises:
        FileNotFoundError: no such file in the package.
    """
    node = resources.files(__package__)
    for part in relative_path.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        raise FileNotFoundError(f"prompt file {relative_path!r} is not part of mini_ptx_agent.prompts")
    return node.read_text(encoding="utf-8")


def _fenced_file(relative_path: str) -> str:
    suffix = "." + relative_path.rsplit(".", 1)[-1]
    language = _FENCE_LANGUAGE.get(suffix, "")
    body = read_prompt_file(relative_path).rstrip("\n")
    return f"```{language}\n{body}\n```"


def _render_fragment(stem: str, variables: Mapping[str, str]) -> str:
    text = read_prompt_file(f"fragments/{stem}.md")

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise KeyError(
                f"fragment {stem}.md uses {{{{{name}}}}} but the tag defines only {sorted(variables)}"
            )
        return variables[name]

    # Placeholders first, then includes: included source files are inserted verbatim, never substituted.
    text = _PLACEHOLDER.sub(substitute, text)
    return _INCLUDE.sub(lambda m: _fenced_file(m.group(1)), text).strip()


@functools.cache
def compose_system_prompt(tag: str) -> str:
    """The full system prompt for ``tag``: its fragments in order, separated by blank lines.

    Deterministic (same tag, same text) and cached; about 20-40 KB of markdown.

    Raises:
        KeyError: unknown tag, or a fragment uses a placeholder the tag does not define.
        FileNotFoundError: a fragment or an included file is missing from the package.
    """
    spec = get_prompt_tag(tag)
    return "\n\n".join(_render_fragment(stem, spec.variables) for stem in spec.fragments) + "\n"


_SCALAR_CPP = {"bool": "bool"}


def _scalar_cpp_type(dtype: str) -> str:
    if dtype in _SCALAR_CPP:
        return _SCALAR_CPP[dtype]
    return "int64_t" if dtype.startswith("int") or dtype.startswith("uint") else "double"


def expected_signature(definition: Mapping[str, Any], language: str) -> str:
    """The ``run`` signature the ABI (the README's "Writing a kernel") asks for, spelled out for this definition.

    CUDA: ``void run(tvm::ffi::TensorView A, ..., double eps, tvm::ffi::TensorView C)``; scalar inputs
    (``shape: null``) become ``int64_t``/``double``/``bool``. Triton: ``def run(A, ..., C):``.

    Raises:
        ValueError: ``language`` is neither ``cuda``/``cpp`` nor ``triton``.
    """
    language = _normalise_language(language)
    params: list[str] = []
    for section in ("inputs", "outputs"):
        for name, spec in (definition.get(section) or {}).items():
            if language == "triton":
                params.append(name)
            elif spec.get("shape") is None and section == "inputs":
                params.append(f"{_scalar_cpp_type(str(spec.get('dtype', 'float32')))} {name}")
            else:
                params.append(f"tvm::ffi::TensorView {name}")
    if language == "triton":
        return f"def run({', '.join(params)}):"
    return f"void run({', '.join(params)})"


def _normalise_language(language: str) -> Language:
    lowered = language.lower()
    if lowered in ("cuda", "cpp", "cu"):
        return "cuda"
    if lowered == "triton":
        return "triton"
    raise ValueError(f"unknown kernel language {language!r}; use 'cuda' (or 'cpp') or 'triton'")


def _workload_axes(workload: Any) -> Mapping[str, Any]:
    if isinstance(workload, Mapping):
        return workload.get("axes") or {}
    axes = getattr(workload, "axes", None)
    return axes if isinstance(axes, Mapping) else {}


def _summarise_workloads(workloads: Iterable[Any]) -> list[str]:
    lines = []
    for index, workload in enumerate(workloads):
        axes = _workload_axes(workload)
        values = ", ".join(f"{k}={v}" for k, v in axes.items()) or "(no variable axes)"
        lines.append(f"{index + 1}. {values}")
    return lines


def _compact_json(value: Any, depth: int = 0) -> str:
    """JSON with objects expanded two levels deep and everything below on one line (short, still valid JSON)."""
    if isinstance(value, Mapping) and value and depth < 2:
        pad = "  " * (depth + 1)
        items = [f"{pad}{json.dumps(str(k))}: {_compact_json(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    return json.dumps(value, ensure_ascii=False)


def first_user_message(
    definition_json: Mapping[str, Any],
    *,
    language: str,
    target_speedup: float,
    workloads: Iterable[Any] | None = None,
) -> str:
    """The task message: the definition JSON (``tags`` removed), the workloads, the target, the signature.

    Args:
        definition_json: a FlashInfer Trace definition as a JSON object (``name``, ``axes``, ``inputs``,
            ``outputs``, ``reference``, ...). Not modified.
        language: ``cuda`` (``cpp`` accepted) or ``triton``.
        target_speedup: the minimum speedup over the reference (e.g. ``1.0``) every workload must reach.
        workloads: optional workload objects or dicts with an ``axes`` mapping (``{"M": 8192}``), listed in order.

    Raises:
        ValueError: unknown language or a non-positive target.
    """
    lang = _normalise_language(language)
    if not target_speedup > 0:
        raise ValueError(f"target_speedup must be > 0, got {target_speedup}")
    definition = {k: v for k, v in definition_json.items() if k != "tags"}
    fence = "cuda" if lang == "cuda" else "python"
    what = "a CUDA kernel (tvm-ffi binding)" if lang == "cuda" else "a Triton kernel"
    parts = [
        f"Write {what} for the FlashInfer Trace definition `{definition.get('name', '?')}`.",
        "",
        "Definition:",
        "```json",
        _compact_json(definition),
        "```",
        "",
    ]
    if workloads is not None:
        lines = _summarise_workloads(workloads)
        parts += [f"Workloads ({len(lines)}), values of the variable axes:", *lines, ""]
    parts += [
        f"Target: every workload passes and the minimum speedup over the reference is at least {target_speedup:g}x.",
        "",
        "Your entry point must be:",
        f"```{fence}",
        expected_signature(definition, lang),
        "```",
        "",
        f"Reply with a short plan and the complete file in one ```{fence} block.",
    ]
    return "\n".join(parts) + "\n"
