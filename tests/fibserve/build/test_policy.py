"""Source policy: each rule catches its exploit, and honest code passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from fibserve.build import PolicyConfig, check_policy
from fibserve.build.python_policy import check_python_source
from fibserve.trace import Solution
from kernel_fixtures import cuda_solution as _cuda
from kernel_fixtures import fixture_solution


def _rules(violations) -> set[str]:
    return {v.rule for v in violations}


def _line_of(solution: Solution, needle: str) -> int:
    """1-based line of the first source line containing ``needle``."""
    lines = solution.sources[0].content.splitlines()
    return 1 + next(i for i, line in enumerate(lines) if needle in line)


def test_cublas_gemm_fixture_is_rejected_with_lines() -> None:
    violations = check_policy(fixture_solution("cublas_gemm.cu"))
    assert _rules(violations) == {"cuda.library-header", "cuda.library-call"}
    header = next(v for v in violations if v.rule == "cuda.library-header")
    assert header.line == 2 and "cuBLAS" in header.message
    call_lines = {v.line for v in violations if v.rule == "cuda.library-call"}
    assert _line_of(fixture_solution("cublas_gemm.cu"), "cublasGemmEx(handle") in call_lines


def test_cublas_only_in_comments_and_strings_is_accepted() -> None:
    assert check_policy(fixture_solution("cublas_only_in_comments.cu")) == []


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("#include <cudnn.h>\n", "cuda.library-header"),
        ('#include "cutlass/gemm/device/gemm.h"\n', "cuda.library-header"),
        ("#include <cute/tensor.hpp>\n", "cuda.library-header"),
        ("#include <cublasLt.h>\n", "cuda.library-header"),
        ("void f() { cute::Tensor t; }\n", "cuda.library-call"),
        ("void f() { cudnnHandle_t h; cudnnCreate(&h); }\n", "cuda.library-call"),
        ('void f() { void* h = dlopen("libfoo.so", 1); }\n', "cuda.dynamic-loading"),
    ],
)
def test_cuda_rule_catches(code: str, rule: str) -> None:
    assert rule in _rules(check_policy(_cuda(code)))


def test_link_flags_in_dependencies_are_rejected() -> None:
    violations = check_policy(_cuda("int x;\n", dependencies=["-lcublasLt", "cuda >= 12.8"]))
    assert [v.rule for v in violations] == ["cuda.link-dependency"]
    assert "-lcublasLt" in violations[0].message


def test_policy_is_configurable_per_benchmark() -> None:
    code = "#include <cutlass/gemm.h>\nvoid* h = dlopen(0, 0);\n"
    assert check_policy(_cuda(code), PolicyConfig(enabled=False)) == []
    relaxed = PolicyConfig(cuda_forbidden_libraries=["cublas", "cudnn"], cuda_allow_dynamic_loading=True)
    assert check_policy(_cuda(code), relaxed) == []


def test_triton_alias_matmul_fixture_is_rejected() -> None:
    solution = fixture_solution("triton_alias_matmul.py")
    violations = check_policy(solution)
    matmul = [v for v in violations if v.rule == "python.torch-compute"]
    expected = {_line_of(solution, "from torch import matmul"), _line_of(solution, "product = mm(a, b)")}
    assert {v.line for v in matmul} == expected  # the import and the call through the alias
    assert all("torch.matmul" in v.message for v in matmul)


def test_clean_triton_fixture_is_accepted() -> None:
    assert check_policy(fixture_solution("triton_clean.py")) == []


PYTHON_EXPLOITS = [
    ("import torch\ndef run(a, b, c):\n    c.copy_(torch.mm(a, b))\n", "python.torch-compute"),
    ("import torch.nn.functional as F\ndef run(x, y):\n    F.softmax(x, -1)\n", "python.torch-compute"),
    ("from torch.nn import functional\ndef run(x):\n    functional.gelu(x)\n", "python.torch-compute"),
    ("import torch\nmm = torch.matmul\ndef run(a, b):\n    return mm(a, b)\n", "python.torch-compute"),
    ("def run(a, b, c):\n    c[:] = a @ b\n", "python.matmul-operator"),
    ("def run(a, c):\n    c += a.sum(0)\n", "python.tensor-method"),
    ("def run(a, c):\n    tmp = a.to(c.dtype)\n", "python.tensor-method"),
    ("import torch\ndef run(c):\n    x = torch.ones(3)\n", "python.allocation"),
    ("import torch\ndef run(c):\n    x = torch.full((3,), 1.0)\n", "python.allocation"),
    ("from torch import *\n", "python.star-import"),
    ("import ctypes\n", "python.forbidden-module"),
    ("import gc\n", "python.forbidden-module"),
    ("from inspect import currentframe\n", "python.forbidden-module"),
    ("import importlib\n", "python.forbidden-module"),
    ("m = __import__('torch')\n", "python.dynamic-code"),
    ("exec('import torch')\n", "python.dynamic-code"),
    ("import torch\nf = getattr(torch, 'mat' + 'mul')\n", "python.reflection"),
    ("import triton\nsetattr(triton, 'jit', None)\n", "python.reflection"),
    ("g = globals()\n", "python.reflection"),
    ("import sys\nsys.modules['torch'] = None\n", "python.sys-modules"),
    ("from sys import modules\n", "python.sys-modules"),
    ("import time\ntime.perf_counter = lambda: 0.0\n", "python.module-assignment"),
    ("import torch as t\nt.cuda.synchronize = None\n", "python.module-assignment"),
    ("import triton.testing as tt\ntt.do_bench = None\n", "python.module-assignment"),
    ("import torch\ndel torch.matmul\n", "python.module-assignment"),
    ("def run(x):\n    return x.__class__\n", "python.reflection"),
    ("def run(x):\n    return (\n", "python.syntax"),
    ("def run(a, b, c):\n    c.copy_(a.__matmul__(b))\n", "python.reflection"),
    ("import operator\ndef run(a, b):\n    return operator.matmul(a, b)\n", "python.matmul-operator"),
    ("from operator import matmul\n", "python.matmul-operator"),
    ("def run(a, b):\n    x = a.cpu()\n", "python.tensor-method"),
    ("import torch\ndef run(a, b):\n    return torch.ops.aten.mm(a, b)\n", "python.torch-compute"),
]


@pytest.mark.parametrize(("code", "rule"), PYTHON_EXPLOITS)
def test_python_rule_catches(code: str, rule: str) -> None:
    assert rule in _rules(check_python_source("kernel.py", code, PolicyConfig()))


def test_triton_jit_bodies_may_use_dot_operator_and_to() -> None:
    code = (
        "import triton\nimport triton.language as tl\nimport torch\n"
        "@triton.jit\ndef k(a_ptr, c_ptr):\n    a = tl.load(a_ptr).to(tl.float32)\n    tl.store(c_ptr, a @ a)\n"
        "def run(a, c):\n    out = torch.empty_like(c, dtype=torch.bfloat16)\n"
        "    k[(triton.cdiv(a.numel(), 128),)](a, out)\n    s = set()\n    s.add(1)\n"
        "    stream = torch.cuda.current_stream()\n    return c\n"
    )
    assert check_python_source("kernel.py", code, PolicyConfig()) == []


def test_python_solutions_may_compute_with_torch_but_get_the_module_allowlist() -> None:
    def python(content: str) -> Solution:
        return Solution.model_validate(
            {
                "name": "ref",
                "definition": "d",
                "author": "a",
                "spec": {
                    "language": "python",
                    "target_hardware": ["NVIDIA_H100"],
                    "entry_point": "ref.py::run",
                    "destination_passing_style": False,
                },
                "sources": [{"path": "ref.py", "content": content}],
            }
        )

    honest = "import torch\nimport torch.nn.functional as F\ndef run(a, b):\n    return F.relu(a @ b)\n"
    assert check_policy(python(honest)) == []
    assert _rules(check_policy(python("import subprocess\n"))) == {"python.forbidden-module"}
    assert check_policy(python("import os\n"), PolicyConfig(python_languages=["triton"])) == []


@pytest.mark.nvcc
def test_obfuscated_cublas_passes_the_source_scan_but_not_the_binary_check(build_cache: Path) -> None:
    from fibserve.build import build_solution
    from fibserve.build.binary_policy import check_binary
    from fibserve.build.elf_symbols import read_dynamic_imports

    solution = fixture_solution("cublas_obfuscated.cu")
    assert check_policy(solution) == []  # token pasting hides the name from the text
    result = build_solution(solution, cache_dir=build_cache)
    assert result.ok and result.library_path is not None, result.log
    imports = read_dynamic_imports(result.library_path)
    assert "cublasSscal_v2" in imports.undefined and "libtvm_ffi.so" in imports.needed
    violations = check_binary(result.library_path, [])
    assert [v.rule for v in violations] == ["cuda.imported-symbol"]
    assert "cublasSscal_v2" in violations[0].message
    assert check_binary(result.library_path, [], PolicyConfig(cuda_forbidden_libraries=["cudnn"])) == []


def test_cutlass_kernels_are_recognized_by_their_mangled_names(tmp_path: Path) -> None:
    from fibserve.build.binary_policy import check_binary

    library = tmp_path / "lib.so"
    library.write_bytes(b"not an elf")  # unreadable imports: only the kernel names are checked
    assert check_binary(library, ["_Z6kernelPf"]) == []
    cutlass = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"
    violations = check_binary(library, ["_Z6kernelPf", cutlass])
    assert [v.rule for v in violations] == ["cuda.library-kernel"]


def test_an_include_is_reported_once_as_a_header() -> None:
    violations = check_policy(_cuda("#include <cublas_v2.h>\nint x;\n"))
    assert [(v.rule, v.line) for v in violations] == [("cuda.library-header", 1)]


# Bypasses of the old deny-list, each seen passing it (issue 14); the allowlist refuses every one.
ISSUE_14_BYPASSES = [
    ("import os\ndef run(x, y, z):\n    os.system('id')\n", "python.forbidden-module"),
    ("import os\ndef run(x, y, z):\n    os.posix_spawn('/bin/sh', ['sh'], {})\n", "python.forbidden-module"),
    ("import runpy\nrunpy.run_path('/tmp/x.py')\n", "python.forbidden-module"),
    ("import _ctypes\n", "python.forbidden-module"),
    ("import _socket\ns = _socket.socket()\n", "python.forbidden-module"),
    ("import urllib.request\nurllib.request.urlopen('http://10.0.0.1')\n", "python.forbidden-module"),
    ("import fibserve.bench.worker.clock as t\nt.time_call = None\n", "python.forbidden-module"),
    ("from fibserve.bench import timing\n", "python.forbidden-module"),
    ("import torch\ndef run(x, y, z):\n    torch.os.system('id')\n", "python.forbidden-module"),
    ("import typing\ntyping.sys.modules.clear()\n", "python.forbidden-module"),
    ("import functools\nf = functools.reduce(getattr, ['os'], __builtins__)\n", "python.reflection"),
    ("x = __builtins__\n", "python.reflection"),
    ("def run(x, y, z):\n    data = open('/proc/1/environ').read()\n", "python.builtin"),
    ("def g():\n    yield\nframe = g().gi_frame.f_globals\n", "python.reflection"),
    ("import typing\ndef f(a: 'os'):\n    pass\ntyping.get_type_hints(f)\n", "python.reflection"),
]


@pytest.mark.parametrize(("code", "rule"), ISSUE_14_BYPASSES)
def test_the_module_allowlist_refuses_what_the_deny_list_let_through(code: str, rule: str) -> None:
    assert rule in _rules(check_python_source("kernel.py", code, PolicyConfig())), code


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess\ndef run(x, y, z):\n    subprocess.run(['id'])\n",
        "import torch\ndef run(x, y, z):\n    torch.utils.cpp_extension.load_inline('m', '')\n",
        "import torch\ndef run(x, y, z):\n    torch.ops.load_library('/tmp/evil.so')\n",
    ],
)
def test_python_solutions_cannot_start_processes_or_load_native_code(code: str) -> None:
    assert check_python_source("ref.py", code, PolicyConfig(), language="python") != []


def test_a_solutions_own_modules_may_be_imported() -> None:
    code = "from helpers import launch\nfrom . import tiles\nimport kernels.gemm\n"
    assert check_python_source("kernel.py", code, PolicyConfig(), local={"helpers", "kernels"}) == []
    assert _rules(check_python_source("kernel.py", code, PolicyConfig())) == {"python.forbidden-module"}


@pytest.mark.parametrize(
    "include", ['"/etc/hostname"', '"/proc/self/environ"', '"../../state/tasks.sqlite3"', "<sub/../../x.h>"]
)
def test_cuda_includes_of_absolute_or_parent_paths_are_refused(include: str) -> None:
    violations = check_policy(_cuda(f"#include {include}\nint x;\n"))
    assert [v.rule for v in violations] == ["cuda.include-path"]
    assert "relative to your own files" in violations[0].message


def test_a_computed_include_is_refused_and_ordinary_includes_pass() -> None:
    code = '#define F "/etc/hostname"\n#include F\n#include <cuda_bf16.h>\n#include "tiles/mma.cuh"\n'
    violations = check_policy(_cuda(code))
    assert [(v.rule, v.line) for v in violations] == [("cuda.include-path", 2)]


@pytest.mark.parametrize(
    "directive",
    [
        '/* x */ #include "/etc/hostname"',
        "%:include </etc/hostname>",
        '#import "/etc/hostname"',
        "#incl\\\nude </etc/hostname>",
    ],
)
def test_include_spellings_the_preprocessor_accepts_are_policed(directive: str) -> None:
    violations = check_policy(_cuda(f"{directive}\nint x;\n"))
    assert [v.rule for v in violations] == ["cuda.include-path"], directive


@pytest.mark.slow
def test_a_source_of_a_million_matches_is_checked_in_linear_time_and_lists_100() -> None:
    """Counting newlines from the start for every match made the policy quadratic in the trusted process
    (2 MiB of `dlopen(` lines took 100 s, the 8 MiB limit about 25 minutes), and every match was listed."""
    import time
    import tracemalloc

    from fibserve.build.policy import MAX_VIOLATIONS

    # the matches are counted, not kept: 190,650 violations as a list took about 150 MB here
    tracemalloc.start()
    try:
        check_policy(_cuda("dlopen(x);\n" * 190_650))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, peak

    for unit in ("dlopen(x);\n", "cute::", '#include "a.h"\ncublasSgemm(x);\n'):
        source = unit * (2 * 2**20 // len(unit))
        start = time.perf_counter()
        found = check_policy(_cuda(source))
        assert time.perf_counter() - start < 30.0
        assert 1 <= len(found) <= MAX_VIOLATIONS
    assert len(found) == MAX_VIOLATIONS and "more violations from this line on" in found[-1].message
    assert found[-1].line == MAX_VIOLATIONS * 2  # the cuBLAS calls are on the even lines


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["#include </a>\n", "#include X\n"])
def test_include_directives_are_read_one_at_a_time_not_listed(unit: str) -> None:
    """Every include directive was listed (with its line, and again in a set of lines) before the policy read
    them: 200,000 of them (2 to 3 MiB) peaked at 43 to 63 MiB here, and 32 MiB of `#include "/a"` lines, within
    the server's default request limit, took a 1,263 MB process."""
    import tracemalloc

    solution = _cuda(unit * 50_000)
    tracemalloc.start()
    try:
        violations = check_policy(solution)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [v.line for v in violations[:3]] == [1, 2, 3]
    assert "49901 more violations from this line on" in violations[-1].message
    assert peak < 5 * 2**20, peak
