"""The tag registry: a tag is a list of fragments or tags, checked when it loads; and the packaged tags keep the
promises the prompts make (variants add one pattern, every file shown is used, every include is shown)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mini_ptx_agent.prompts import (
    PROMPT_TAGS,
    PromptRegistryError,
    compose_system_prompt,
    get_prompt_tag,
    load_tag_registry,
)
from mini_ptx_agent.prompts.registry import PROMPTS_DIR
from prompt_builds import DATA, included_closure, quoted_includes

TARGET = """
[targets.t]
language = "cuda"
sm = "sm_90a"
arch_name = "Hopper"
gencode = "-gencode=arch=compute_90a,code=sm_90a"
"""


def write_registry(root: Path, tags: str, fragments: dict[str, str]) -> Path:
    """A registry folder: tags.toml (the target above plus `tags`) and fragments/<name>.md files."""
    (root / "tags.toml").write_text(TARGET + tags)
    for name, text in fragments.items():
        (root / "fragments" / f"{name}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / "fragments" / f"{name}.md").write_text(text)
    return root / "tags.toml"


FRAGMENTS = {"ptx/wgmma": "wgmma for {{sm}}", "role/cuda": "role", "patterns/a": "A", "patterns/b": "B"}


def test_a_tag_naming_a_missing_fragment_fails_loading_with_a_close_match(tmp_path: Path) -> None:
    registry = write_registry(
        tmp_path, '[tags.base]\ntarget = "t"\nparts = ["role/cuda", "ptx/wgmm"]\n', FRAGMENTS
    )
    with pytest.raises(
        PromptRegistryError, match=r"tag 'base' names fragment 'ptx/wgmm'.*did you mean ptx/wgmma"
    ):
        load_tag_registry(registry)


def test_a_tag_naming_a_missing_tag_fails_loading(tmp_path: Path) -> None:
    tags = (
        '[tags.base]\ntarget = "t"\nparts = ["role/cuda"]\n[tags.variant]\nparts = ["bsae", "patterns/a"]\n'
    )
    with pytest.raises(PromptRegistryError, match=r"tag 'variant' names tag 'bsae'.*did you mean base"):
        load_tag_registry(write_registry(tmp_path, tags, FRAGMENTS))


def test_a_cycle_of_tags_fails_loading(tmp_path: Path) -> None:
    tags = '[tags.a]\ntarget = "t"\nparts = ["b"]\n[tags.b]\nparts = ["a"]\n'
    with pytest.raises(PromptRegistryError, match=r"includes itself: a -> b -> a"):
        load_tag_registry(write_registry(tmp_path, tags, FRAGMENTS))


def test_a_tag_without_target_or_with_two_targets_fails_loading(tmp_path: Path) -> None:
    with pytest.raises(PromptRegistryError, match=r"tag 'lone' has no `target`"):
        load_tag_registry(write_registry(tmp_path, '[tags.lone]\nparts = ["role/cuda"]\n', FRAGMENTS))
    two = TARGET.replace("[targets.t]", "[targets.u]") + (
        '[tags.a]\ntarget = "t"\nparts = ["role/cuda"]\n[tags.b]\ntarget = "u"\nparts = ["role/cuda"]\n'
        '[tags.mixed]\nparts = ["a", "b"]\n'
    )
    with pytest.raises(PromptRegistryError, match=r"tag 'mixed' mixes targets \['t', 'u'\]"):
        load_tag_registry(write_registry(tmp_path, two, FRAGMENTS))


def test_a_fragment_including_a_missing_file_or_an_undefined_placeholder_fails_loading(
    tmp_path: Path,
) -> None:
    fragments = {**FRAGMENTS, "helpers/x": "text\n@include headers/nothing.cuh\n"}
    with pytest.raises(PromptRegistryError, match=r"fragment 'helpers/x'.*includes 'headers/nothing.cuh'"):
        load_tag_registry(
            write_registry(tmp_path, '[tags.a]\ntarget = "t"\nparts = ["helpers/x"]\n', fragments)
        )
    fragments = {**FRAGMENTS, "role/cuda": "for {{gpu_name}}"}
    with pytest.raises(PromptRegistryError, match=r"uses \{\{gpu_name\}\}, which target 't' does not define"):
        load_tag_registry(
            write_registry(tmp_path, '[tags.a]\ntarget = "t"\nparts = ["role/cuda"]\n', fragments)
        )


def test_combining_variants_keeps_each_fragment_once_in_order(tmp_path: Path) -> None:
    tags = (
        '[tags.base]\ntarget = "t"\nparts = ["role/cuda", "ptx/wgmma"]\n'
        '[tags.va]\nparts = ["base", "patterns/a"]\n[tags.vb]\nparts = ["base", "patterns/b"]\n'
        '[tags.both]\nparts = ["va", "vb"]\n'
    )
    tags_by_name = load_tag_registry(write_registry(tmp_path, tags, FRAGMENTS))
    assert tags_by_name["both"].fragments == ("role/cuda", "ptx/wgmma", "patterns/a", "patterns/b")
    assert tags_by_name["both"].target == "t" and tags_by_name["va"].sm == "sm_90a"


# ---------------------------------------------------------------- the packaged registry

BASES = {"hopper-no-hint", "hopper-abi-only", "blackwell-no-hint", "triton-hopper", "triton-blackwell"}


def test_base_tags_name_a_target_and_variants_add_exactly_one_pattern_document() -> None:
    for name, tag in PROMPT_TAGS.items():
        if name in BASES:
            assert all("/" in part for part in tag.parts), name
            continue
        base, pattern = tag.parts
        assert base in BASES and pattern.startswith("patterns/"), name
        assert tag.fragments == (*get_prompt_tag(base).fragments, pattern), name
        assert tag.target == get_prompt_tag(base).target


def test_the_four_original_tags_keep_their_composition() -> None:
    """Same material in the same order as before the registry; fragments were renamed into folders, and the
    only additions are the debugging hints (both CUDA bases), the B200 numbers split out of the tcgen05 fragment,
    and the Triton language notes split out of the Triton-on-Hopper fragment (shared with triton-blackwell)."""
    assert get_prompt_tag("hopper-no-hint").fragments == (
        "role/cuda", "abi/cuda", "common/workflow", "arch/h100_h200", "ptx/tma_mbarrier", "ptx/wgmma",
        "ptx/warpspec_clusters", "guide/hopper_gemm", "common/debugging", "helpers/sm90", "examples/cuda",
    )  # fmt: skip
    assert get_prompt_tag("hopper-abi-only").fragments == (
        "role/cuda",
        "abi/cuda",
        "common/workflow",
        "examples/cuda",
    )
    assert get_prompt_tag("triton-hopper").fragments == (
        "role/triton", "abi/triton", "common/workflow", "arch/h100_h200", "triton/common", "triton/hopper",
        "examples/triton",
    )  # fmt: skip
    assert get_prompt_tag("blackwell-no-hint").fragments == (
        "role/cuda", "abi/cuda", "common/workflow", "arch/b200", "ptx/tcgen05", "ptx/tma_mbarrier",
        "common/debugging", "helpers/sm100", "examples/cuda",
    )  # fmt: skip


def test_every_fragment_header_and_example_is_used_by_some_tag() -> None:
    used_fragments = {f for tag in PROMPT_TAGS.values() for f in tag.fragments}
    on_disk = {
        str(p.relative_to(PROMPTS_DIR / "fragments").with_suffix(""))
        for p in PROMPTS_DIR.rglob("fragments/**/*.md")
    }
    assert on_disk == used_fragments
    shown = set(
        re.findall(r"^File `([^`]+)`:$", "\n".join(compose_system_prompt(t) for t in PROMPT_TAGS), re.M)
    )
    sources = {
        p.name for folder in ("headers", "examples") for p in (PROMPTS_DIR / folder).iterdir() if p.is_file()
    }
    assert sources == shown


@pytest.mark.parametrize("tag", sorted(PROMPT_TAGS))
def test_every_include_an_example_makes_is_shown_in_the_same_prompt(tag: str) -> None:
    """An example's `#include "x.cuh"` stands for a file the model must paste in, so x.cuh must be in the prompt."""
    prompt = compose_system_prompt(tag)
    shown = set(re.findall(r"^File `([^`]+)`:$", prompt, re.M))
    for name in shown:
        folder = "headers" if (PROMPTS_DIR / "headers" / name).is_file() else "examples"
        missing = set(quoted_includes((PROMPTS_DIR / folder / name).read_text())) - shown
        assert not missing, f"{tag}: {name} includes {sorted(missing)}, which the prompt does not show"


_DECLARED = re.compile(r"(?:__forceinline__|inline|constexpr)\s+[\w:<>]+\s+(\w+)\s*\(")
HEADERS = {
    "sm_90a": ["ptx_simt.cuh", "ptx_mbarrier.cuh", "ptx_tma.cuh", "ptx_wgmma.cuh"],
    "sm_100a": ["ptx_simt.cuh", "ptx_mbarrier.cuh", "ptx_tma.cuh", "ptx_umma.cuh"],
}


def compiled_units(arch: str) -> list[Path]:
    """What test_prompt_example_builds.py compiles for `arch`: the examples and the smoke kernel."""
    from test_prompt_example_builds import CUDA_BUILDS

    return [unit for case in CUDA_BUILDS if case.arch == arch for unit in (case.path, *case.extra_units)]


@pytest.mark.parametrize("arch", sorted(HEADERS))
def test_every_helper_is_instantiated_by_a_compiled_kernel(arch: str) -> None:
    """Inline PTX in a helper nobody calls is never seen by ptxas: every helper must be called (directly or by
    another helper) from an example or the smoke kernel built for its target."""
    header_texts = [(PROMPTS_DIR / "headers" / h).read_text() for h in HEADERS[arch]]
    declared = {name for text in header_texts for name in _DECLARED.findall(text)}
    units = compiled_units(arch)
    callers = "\n".join(
        [*(p.read_text() for p in units), *(t for p in units for t in included_closure(p).values())]
    )
    called = {name for name in declared if re.search(rf"\b{name}\s*[<(]", _without_declarations(callers))}
    assert not declared - called, f"{arch}: no compiled kernel calls {sorted(declared - called)}"
    assert DATA / f"{arch.replace('_', '')[:-1]}_helpers_smoke.cu" in compiled_units(arch)


def _without_declarations(text: str) -> str:
    return _DECLARED.sub("", text)
