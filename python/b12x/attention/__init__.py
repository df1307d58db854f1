"""Attention ops. ``b12x.attention.paged``: paged causal GQA attention (decode / verify / extend)
over a paged KV cache, with the plan -> bind -> run surface vLLM's b12x backend calls."""

from . import paged  # noqa: F401

__all__ = ["paged"]
