"""NVFP4 activation quantisation with the b12x ``quantization.nvfp4`` surface.

::

    p = plan(m, k)                       # M >= 1, K % 16 == 0 (b12x required multiples of 128;
                                         # this implementation accepts any M and K % 16)
    out = allocate_outputs(p)            # out.packed_a_storage uint8 [1, M, K/2],
                                         # out.scale_storage uint8 [pad128(M) * pad4(K/16)]
    run(plan=p, x=x, global_scale=gs, outputs=out)   # allocation-free, capture-safe

``x`` is bf16/fp16 ``[M, K]`` (torch CUDA tensor for the GPU kernel, numpy uint16/float16 for the
CPU reference); ``global_scale`` is fp32 ``[1]`` in the multiply convention (``448*6/amax``;
vLLM passes ``1/input_scale``). Scales are written in the 128x4 swizzled layout including the
zero padding. Also available as ``quantize(x, global_scale)`` returning ``(packed, scales)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import _capi
from ._ops import pad_to, quantize_nvfp4 as quantize, quantize_nvfp4_out  # noqa: F401

__all__ = ["Plan", "Outputs", "plan", "allocate_outputs", "run", "quantize"]


@dataclass(frozen=True)
class Plan:
    m: int
    k: int

    @property
    def scale_bytes(self) -> int:
        return pad_to(self.m, 128) * pad_to(self.k // 16, 4)


@dataclass
class Outputs:
    packed_a_storage: object  # uint8 [1, M, K/2]
    scale_storage: object     # uint8 [pad128(M) * pad4(K/16)]


def plan(m: int, k: int) -> Plan:
    if m < 1:
        raise _capi.InvalidArgumentError(1, f"b12x.quantization.nvfp4.plan: m={m} (must be >= 1)")
    if k < 16 or k % 16 != 0:
        raise _capi.InvalidArgumentError(
            1, f"b12x.quantization.nvfp4.plan: k={k} is not a positive multiple of 16")
    return Plan(int(m), int(k))


def allocate_outputs(p: Plan, device=None) -> Outputs:
    """Outputs on ``device`` (a torch device; None = numpy host arrays for the reference)."""
    if device is None:
        import numpy as np
        return Outputs(np.empty((1, p.m, p.k // 2), np.uint8), np.empty(p.scale_bytes, np.uint8))
    import torch
    return Outputs(torch.empty((1, p.m, p.k // 2), dtype=torch.uint8, device=device),
                   torch.empty(p.scale_bytes, dtype=torch.uint8, device=device))


def run(*, plan: Plan, x, global_scale, outputs: Outputs) -> None:
    if tuple(x.shape) != (plan.m, plan.k):
        raise _capi.InvalidArgumentError(
            1, f"b12x.quantization.nvfp4.run: x has shape {tuple(x.shape)}, plan is "
               f"[{plan.m}, {plan.k}]")
    quantize_nvfp4_out(x, global_scale, outputs.packed_a_storage, outputs.scale_storage)
