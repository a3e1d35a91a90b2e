"""Kernel extraction: the last complete fenced block of the task's language, and the format-error reply."""

from mini_ptx_agent.extraction import extract_kernel, format_error_message


def test_last_block_of_the_language_wins_over_earlier_drafts_and_other_languages() -> None:
    reply = (
        "Plan first.\n```cuda\n// draft\n```\nThen the final:\n```cu\n__global__ void k() {}\n```\n"
        "And how to call it:\n```python\nprint('not CUDA')\n```\n"
    )
    assert extract_kernel(reply, "cuda").source == "__global__ void k() {}\n"
    assert extract_kernel(reply, "triton").source == "print('not CUDA')\n"


def test_cpp_tag_counts_for_cuda_and_tags_are_case_insensitive() -> None:
    assert extract_kernel("```CPP\nint x;\n```", "cuda").source == "int x;\n"


def test_code_containing_backticks_and_longer_fences() -> None:
    reply = "````python\ns = '```'\n```\nstill inside\n````\n"
    assert extract_kernel(reply, "triton").source == "s = '```'\n```\nstill inside\n"


def test_unclosed_block_is_not_used_and_the_error_says_so() -> None:
    extraction = extract_kernel("```cuda\n__global__ void k() {\n", "cuda")
    assert extraction.source is None
    assert extraction.unclosed_tag == "cuda"
    message = format_error_message(extraction, "cuda")
    assert "FORMAT ERROR" in message and "never closed" in message


def test_no_block_and_wrong_tag_get_a_reply_naming_the_accepted_tags() -> None:
    none = extract_kernel("I think we should use wgmma.", "cuda")
    assert none.source is None and none.blocks == ()
    wrong = extract_kernel("```python\nx = 1\n```", "cuda")
    assert wrong.source is None
    message = format_error_message(wrong, "cuda")
    assert "```cuda" in message and "python" in message


def test_empty_block_does_not_count() -> None:
    assert extract_kernel("```python\n\n```", "triton").source is None
