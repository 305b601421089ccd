"""circuitwidgets.transport: uint8 / float32 payloads, the tril layout, NaN codes, round trips."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitwidgets import transport


def causal(n: int, heads: int = 3, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(heads, n, n, generator=g).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -torch.inf)
    return scores.softmax(-1)


def test_uint8_codes_of_known_values():
    data, meta = transport.encode_uint8(torch.tensor([0.0, 0.5, 1.0, 2.0, -1.0, float("nan")]))
    assert list(data) == [0, 127, 254, 254, 0, 255]
    assert meta == {"dtype": "uint8", "shape": [6], "lo": 0.0, "hi": 1.0, "layout": "full", "nan_code": 255}


def test_tril_layout_sends_half_and_rows_start_at_triangular_numbers():
    p = causal(5)
    data, meta = transport.encode_uint8(p, layout="tril")
    assert len(data) == 3 * 15 and meta["shape"] == [3, 5, 5]
    codes = np.frombuffer(data, np.uint8).reshape(3, 15)
    q = 3
    row = codes[1, q * (q + 1) // 2 : q * (q + 1) // 2 + q + 1]
    assert np.array_equal(row, np.rint(p[1, q, : q + 1].numpy() * 254).astype(np.uint8))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), heads=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_round_trip_within_half_a_code(n, heads, seed):
    p = causal(n, heads, seed)
    for layout in ("full", "tril"):
        data, meta = transport.encode_uint8(p, layout=layout)
        back = transport.decode(data, meta)
        assert back.shape == p.shape
        assert (back - p).abs().max().item() <= transport.quantisation_step(meta) + 1e-6


def test_signed_range_keeps_zero_exact_and_nan_masked():
    m = torch.tensor([[-3.0, 0.0], [1.5, float("nan")]])
    lo, hi = transport.symmetric_range(m)
    assert (lo, hi) == (-3.0, 3.0)
    data, meta = transport.encode_uint8(m, lo=lo, hi=hi)
    assert data[1] == 127
    back = transport.decode(data, meta)
    assert back[0, 1].item() == 0.0 and torch.isnan(back[1, 1])


def test_float32_is_exact_and_little_endian():
    x = torch.tensor([[0.1, 1 / 3], [1e-8, -7.25]])
    data, meta = transport.encode_float32(x)
    assert data == np.asarray(x.numpy(), "<f4").tobytes()
    assert torch.equal(transport.decode(data, meta), x)


def test_is_causal():
    assert transport.is_causal(causal(4))
    assert not transport.is_causal(torch.ones(2, 4, 4))
    assert not transport.is_causal(torch.ones(4, 3))


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="layout"):
        transport.encode_uint8(torch.zeros(2, 2), layout="upper")
    with pytest.raises(ValueError, match="lo < hi"):
        transport.encode_uint8(torch.zeros(2), lo=1.0, hi=1.0)
    with pytest.raises(ValueError, match="square"):
        transport.encode_uint8(torch.zeros(2, 3), layout="tril")
    with pytest.raises(TypeError, match="torch.Tensor or numpy"):
        transport.encode_float32([1.0, 2.0])
    with pytest.raises(ValueError, match="dtype"):
        transport.decode(b"\0", {"dtype": "int8", "shape": [1]})


def test_payload_is_much_smaller_than_json():
    import json

    p = causal(256, heads=12)
    data, _ = transport.encode_uint8(p, layout="tril")
    as_json = len(json.dumps(p.tolist()))
    assert len(data) * 20 < as_json


def test_values_beyond_float32_are_refused_not_sent_as_inf():
    import numpy as np

    for wide in (torch.tensor([1.0, 1e300], dtype=torch.float64), np.array([[-1e39, 0.0]])):
        with pytest.raises(ValueError, match="beyond float32's range"):
            transport.float32_payload(wide)
    ok = transport.decode(transport.float32_payload(torch.tensor([3e38, float("inf"), -1.0], dtype=torch.float64)))
    assert ok[0] == pytest.approx(3e38, rel=1e-6) and ok[1] == float("inf")  # in range, and an Inf meant as one
    with pytest.raises(TypeError, match="real"):
        transport.float32_payload(torch.ones(2, dtype=torch.complex64))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"shape": [3, -1]}, "non-negative ints"),
        ({"shape": "3x3"}, "non-negative ints"),
        ({"shape": [4, 4]}, "holds 9 bytes.*needs 16"),
        ({"layout": "diagonal"}, "layout"),
        ({"dtype": "float16"}, "'uint8' or 'float32'"),
        ({"lo": float("nan")}, "finite numbers lo and hi"),
        ({"hi": None}, "finite numbers lo and hi"),
        ({"encoding": "gzip"}, "deflate"),
    ],
)
def test_malformed_metadata_is_refused_naming_what_is_wrong(change, message):
    good = transport.uint8_payload(torch.rand(3, 3), layout="full")
    assert transport.decode(good).shape == (3, 3)
    with pytest.raises(ValueError, match=message):
        transport.decode({**good, **change})
