"""Poisoning of destination buffers and the bitwise input-mutation check."""

import torch
from fibserve.bench.dtypes import poison_
from fibserve.bench.worker.buffers import bitwise_equal


def test_float_outputs_are_poisoned_with_nan():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        t = poison_(torch.zeros(16, dtype=dtype))
        assert torch.isnan(t.float()).all(), dtype


def test_integer_outputs_get_the_sentinel():
    for dtype in (torch.int64, torch.int32, torch.int16, torch.int8):
        t = poison_(torch.zeros(16, dtype=dtype))
        assert (t == torch.iinfo(dtype).min).all(), dtype


def test_bool_outputs_get_random_bits():
    t = poison_(torch.zeros(4096, dtype=torch.bool), torch.Generator().manual_seed(1))
    assert 1000 < int(t.sum()) < 3000
    assert set(t.view(torch.uint8).unique().tolist()) <= {0, 1}


def test_bitwise_equal_detects_any_change_including_nan_payload_and_signed_zero():
    x = torch.randn(100)
    assert bitwise_equal(x.clone(), x)
    y = x.clone()
    y[50] = torch.nextafter(y[50], torch.tensor(float("inf")))
    assert not bitwise_equal(y, x)
    z = torch.zeros(3)
    assert not bitwise_equal(-z, z)
    nan = torch.full((2,), float("nan"))
    assert bitwise_equal(nan.clone(), nan)
    assert bitwise_equal(torch.tensor(1.5), torch.tensor(1.5))
    assert not bitwise_equal(torch.zeros(2), torch.zeros(3))
