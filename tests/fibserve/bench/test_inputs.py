"""Seeded, dtype-aware and definition-aware input generation."""

import pytest
import torch
from fibserve.bench.data.inputs import InputError, derive_seed, generate_inputs, random_tensor
from fibserve.bench.worker.buffers import bitwise_equal
from fibserve.trace import Definition, Workload
from safetensors.torch import save_file

SECRET = b"test-secret"

DTYPES = Definition.model_validate(
    {
        "name": "dtypes",
        "op_type": "misc",
        "axes": {"N": {"type": "var"}},
        "inputs": {
            "f32": {"shape": ["N"], "dtype": "float32"},
            "bf16": {"shape": ["N"], "dtype": "bfloat16"},
            "e4m3": {"shape": ["N"], "dtype": "float8_e4m3fn"},
            "e5m2": {"shape": ["N"], "dtype": "float8_e5m2"},
            "i32": {"shape": ["N"], "dtype": "int32"},
            "i8": {"shape": ["N"], "dtype": "int8"},
            "flag": {"shape": ["N"], "dtype": "bool"},
            "alpha": {"shape": None, "dtype": "float32"},
            "zero_d": {"shape": [], "dtype": "float32"},
        },
        "outputs": {"out": {"shape": ["N"], "dtype": "float32"}},
        "reference": "def run(*a):\n    return a[0]\n",
    }
)


def _workload(uuid="w1", n=4096, **inputs):
    specs = {name: {"type": "random"} for name in DTYPES.inputs}
    specs.update(inputs)
    return Workload.model_validate({"uuid": uuid, "axes": {"N": n}, "inputs": specs})


def test_same_secret_uuid_and_set_give_identical_inputs():
    a = generate_inputs(DTYPES, _workload(), 0, secret=SECRET, device="cpu")
    b = generate_inputs(DTYPES, _workload(), 0, secret=SECRET, device="cpu")
    for name in DTYPES.inputs:
        if isinstance(a[name], torch.Tensor):
            assert bitwise_equal(a[name], b[name]), name
        else:
            assert a[name] == b[name]


@pytest.mark.parametrize(
    ("secret", "uuid", "input_set"), [(b"other", "w1", 0), (SECRET, "w2", 0), (SECRET, "w1", 1)]
)
def test_secret_uuid_and_input_set_each_change_the_inputs(secret, uuid, input_set):
    base = generate_inputs(DTYPES, _workload(), 0, secret=SECRET, device="cpu")
    other = generate_inputs(DTYPES, _workload(uuid), input_set, secret=secret, device="cpu")
    assert not torch.equal(base["f32"], other["f32"])
    assert not torch.equal(base["bf16"], other["bf16"])


def test_inputs_of_one_set_differ_from_each_other():
    values = generate_inputs(DTYPES, _workload(), 0, secret=SECRET, device="cpu")
    assert not torch.equal(values["f32"], values["bf16"].float())
    assert derive_seed(SECRET, "w1", 0, "a") != derive_seed(SECRET, "w1", 0, "b")


def test_dtypes_and_ranges():
    v = generate_inputs(DTYPES, _workload(), 0, secret=SECRET, device="cpu")
    assert v["f32"].dtype == torch.float32 and 0.8 < float(v["f32"].std()) < 1.2
    assert v["bf16"].dtype == torch.bfloat16
    for name, limit in (("e4m3", 448.0), ("e5m2", 57344.0)):
        as_float = v[name].float()
        assert torch.isfinite(as_float).all() and as_float.abs().max() <= limit
    assert v["i32"].dtype == torch.int32 and int(v["i32"].min()) >= 0 and int(v["i32"].max()) < 64
    assert int(v["i8"].min()) >= -64
    assert v["flag"].dtype == torch.bool and 0 < int(v["flag"].sum()) < 4096
    assert isinstance(v["alpha"], float)
    assert v["zero_d"].shape == ()


def test_scalar_inputs_are_used_verbatim_and_fill_0d_tensors():
    w = _workload(alpha={"type": "scalar", "value": 0.25}, zero_d={"type": "scalar", "value": 3})
    v = generate_inputs(DTYPES, w, 0, secret=SECRET, device="cpu")
    assert v["alpha"] == 0.25
    assert v["zero_d"].dtype == torch.float32 and float(v["zero_d"]) == 3.0


def test_safetensors_inputs_resolve_against_the_trace_set_root(tmp_path):
    data = torch.arange(16, dtype=torch.float32)
    (tmp_path / "blob").mkdir()
    save_file({"x": data}, str(tmp_path / "blob" / "w.safetensors"))
    w = _workload(n=16, f32={"type": "safetensors", "path": "blob/w.safetensors", "tensor_key": "x"})
    v = generate_inputs(DTYPES, w, 1, secret=SECRET, device="cpu", roots=[tmp_path / "nothing", tmp_path])
    assert torch.equal(v["f32"], data)
    with pytest.raises(InputError, match="not found"):
        generate_inputs(DTYPES, w, 0, secret=SECRET, device="cpu", roots=[tmp_path / "nothing"])
    bad_key = _workload(n=16, f32={"type": "safetensors", "path": "blob/w.safetensors", "tensor_key": "nope"})
    with pytest.raises(InputError, match="nope"):
        generate_inputs(DTYPES, bad_key, 0, secret=SECRET, device="cpu", roots=[tmp_path])


def test_float4_random_inputs_are_refused_clearly():
    dtype = getattr(torch, "float4_e2m1fn_x2", torch.complex64)
    with pytest.raises(InputError, match="safetensors"):
        random_tensor((4,), dtype, torch.Generator(), torch.device("cpu"))


PAGED = Definition.model_validate(
    {
        "name": "paged_decode",
        "op_type": "gqa",
        "axes": {
            "batch_size": {"type": "var"},
            "num_qo_heads": {"type": "const", "value": 4},
            "num_kv_heads": {"type": "const", "value": 2},
            "head_dim": {"type": "const", "value": 64},
            "num_pages": {"type": "var"},
            "page_size": {"type": "const", "value": 1},
            "len_indptr": {"type": "var"},
            "num_kv_indices": {"type": "var"},
        },
        "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
        "inputs": {
            "q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
            "k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
            "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
            "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
            "kv_len_arr": {"shape": ["batch_size"], "dtype": "int32"},
            "last_page_len": {"shape": ["batch_size"], "dtype": "int32"},
            "sm_scale": {"shape": [], "dtype": "float32"},
        },
        "outputs": {"o": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
        "reference": "def run(*a):\n    return a[0]\n",
    }
)


@pytest.mark.parametrize("input_set", range(4))
def test_paged_attention_indices_are_valid(input_set):
    axes = {"batch_size": 7, "num_pages": 50, "len_indptr": 8, "num_kv_indices": 40}
    w = Workload.model_validate(
        {"uuid": "p", "axes": axes, "inputs": {n: {"type": "random"} for n in PAGED.inputs}}
    )
    v = generate_inputs(PAGED, w, input_set, secret=SECRET, device="cpu")
    indptr = v["kv_indptr"]
    assert indptr.dtype == torch.int32 and indptr[0] == 0 and indptr[-1] == 40
    assert bool((indptr[1:] >= indptr[:-1]).all()), "indptr must be monotone"
    assert int(v["kv_indices"].min()) >= 0 and int(v["kv_indices"].max()) < 50
    assert len(set(v["kv_indices"].tolist())) == 40, "pages are distinct while there are enough"
    assert torch.equal(v["kv_len_arr"], indptr[1:] - indptr[:-1])
    assert bool((v["last_page_len"] == 1).all())
    assert float(v["sm_scale"]) == pytest.approx(64**-0.5)


def test_an_unsatisfiable_constraint_is_a_clear_input_error():
    broken = PAGED.model_copy(update={"constraints": ["num_kv_indices == 2 * kv_indptr[-1].item()"]})
    axes = {"batch_size": 2, "num_pages": 10, "len_indptr": 3, "num_kv_indices": 4}
    w = Workload.model_validate(
        {"uuid": "p", "axes": axes, "inputs": {n: {"type": "random"} for n in PAGED.inputs}}
    )
    with pytest.raises(InputError, match="violate constraint"):
        generate_inputs(broken, w, 0, secret=SECRET, device="cpu")


def test_workload_that_does_not_fit_is_an_input_error():
    w = Workload.model_validate({"uuid": "x", "axes": {"N": 4}, "inputs": {"f32": {"type": "random"}}})
    with pytest.raises(InputError, match="inputs"):
        generate_inputs(DTYPES, w, 0, secret=SECRET, device="cpu")
