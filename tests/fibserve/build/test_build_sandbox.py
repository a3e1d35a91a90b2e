"""nvcc runs in the sandbox: a CUDA source that includes host files gets nothing of the host back.

``#include "/etc/hostname"`` printed the build machine's name in ``fibserve check``'s output (issue 14); the
source policy now refuses such includes before anything is built, and the compiler's sandbox holds even when
the policy is bypassed (``build_solution`` does not apply the policy): it has no ``/etc/hostname``, no other
process's ``/proc`` entries (this test's own pid does not exist there) and no home directory.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import fibserve
import pytest
from fibserve.build import BuildStatus, build_solution
from kernel_fixtures import cuda_solution as _cuda

pytestmark = pytest.mark.nvcc


def test_check_refuses_an_include_of_a_host_file_before_building(build_cache: Path) -> None:
    analysis = fibserve.check(_cuda('#include "/etc/hostname"\n'), cache_dir=build_cache)
    assert analysis.status == "policy_violation" and analysis.build is None
    assert [v.rule for v in analysis.policy] == ["cuda.include-path"]
    assert socket.gethostname() not in analysis.model_dump_json()


@pytest.mark.parametrize(
    "path",
    [
        "/etc/hostname",
        "/etc/shadow",
        # an id that is the same in every xdist worker, whose pids differ: a run of this file alone stopped
        # with "Different tests were collected between gw0 and gw1"
        pytest.param(f"/proc/{os.getpid()}/environ", id="/proc/PID/environ"),
        str(Path.home() / ".bashrc"),
        "/root/.ssh/id_rsa",
    ],
)
def test_the_compiler_sees_no_host_files_when_the_policy_is_bypassed(tmp_path: Path, path: str) -> None:
    result = build_solution(_cuda(f'#include "{path}"\nint x;\n'), cache_dir=tmp_path)
    assert result.status == BuildStatus.COMPILE_ERROR and result.sandbox == "bwrap"
    assert f"{path}: No such file or directory" in result.log, result.log
    assert socket.gethostname() not in result.log
