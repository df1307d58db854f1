"""``b12x.gemm.mxfp8_linear``: MXFP8 weights, activations quantized to MXFP8 inside, bias fused.

``pack_weight(weight e4m3 [N,K], weight_scale e8m0/u8 [N, >=K/32]) -> PackedWeight`` (fields
``in_features``, ``padded_in_features``, ``out_features``, ``weight.values``);
``mm(x bf16/fp16 [M,K], packed, *, bias=None, expected_m=None, stream=None) -> [M, N]``.
"""

from __future__ import annotations

from . import _linear

__all__ = ["pack_weight", "mm", "prewarm", "is_supported"]

is_supported = _linear.is_supported


def pack_weight(weight, weight_scale, **kw):
    k = int(weight.shape[-1])
    return _linear.pack_weight("mxfp8", weight, weight_scale[:, : k // 32], **kw)


def mm(source, packed, *, bias=None, expected_m=None, stream=None):
    return _linear.linear(source, packed, bias=bias, expected_m=expected_m, stream=stream)


def prewarm(packed, token_counts, *, out_dtype=None, stream=None):
    _linear.prewarm(packed, token_counts, out_dtype=out_dtype)
