"""The b12x backend selection policy (C ABI ``b12x_select``): for one layer description,
which b12x path runs it, or every reason none can, plus b12x's place in the automatic backend
order and the opt-in overrides.

    >>> s = select("moe", weight="mxfp4", hidden=4096, intermediate_per_rank=1024,
    ...            num_experts=64, topk=8, activation="silu", compute_capability=120)
    >>> s.supported, s.path, s.moe_quant_mode
    (True, 'moe.w4a8_mx', 'w4a8_mx')

Environment: ``B12X_MOE_FP4_FORCE_A16`` / ``VLLM_B12X_MOE_FP4_FORCE_A16``,
``B12X_USE_FP8_GEMM`` / ``VLLM_USE_B12X_FP8_GEMM``, ``B12X_USE_FP4_GEMM`` /
``VLLM_USE_B12X_FP4_GEMM`` (pass ``force_a16`` / ``use_fp8_gemm`` / ``use_fp4_gemm`` to
override them per call).
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass, field
from typing import List, Optional, Union

from . import _capi

KINDS = {"linear": 0, "dense": 0, "moe": 1, "attention": 2, "embedding": 3}
WEIGHTS = {"bf16": 0, "fp16": 1, "fp8": 2, "fp8_tensor": 2, "fp8_block": 3, "mxfp8": 4,
           "nvfp4": 5, "mxfp4": 6, "q8_0": 7, "iq2_xs": 8, "iq2_xxs": 9, "exl3": 10, "nf3": 11,
           "int4": 12, "fp8_block_other": 13}
ACTS = {"auto": 0, None: 0, "bf16": 1, "fp16": 1, "none": 1, "fp8_static": 2, "fp8": 2,
        "fp8_dynamic": 3, "mxfp8": 4, "nvfp4": 5, "mxfp4": 6}
ACTIVATIONS = {"none": 0, None: 0, "silu": 1, "situ": 2, "swigluoai_uninterleave": 3,
               "swigluoai": 4, "relu2": 5, "gelu": 6, "other": 7}
_IO = {"bf16": _capi.BF16, "bfloat16": _capi.BF16, "fp16": _capi.FP16, "float16": _capi.FP16,
       "fp32": _capi.FP32, "float32": _capi.FP32}


class LayerDesc(ctypes.Structure):
    """Mirror of ``b12x_layer_desc`` (include/b12x/c_api/integration.h)."""
    _fields_ = [
        ("struct_size", ctypes.c_int32),
        ("kind", ctypes.c_int32), ("weight_format", ctypes.c_int32),
        ("act_format", ctypes.c_int32), ("io_dtype", ctypes.c_int32),
        ("n", ctypes.c_int64), ("k", ctypes.c_int64),
        ("hidden", ctypes.c_int64), ("intermediate_per_rank", ctypes.c_int64),
        ("num_experts", ctypes.c_int64), ("topk", ctypes.c_int64),
        ("activation", ctypes.c_int32),
        ("situ_beta", ctypes.c_float), ("situ_linear_beta", ctypes.c_float),
        ("apply_router_weight_on_input", ctypes.c_int32), ("has_expert_map", ctypes.c_int32),
        ("use_all2all", ctypes.c_int32), ("use_eplb", ctypes.c_int32),
        ("num_q_heads", ctypes.c_int64), ("num_kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64), ("page_size", ctypes.c_int64),
        ("softmax_scale", ctypes.c_float),
        ("alibi", ctypes.c_int32), ("softcap", ctypes.c_int32),
        ("fused_output_quant", ctypes.c_int32), ("decoder_self_attention", ctypes.c_int32),
        ("context_parallel", ctypes.c_int32),
        ("tp_size", ctypes.c_int32), ("ep_size", ctypes.c_int32), ("has_bias", ctypes.c_int32),
        ("has_lora", ctypes.c_int32), ("weight_block_128", ctypes.c_int32),
        ("static_input_scale", ctypes.c_int32),
        ("compute_capability", ctypes.c_int32), ("check_compiled_archs", ctypes.c_int32),
        ("moe_fp4_force_a16", ctypes.c_int32), ("use_fp8_gemm", ctypes.c_int32),
        ("use_fp4_gemm", ctypes.c_int32),
        ("name", ctypes.c_char_p),
    ]


_capi.declare("b12x_layer_desc_init", [ctypes.POINTER(LayerDesc)], None)
_capi.declare("b12x_select", [ctypes.POINTER(LayerDesc), ctypes.POINTER(ctypes.c_int32),
                              ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)])


@dataclass
class Selection:
    supported: bool
    path: str
    arch: str                 # native / portable / none
    arch_detail: str
    activation_format: str
    moe_quant_mode: str
    moe_source_format: str
    w13_layout: str
    reasons: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    auto_order: List[str] = field(default_factory=list)
    auto_position: int = -1
    b12x_first: bool = False

    def __bool__(self) -> bool:
        return self.supported

    def reason(self) -> str:
        """One string for vLLM-style ``is_supported() -> (bool, reason)``."""
        return "; ".join(self.reasons) if self.reasons else ""


def _code(table: dict, value, what: str) -> int:
    if isinstance(value, int):
        return value
    key = value.lower() if isinstance(value, str) else value
    if key not in table:
        names = sorted(k for k in table if isinstance(k, str))
        raise _capi.InvalidArgumentError(1, f"b12x.selection: unknown {what} {value!r} "
                                            f"(supported: {', '.join(names)})")
    return table[key]


def _tri(v: Optional[bool]) -> int:
    return -1 if v is None else int(bool(v))


def select(kind: Union[str, int] = "linear", *, weight: Union[str, int] = "bf16",
           act: Union[str, int, None] = "auto", io_dtype: Union[str, int] = "bf16",
           name: str = "", n: int = 0, k: int = 0, hidden: int = 0,
           intermediate_per_rank: int = 0, num_experts: int = 0, topk: int = 0,
           activation: Union[str, int, None] = "none", situ_beta: float = 4.0,
           situ_linear_beta: float = 25.0, apply_router_weight_on_input: bool = False,
           has_expert_map: bool = False, use_all2all: bool = False, use_eplb: bool = False,
           num_q_heads: int = 0, num_kv_heads: int = 0, head_dim: int = 0, page_size: int = 0,
           softmax_scale: float = 0.0, alibi: bool = False, softcap: bool = False,
           fused_output_quant: bool = False, decoder_self_attention: bool = True,
           context_parallel: bool = False, tp_size: int = 1, ep_size: int = 1,
           has_bias: bool = False, has_lora: bool = False, weight_block_128: bool = True,
           static_input_scale: bool = True, compute_capability: int = 0,
           check_compiled_archs: bool = False, force_a16: Optional[bool] = None,
           use_fp8_gemm: Optional[bool] = None, use_fp4_gemm: Optional[bool] = None) -> Selection:
    """Ask the policy about one layer. ``compute_capability`` is 10*major+minor (0 = answer for
    SM120); the three override flags default to the environment."""
    d = LayerDesc()
    _capi.lib().b12x_layer_desc_init(ctypes.byref(d))
    d.kind = _code(KINDS, kind, "layer kind")
    d.weight_format = _code(WEIGHTS, weight, "weight format")
    d.act_format = _code(ACTS, act, "activation format")
    d.io_dtype = _code(_IO, io_dtype, "io dtype")
    d.n, d.k = n, k
    d.hidden, d.intermediate_per_rank, d.num_experts, d.topk = (
        hidden, intermediate_per_rank, num_experts, topk)
    d.activation = _code(ACTIVATIONS, activation, "activation")
    d.situ_beta, d.situ_linear_beta = situ_beta, situ_linear_beta
    d.apply_router_weight_on_input = int(apply_router_weight_on_input)
    d.has_expert_map, d.use_all2all, d.use_eplb = (int(has_expert_map), int(use_all2all),
                                                   int(use_eplb))
    d.num_q_heads, d.num_kv_heads, d.head_dim, d.page_size = (num_q_heads, num_kv_heads,
                                                              head_dim, page_size)
    d.softmax_scale = softmax_scale
    d.alibi, d.softcap, d.fused_output_quant = int(alibi), int(softcap), int(fused_output_quant)
    d.decoder_self_attention, d.context_parallel = (int(decoder_self_attention),
                                                    int(context_parallel))
    d.tp_size, d.ep_size, d.has_bias, d.has_lora = tp_size, ep_size, int(has_bias), int(has_lora)
    d.weight_block_128, d.static_input_scale = int(weight_block_128), int(static_input_scale)
    d.compute_capability, d.check_compiled_archs = compute_capability, int(check_compiled_archs)
    d.moe_fp4_force_a16, d.use_fp8_gemm, d.use_fp4_gemm = (_tri(force_a16), _tri(use_fp8_gemm),
                                                           _tri(use_fp4_gemm))
    name_b = name.encode("utf-8")
    d.name = name_b
    supported = ctypes.c_int32()
    needed = ctypes.c_size_t()
    size = 4096
    while True:
        buf = ctypes.create_string_buffer(size)
        _capi.call("b12x_select", ctypes.byref(d), ctypes.byref(supported), buf,
                   ctypes.c_size_t(size), ctypes.byref(needed))
        if needed.value <= size:
            break
        size = needed.value
    j = json.loads(buf.value.decode("utf-8"))
    known = Selection.__dataclass_fields__
    return Selection(**{k: v for k, v in j.items() if k in known})


def is_supported(kind: Union[str, int] = "linear", **kwargs) -> tuple:
    """vLLM-style ``(bool, reason)``."""
    s = select(kind, **kwargs)
    return s.supported, s.reason()


__all__ = ["select", "is_supported", "Selection", "LayerDesc", "KINDS", "WEIGHTS", "ACTS",
           "ACTIVATIONS"]
