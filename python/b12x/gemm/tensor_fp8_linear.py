"""``b12x.gemm.tensor_fp8_linear``: per-tensor FP8 (static scales), caller-quantized activations.

``pack_weight(weight e4m3 [N,K], output_scale f32[1] = input_scale * weight_scale)``;
``mm(x_q e4m3 [M,K], packed, *, bias=None, out_dtype=torch.bfloat16, expected_m=None)``;
``prewarm(packed, token_counts, *, out_dtype, stream)`` creates every plan before capture.
"""

from __future__ import annotations

from . import _linear

__all__ = ["pack_weight", "mm", "prewarm", "is_supported"]

is_supported = _linear.is_supported


def pack_weight(weight, output_scale, **kw):
    return _linear.pack_weight("fp8_tensor", weight, None, output_scale=output_scale, **kw)


def mm(source, packed, *, bias=None, out_dtype=None, expected_m=None, stream=None):
    import torch
    return _linear.linear(source, packed, bias=bias, out_dtype=out_dtype or torch.bfloat16,
                          expected_m=expected_m, stream=stream)


def prewarm(packed, token_counts, *, out_dtype=None, stream=None):
    _linear.prewarm(packed, token_counts, out_dtype=out_dtype)
