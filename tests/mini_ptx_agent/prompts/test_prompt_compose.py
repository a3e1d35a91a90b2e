"""The prompt composer: tags, fragments, the ABI text, includes and the first user message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mini_ptx_agent.prompts import (
    UnknownPromptTagError,
    compose_system_prompt,
    expected_signature,
    first_user_message,
    get_prompt_tag,
    list_prompt_tags,
    read_prompt_file,
)

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def test_required_tags_exist() -> None:
    assert {
        "hopper-no-hint",
        "hopper-abi-only",
        "triton-hopper",
        "blackwell-no-hint",
        "triton-blackwell",
    } <= set(list_prompt_tags())


@pytest.mark.parametrize("tag", list_prompt_tags())
def test_every_tag_composes_without_leftover_directives(tag: str) -> None:
    text = compose_system_prompt(tag)
    assert "{{" not in text and "}}" not in text.replace("}}\n", "")  # no unresolved placeholder
    assert "@include" not in text
    assert "<!--" not in text  # maintainers' notes (sources of numbers) stay out of the prompt
    assert text == compose_system_prompt(tag)  # deterministic
    assert len(text) > 5000


def test_unknown_tag_suggests_close_matches_and_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="hopper-no-hint"):
        compose_system_prompt("volta-please")
    with pytest.raises(UnknownPromptTagError, match=r"did you mean hopper-no-hint"):
        get_prompt_tag("hopper-nohint")


CUDA_ABI_FACTS = [
    "void run(tvm::ffi::TensorView <inputs...>, tvm::ffi::TensorView <outputs...>)",
    "`int64_t` for integer",
    "`double` for floating",
    "`bool` for `bool`",
    "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);",
    "TVMFFIEnvGetStream",
    "Destination passing",
    "-O3 -lineinfo",
    "```` ```cuda ````",
    "```` ```cpp ````",
]


@pytest.mark.parametrize("tag", [t for t in list_prompt_tags() if get_prompt_tag(t).language == "cuda"])
def test_cuda_prompts_state_the_design_abi(tag: str) -> None:
    text = compose_system_prompt(tag)
    for fact in [*CUDA_ABI_FACTS, get_prompt_tag(tag).gencode]:
        assert fact in text, fact
    assert get_prompt_tag(tag).fence_languages[:2] == ("cuda", "cpp")


@pytest.mark.parametrize("tag", [t for t in list_prompt_tags() if get_prompt_tag(t).language == "triton"])
def test_triton_prompts_state_the_design_abi(tag: str) -> None:
    text = compose_system_prompt(tag)
    for fact in [
        "def run(<inputs...>, <outputs...>)",
        "@triton.jit",
        "no torch compute ops",
        "```` ```python ````",
    ]:
        assert fact in text, fact
    assert "TVM_FFI" not in text
    assert get_prompt_tag(tag).fence_languages == ("python",)


def test_hopper_prompt_covers_the_architecture_topics() -> None:
    text = compose_system_prompt("hopper-no-hint")
    for topic in [
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
        "start address >> 4",
        "MN-major",
        "cuTensorMapEncodeTiled",
        "const __grid_constant__ CUtensorMap",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.arrive.expect_tx",
        "mbarrier.try_wait.parity",
        "fence.proxy.async.shared::cta",
        "setmaxnreg",
        "__launch_bounds__(384, 1)",
        "multicast::cluster",
        "mapa.shared::cluster",
        "stmatrix",
        "elect.sync",
        "bar.arrive",
        "132",
        "4.8 TB/s",
        "3.35 TB/s",
        "989",
        "50 MB",
        "227 KB",
    ]:
        assert topic in text, topic


def test_debugging_hints_name_the_usual_failures() -> None:
    text = compose_system_prompt("hopper-no-hint")
    for symptom in [
        "TIMEOUT",
        "Parity mismatch",
        "expect-tx byte count",
        "cudaErrorMisalignedAddress",
        "cudaErrorIllegalInstruction",
        "CUDA_ERROR_INVALID_VALUE",
        "fence.proxy.async.shared::cta",
    ]:
        assert symptom in text, symptom
    assert "Parity mismatch" in compose_system_prompt("blackwell-no-hint")


def test_blackwell_prompt_covers_tcgen05_and_b200() -> None:
    text = compose_system_prompt("blackwell-no-hint")
    for topic in [
        "tcgen05.alloc",
        "tcgen05.mma",
        "tcgen05.commit",
        "tcgen05.ld",
        "tcgen05.st",
        "cta_group::2",
        "512 columns",
        "148",
        "8 TB/s",
        "2.25 PFLOP/s",
    ]:
        assert topic in text, topic
    assert "wgmma.mma_async" not in text  # no Hopper tensor-core material
    assert "-gencode=arch=compute_90a" not in text


def test_triton_prompts_cover_descriptors_autotune_and_persistence() -> None:
    for tag, specific in (("triton-hopper", "wgmma"), ("triton-blackwell", "tcgen05")):
        text = compose_system_prompt(tag)
        for topic in ["make_block_ptr", "TensorDescriptor.from_tensor", "@triton.autotune", "num_stages",
                      "warp_specialize=True", specific]:  # fmt: skip
            assert topic in text, (tag, topic)


def test_included_files_appear_verbatim_in_fenced_blocks_under_their_names() -> None:
    hopper = compose_system_prompt("hopper-no-hint")
    bodies = dict((body, lang) for lang, body in fenced_blocks(hopper))
    for name in ("ptx_simt.cuh", "ptx_mbarrier.cuh", "ptx_tma.cuh", "ptx_wgmma.cuh"):
        assert bodies.get(read_prompt_file(f"headers/{name}")) == "cuda", name
        assert f"File `{name}`:" in hopper
    assert bodies.get(read_prompt_file("examples/scaled_add.cu")) == "cuda"
    blackwell = {body: lang for lang, body in fenced_blocks(compose_system_prompt("blackwell-no-hint"))}
    assert blackwell.get(read_prompt_file("headers/ptx_umma.cuh")) == "cuda"
    assert read_prompt_file("headers/ptx_wgmma.cuh") not in blackwell  # no wgmma helpers on Blackwell
    triton = dict((body, lang) for lang, body in fenced_blocks(compose_system_prompt("triton-hopper")))
    assert triton.get(read_prompt_file("examples/scaled_add_triton.py")) == "python"


GEMM = {
    "name": "gemm_n7168_k5120",
    "op_type": "gemm",
    "tags": ["status:verified", "secret-tag-xyz"],
    "axes": {
        "M": {"type": "var"},
        "N": {"type": "const", "value": 7168},
        "K": {"type": "const", "value": 5120},
    },
    "inputs": {
        "A": {"shape": ["M", "K"], "dtype": "bfloat16"},
        "B": {"shape": ["N", "K"], "dtype": "bfloat16"},
        "eps": {"shape": None, "dtype": "float32"},
        "n": {"shape": None, "dtype": "int32"},
        "flag": {"shape": None, "dtype": "bool"},
    },
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "bfloat16"}},
    "reference": "import torch\n\ndef run(A, B, eps, n, flag):\n    return A @ B.T\n",
}


def test_first_user_message_carries_the_definition_without_tags() -> None:
    message = first_user_message(GEMM, language="cuda", target_speedup=1.0, workloads=[{"axes": {"M": 8192}}])
    assert "secret-tag-xyz" not in message and '"tags"' not in message
    assert "tags" in GEMM  # the caller's dict is not modified
    blocks = fenced_blocks(message)
    definition = json.loads(next(body for lang, body in blocks if lang == "json"))
    assert definition == {k: v for k, v in GEMM.items() if k != "tags"}
    assert "1. M=8192" in message
    assert "at least 1x" in message


def test_signature_follows_definition_order_and_scalar_types() -> None:
    assert expected_signature(GEMM, "cuda") == (
        "void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, double eps, int64_t n, bool flag, "
        "tvm::ffi::TensorView C)"
    )
    assert expected_signature(GEMM, "triton") == "def run(A, B, eps, n, flag, C):"
    assert "```python\ndef run(A, B, eps, n, flag, C):" in first_user_message(
        GEMM, language="triton", target_speedup=2
    )


def test_first_user_message_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="language"):
        first_user_message(GEMM, language="rust", target_speedup=1.0)
    with pytest.raises(ValueError, match="target_speedup"):
        first_user_message(GEMM, language="cuda", target_speedup=0)


def test_first_user_message_on_a_public_definition() -> None:
    path = DATA / "flashinfer-trace-2025" / "definitions" / "gemm" / "gemm_n_28672_k_4096.json"
    if not path.is_file():
        pytest.skip(f"public data not found at {path}")
    definition = json.loads(path.read_text())
    message = first_user_message(definition, language="cuda", target_speedup=1.0)
    assert "void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C)" in message
    assert "status:verified" not in message


@pytest.mark.parametrize("tag", list_prompt_tags())
def test_every_prompt_survives_the_agents_jinja_rendering(tag: str) -> None:
    """mini-swe-agent renders the system template with jinja; kernel code is full of `{%` and `{{`, so the agent
    wraps it in a raw block, which only an `endraw` inside the text could break."""
    from jinja2 import StrictUndefined, Template
    from mini_ptx_agent.agent import literal_template

    text = compose_system_prompt(tag)
    rendered = Template(
        literal_template(text), undefined=StrictUndefined, keep_trailing_newline=True
    ).render()
    assert rendered == text
