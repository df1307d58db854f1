"""b12x linear GEMMs: ``y = alpha * x . W^T (+ bias)`` for FP8 (per-tensor, 128x128 block, MXFP8),
NVFP4 (W4A4, W4A16), MXFP4 (W4A4, W4A8, W4A16) and GGML IQ2_XXS / IQ2_XS / Q8_0 weights.

Submodules with the surfaces vLLM imports: ``blockscaled`` (``mm_nvfp4``, ``mm_mxfp4``,
``mm_block_fp8``), ``mxfp8_linear`` and ``tensor_fp8_linear`` (``pack_weight`` / ``mm`` /
``prewarm``), plus ``ggml`` for the GGML formats. The generic API::

    packed = b12x.gemm.pack_weight("nvfp4_w4a16", w_u8, w_scale_e4m3, global_scale=ws2)
    y = b12x.gemm.linear(x_bf16, packed, bias=b)            # torch CUDA tensors
    b12x.gemm.prewarm(packed, [1, 2, 4, 8, 16, 512])       # before CUDA-graph capture
    ref = b12x.gemm.reference_linear("nvfp4_w4a16", w_np, s_np, x_np, global_scale=ws2)

Packing copies the weights into b12x-owned device memory once (``PackedWeight.refresh`` rewrites
it in place, keeping the pointers); runs are capture-safe once their plan exists. The formats and
layouts are listed in ``b12x.gemm._linear``. All ops are also PyTorch custom ops
(``torch.ops.b12x.gemm_linear``, ``torch.ops.b12x.gemm_mm_*``) with fake implementations.
"""

from __future__ import annotations

from . import blockscaled, ggml, mxfp8_linear, tensor_fp8_linear  # noqa: F401
from ._linear import (FORMATS, PackedWeight, is_supported, linear, pack_weight,  # noqa: F401
                      prewarm, reference_dequantize_weight, reference_linear)

__all__ = ["FORMATS", "PackedWeight", "pack_weight", "linear", "prewarm", "reference_linear",
           "reference_dequantize_weight", "is_supported", "blockscaled", "mxfp8_linear",
           "tensor_fp8_linear", "ggml"]
