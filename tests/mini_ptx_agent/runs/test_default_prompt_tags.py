"""Every (language, arch) a task allows has a default prompt tag, and it is written for that target (a Triton
task on sm_100a fell back to the Hopper CUDA tag, which the tag check then refused)."""

from __future__ import annotations

import typing

import pytest
from mini_ptx_agent.runs.options import check_prompt_tag, default_prompt_tag
from mini_ptx_agent.task import Arch, TaskConfig, TaskLanguage


@pytest.mark.parametrize("language", typing.get_args(TaskLanguage))
@pytest.mark.parametrize("arch", typing.get_args(Arch))
def test_the_default_tag_fits_the_target(language: str, arch: str) -> None:
    task = TaskConfig(definition="vector_add_f32", language=language, arch=arch)
    tag = default_prompt_tag(task)
    check_prompt_tag(tag, task)  # raises when the tag is written for another target
    if (language, arch) == ("triton", "sm_100a"):
        assert tag == "triton-blackwell"
