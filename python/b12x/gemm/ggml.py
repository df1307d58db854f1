"""``b12x.gemm.ggml``: GGML IQ2_XXS / IQ2_XS / Q8_0 weights (GGUF ``qweight`` rows kept packed)
times BF16/FP16 activations, no activation quantization.

``pack_weight(qweight u8 [N, K/bv*bb], qtype)`` with ``qtype`` one of ``"iq2_xxs"``, ``"iq2_xs"``,
``"q8_0"`` or the GGML type ids 16, 17, 8; ``mm(x [..., K], packed, *, bias=None, out=None)``
returns ``[..., N]`` in x's dtype. ``reference(x, qweight, qtype)`` is the fp64 CPU oracle
(numpy; bf16 as uint16 bit patterns).
"""

from __future__ import annotations

from . import _linear

__all__ = ["pack_weight", "mm", "prewarm", "reference", "is_supported", "GGML_TYPES"]

is_supported = _linear.is_supported
GGML_TYPES = {8: "q8_0", 16: "iq2_xxs", 17: "iq2_xs"}


def _fmt(qtype) -> str:
    if isinstance(qtype, int):
        if qtype not in GGML_TYPES:
            raise ValueError(f"b12x.gemm.ggml: GGML type id {qtype} (supported: 8, 16, 17)")
        return GGML_TYPES[qtype]
    if qtype not in GGML_TYPES.values():
        raise ValueError(f"b12x.gemm.ggml: qtype '{qtype}' (supported: q8_0, iq2_xxs, iq2_xs)")
    return qtype


def pack_weight(qweight, qtype, **kw):
    return _linear.pack_weight(_fmt(qtype), qweight, None, **kw)


def mm(x, packed, *, bias=None, out=None, expected_m=None, stream=None):
    return _linear.linear(x, packed, bias=bias, out=out, expected_m=expected_m, stream=stream)


def prewarm(packed, token_counts, *, x_dtype=None):
    _linear.prewarm(packed, token_counts, x_dtype=x_dtype, out_dtype=x_dtype)


def reference(x, qweight, qtype, *, bias=None):
    return _linear.reference_linear(_fmt(qtype), qweight, None, x, bias=bias)
