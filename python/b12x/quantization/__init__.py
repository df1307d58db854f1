"""b12x activation quantisers (BF16/FP16 -> NVFP4, MXFP8, MXFP4, FP8 per-tensor, FP8 1x128).

Functional forms allocate and return outputs; ``*_out`` forms write caller buffers and allocate
nothing (capture-safe on CUDA tensors). numpy inputs run the bit-identical CPU reference. See
``_ops`` for layouts; ``nvfp4`` and ``mxfp8`` give the original b12x module surfaces.
"""

from __future__ import annotations

from . import mxfp8, nvfp4  # noqa: F401
from ._ops import (quantize_fp8_group128, quantize_fp8_group128_out,  # noqa: F401
                   quantize_fp8_per_tensor, quantize_fp8_per_tensor_out, quantize_mxfp4,
                   quantize_mxfp4_out, quantize_mxfp8, quantize_mxfp8_out, quantize_nvfp4,
                   quantize_nvfp4_out, swizzled_shape)

__all__ = ["nvfp4", "mxfp8", "quantize_nvfp4", "quantize_nvfp4_out", "quantize_mxfp8",
           "quantize_mxfp8_out", "quantize_mxfp4", "quantize_mxfp4_out",
           "quantize_fp8_per_tensor", "quantize_fp8_per_tensor_out", "quantize_fp8_group128",
           "quantize_fp8_group128_out", "swizzled_shape"]
