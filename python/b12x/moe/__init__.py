"""b12x.moe: fused tensor-parallel MoE (``b12x.moe.fused_moe``)."""

from . import fused_moe  # noqa: F401

__all__ = ["fused_moe"]
