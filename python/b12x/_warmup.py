"""Warm-up and kernel resolution (``b12x/warmup.h``, ``b12x/runtime.h``).

The kernels are compiled ahead of time, but the CUDA driver loads each one lazily on its first
launch (``CUDA_MODULE_LOADING=LAZY``), which stalls that launch and cannot happen inside a graph
capture. ``warmup(layers, token_counts)`` plans every (layer, token count) as a server would,
de-duplicates the plans by kernel signature and launches each new signature once on zero inputs
it allocates itself; ``freeze_kernel_resolution()`` then makes any plan of a signature that was
not warmed raise :class:`b12x.KernelResolutionFrozenError` naming the shape.

    >>> report = b12x.warmup([
    ...     {"kind": "linear", "format": "nvfp4_w4a16", "in_features": 4096, "out_features": 4096},
    ...     {"kind": "moe", "quant_mode": "w4a16", "source_format": "modelopt_nvfp4",
    ...      "num_experts": 64, "hidden_size": 2048, "intermediate_size": 768, "num_topk": 8},
    ...     {"kind": "attention", "num_q_heads": 32, "num_kv_heads": 8, "head_dim_qk": 128,
    ...      "page_size": 64, "max_page_table_width": 512},
    ... ], token_counts=[1, 2, 4, 8, 16, 32, 64, 128, 512])
    >>> b12x.freeze_kernel_resolution("serving")

Layer keys and defaults are those of ``b12x_warmup`` in ``b12x/c_api/integration.h``.
"""

from __future__ import annotations

import ctypes
import json
from typing import Iterable, List, Mapping

from . import _capi

_STR_OUT = _capi.STR_OUT
_capi.declare("b12x_warmup", [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32,
                              ctypes.c_void_p] + _STR_OUT)
_capi.declare("b12x_resolved_kernels_json", _STR_OUT)
_capi.declare("b12x_clear_resolved_kernels", [])


_string_call = _capi.string_call


def _default_stream(stream):
    if stream is not None:
        return _capi.stream_of(None, stream)
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    except ImportError:
        pass
    return ctypes.c_void_p(0)


def warmup(layers: Iterable[Mapping], token_counts: Iterable[int], stream=None) -> dict:
    """Plan every (layer, token count), launch each new kernel signature once, synchronise.

    ``layers``: dicts with a ``kind`` of ``linear``, ``moe``, ``attention`` or ``embedding``
    (keys as in ``b12x/c_api/integration.h``). ``stream``: a torch stream or an int handle
    (default: torch's current stream when CUDA is initialised, else the legacy stream). Returns
    the report: ``planned``, ``unique``, ``launched``, ``already_warm``, ``seconds`` and one
    ``entries`` item per (layer, token count) with its ``signature`` and ``launch_ms``."""
    layers = [dict(l) for l in layers]
    counts: List[int] = [int(t) for t in token_counts]
    arr = (ctypes.c_int64 * max(len(counts), 1))(*counts)
    return json.loads(_string_call("b12x_warmup", json.dumps(layers).encode(), arr,
                                   ctypes.c_int32(len(counts)), _default_stream(stream)))


def resolved_kernels() -> list:
    """Every kernel signature resolved by a plan in this process:
    ``[{"device", "op", "signature", "shape", "plans"}]``."""
    return json.loads(_string_call("b12x_resolved_kernels_json"))


def clear_resolved_kernels() -> None:
    """Forget every resolution (a frozen process then refuses every new plan)."""
    _capi.call("b12x_clear_resolved_kernels")
