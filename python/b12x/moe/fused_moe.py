"""Fused tensor-parallel MoE with the surface vLLM imports (``b12x.moe.fused_moe``).

    plan_weights(...) -> WeightsPlan           tensor-free, validates the combination
    prepare_weights(plan=..., w1_fp4=..., ...) -> ExpertWeights   one-time, b12x-owned storage
    plan(Caps(...)) -> Plan                    host only; plan.scratch_specs() = one uint8 spec
    plan_execution(num_tokens, num_topk, ...) -> ExecutionPlan   regime identity (host only)
    bind(plan, scratch=, a=, experts=, topk_weights=, topk_ids=, output=) -> Binding
    run(binding=...)                           launches only; capture-safe

Semantics and numerics: include/b12x/moe.h. ``reference(...)`` runs the CPU oracle on numpy.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from .. import _capi
from .._capi import InvalidArgumentError

QUANT_MODES = {"nvfp4": 0, "w4a8_nvfp4": 1, "w4a8_mx": 2, "mxfp4": 3, "w4a16": 4, "ggml_a16": 5}
SOURCE_FORMATS = {"modelopt_nvfp4": 0, "fp4_e8m0_k32": 1, "ggml": 2}
ACTIVATIONS = {"silu": 0, "situ": 1, "swigluoai_uninterleave": 2, "swiglu_oai": 2, "relu2": 3,
               "relu2_no_mul": 3}
W13_LAYOUTS = {"w13": 0, "up_gate": 0, "w31": 1, "gate_up": 1}


class WeightsPlanDesc(ctypes.Structure):
    _fields_ = [("quant_mode", ctypes.c_int32), ("source_format", ctypes.c_int32),
                ("activation", ctypes.c_int32), ("params_dtype", ctypes.c_int32),
                ("num_experts", ctypes.c_int64), ("hidden_size", ctypes.c_int64),
                ("intermediate_size", ctypes.c_int64), ("w13_layout", ctypes.c_int32),
                ("ggml_w1_dtype", ctypes.c_int32), ("ggml_w2_dtype", ctypes.c_int32),
                ("has_expert_bias", ctypes.c_int32), ("has_expert_map", ctypes.c_int32),
                ("has_lora", ctypes.c_int32), ("ep_size", ctypes.c_int64)]


class CapsDesc(ctypes.Structure):
    _fields_ = [("max_tokens", ctypes.c_int64), ("num_topk", ctypes.c_int64),
                ("device", ctypes.c_int32), ("apply_router_weight_on_input", ctypes.c_int32),
                ("swiglu_limit", ctypes.c_float), ("swiglu_alpha", ctypes.c_float),
                ("swiglu_beta", ctypes.c_float), ("deterministic_output", ctypes.c_int32),
                ("regime", ctypes.c_int32)]


_P = ctypes.c_void_p
_T = _capi.TensorP
_capi.declare("b12x_moe_plan_weights", [ctypes.POINTER(WeightsPlanDesc),
                                        ctypes.POINTER(ctypes.c_int64),
                                        ctypes.POINTER(ctypes.c_int32)])
_capi.declare("b12x_moe_prepare_weights", [ctypes.POINTER(WeightsPlanDesc)] + [_T] * 8 +
              [_P, ctypes.POINTER(_P)])
_capi.declare("b12x_moe_weights_destroy", [_P])
_capi.declare("b12x_moe_weights_storage", [_P, ctypes.POINTER(ctypes.c_uint64),
                                           ctypes.POINTER(ctypes.c_int64)])
_capi.declare("b12x_moe_plan_create", [ctypes.POINTER(WeightsPlanDesc), ctypes.POINTER(CapsDesc),
                                       ctypes.POINTER(_P)])
_capi.declare("b12x_moe_plan_destroy", [_P])
_capi.declare("b12x_moe_plan_scratch_bytes", [_P, ctypes.POINTER(ctypes.c_int64)])
_capi.declare("b12x_moe_plan_execution", [ctypes.POINTER(WeightsPlanDesc),
                                          ctypes.POINTER(CapsDesc), ctypes.c_int64,
                                          ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                          ctypes.c_size_t])
_capi.declare("b12x_moe_bind", [_P, _T, _T, _P, _T, _T, _T])
_capi.declare("b12x_moe_run", [_P, _T, _T, _P, _T, _T, _T, _P])
_capi.declare("b12x_moe_is_supported", [ctypes.c_int32], ctypes.c_int32)
_capi.declare("b12x_ref_moe", [ctypes.POINTER(WeightsPlanDesc), ctypes.POINTER(CapsDesc)] +
              [_T] * 12)


def _name(table, value, what):
    if isinstance(value, int) and value in table.values():
        return value
    key = str(value).lower()
    if key not in table:
        raise InvalidArgumentError(1, f"fused_moe: {what}={value!r} is unknown (supported: "
                                      f"{', '.join(sorted(table))})")
    return table[key]


def _dtype_code(dt) -> int:
    if dt is None:
        return _capi.BF16
    if isinstance(dt, int):
        return dt
    s = str(dt).replace("torch.", "").lower()
    table = {"bfloat16": _capi.BF16, "bf16": _capi.BF16, "float16": _capi.FP16,
             "fp16": _capi.FP16, "half": _capi.FP16, "q8_0": _capi.Q8_0,
             "iq2_xxs": _capi.IQ2_XXS, "iq2_xs": _capi.IQ2_XS, "float32": _capi.FP32}
    if s not in table:
        raise InvalidArgumentError(1, f"fused_moe: dtype {dt!r} is not supported "
                                      f"(supported: bfloat16, float16)")
    return table[s]


def _device_index(device) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    idx = getattr(device, "index", None)
    if idx is not None:
        return int(idx)
    s = str(device)
    return int(s.split(":")[1]) if ":" in s else 0


@dataclass(frozen=True)
class WeightsPlan:
    quant_mode: str
    source_format: str
    activation: str
    params_dtype: Any
    num_experts: int
    hidden_size: int
    intermediate_size: int
    w13_layout: str = "w13"
    ggml_w1_dtype: str = "q8_0"
    ggml_w2_dtype: str = "q8_0"
    discards_source_parameters: bool = True
    prepared_bytes: int = 0

    @property
    def gated(self) -> bool:
        return ACTIVATIONS[self.activation] != 3

    def desc(self) -> WeightsPlanDesc:
        d = WeightsPlanDesc()
        d.quant_mode = QUANT_MODES[self.quant_mode]
        d.source_format = SOURCE_FORMATS[self.source_format]
        d.activation = ACTIVATIONS[self.activation]
        d.params_dtype = _dtype_code(self.params_dtype)
        d.num_experts = self.num_experts
        d.hidden_size = self.hidden_size
        d.intermediate_size = self.intermediate_size
        d.w13_layout = W13_LAYOUTS[self.w13_layout]
        d.ggml_w1_dtype = _dtype_code(self.ggml_w1_dtype)
        d.ggml_w2_dtype = _dtype_code(self.ggml_w2_dtype)
        d.ep_size = 1
        return d


def plan_weights(*, quant_modes=None, source_format: str = "modelopt_nvfp4",
                 activation: str = "silu", params_dtype=None, num_experts: int,
                 hidden_size: int, intermediate_size: int, w13_layout: str = "w13",
                 quant_mode=None, ggml_w1_dtype="q8_0", ggml_w2_dtype="q8_0",
                 has_expert_bias: bool = False, ep_size: int = 1, expert_map=None,
                 lora=None, **unsupported) -> WeightsPlan:
    """Validate a weight configuration (raises with the precise reason) and return its plan."""
    mode = quant_mode if quant_mode is not None else quant_modes
    if isinstance(mode, (list, tuple)):
        if len(mode) != 1:
            raise InvalidArgumentError(1, f"fused_moe.plan_weights: exactly one quant mode is "
                                          f"supported per layer, got {mode!r}")
        mode = mode[0]
    if mode is None:
        raise InvalidArgumentError(1, "fused_moe.plan_weights: quant_modes is required")
    bad = {k: v for k, v in unsupported.items() if v is not None}
    if bad:
        raise _capi.UnsupportedError(2, f"fused_moe.plan_weights: unsupported options "
                                        f"{sorted(bad)} (trellis/btx containers are not provided)")
    _name(QUANT_MODES, mode, "quant_mode")
    _name(SOURCE_FORMATS, source_format, "source_format")
    _name(ACTIVATIONS, activation, "activation")
    _name(W13_LAYOUTS, w13_layout, "w13_layout")
    act = "swigluoai_uninterleave" if activation == "swiglu_oai" else (
        "relu2" if activation == "relu2_no_mul" else activation)
    plan = WeightsPlan(str(mode).lower(), source_format, act, params_dtype, int(num_experts),
                       int(hidden_size), int(intermediate_size), w13_layout,
                       str(ggml_w1_dtype).lower(), str(ggml_w2_dtype).lower())
    d = plan.desc()
    d.has_expert_bias = int(bool(has_expert_bias))
    d.ep_size = int(ep_size)
    d.has_expert_map = int(expert_map is not None)
    d.has_lora = int(lora is not None)
    nbytes = ctypes.c_int64()
    discards = ctypes.c_int32()
    _capi.call("b12x_moe_plan_weights", ctypes.byref(d), ctypes.byref(nbytes),
               ctypes.byref(discards))
    return WeightsPlan(plan.quant_mode, plan.source_format, plan.activation, plan.params_dtype,
                       plan.num_experts, plan.hidden_size, plan.intermediate_size,
                       plan.w13_layout, plan.ggml_w1_dtype, plan.ggml_w2_dtype,
                       bool(discards.value), int(nbytes.value))


class _CudaArray:
    """__cuda_array_interface__ view of the prepared storage (lets torch alias it)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


@dataclass(eq=False)
class ExpertWeights:
    """Prepared experts (owned device storage). ``storage`` is a uint8 torch view of it when
    torch is available, so vLLM's reuse_packed_weight_storage can refresh it in place."""
    plan: WeightsPlan
    handle: Any = field(repr=False, default=None)
    storage: Any = field(repr=False, default=None)
    device: int = 0

    @property
    def w1_fp4(self):
        return self.storage

    @property
    def num_experts(self) -> int:
        return self.plan.num_experts

    @property
    def hidden_size(self) -> int:
        return self.plan.hidden_size

    @property
    def intermediate_size(self) -> int:
        return self.plan.intermediate_size

    def storage_ptr(self) -> int:
        p = ctypes.c_uint64()
        _capi.call("b12x_moe_weights_storage", self.handle, ctypes.byref(p), None)
        return int(p.value)

    def __del__(self):
        h = getattr(self, "handle", None)
        if h is not None:
            try:
                _capi.lib().b12x_moe_weights_destroy(h)
            except Exception:  # pragma: no cover - interpreter shutdown
                pass
            self.handle = None


def _opt(x, dtype=None, name="tensor"):
    return None if x is None else _capi.ref(x, dtype, name)


def _weight_dtype(plan: WeightsPlan, which: int) -> Optional[int]:
    if plan.source_format == "ggml":
        return _dtype_code(plan.ggml_w1_dtype if which == 1 else plan.ggml_w2_dtype)
    return None


def prepare_weights(*, plan: WeightsPlan, w1_fp4=None, w2_fp4=None, w1_blockscale=None,
                    w2_blockscale=None, w1_global_scale=None, w2_global_scale=None,
                    a1_gscale=None, a2_gscale=None, params_dtype=None, w1=None, w2=None,
                    out: Optional[ExpertWeights] = None, stream=None, **ignored) -> ExpertWeights:
    """Build b12x-owned prepared storage (sources are never mutated; they may be freed
    afterwards). ``out``: an ExpertWeights of the same plan to refresh in place (pointers kept)."""
    w1 = w1 if w1 is not None else w1_fp4
    w2 = w2 if w2 is not None else w2_fp4
    if w1 is None or w2 is None:
        raise InvalidArgumentError(1, "fused_moe.prepare_weights: w1_fp4 and w2_fp4 are required")
    d = plan.desc()
    handle = ctypes.c_void_p(out.handle if out is not None else None)
    if out is not None and out.plan != plan:
        raise InvalidArgumentError(1, "fused_moe.prepare_weights: out was prepared for another plan")
    args = [_capi.ref(w1, _weight_dtype(plan, 1), "w1"), _opt(w1_blockscale, None, "w1_blockscale"),
            _opt(w1_global_scale, None, "w1_global_scale"), _opt(a1_gscale, None, "a1_gscale"),
            _capi.ref(w2, _weight_dtype(plan, 2), "w2"), _opt(w2_blockscale, None, "w2_blockscale"),
            _opt(w2_global_scale, None, "w2_global_scale"), _opt(a2_gscale, None, "a2_gscale")]
    _capi.call("b12x_moe_prepare_weights", ctypes.byref(d), *args, _capi.stream_of(w1, stream),
               ctypes.byref(handle))
    if out is not None:
        return out
    ew = ExpertWeights(plan=plan, handle=handle.value, device=_device_of(w1))
    if _capi.is_torch_tensor(w1) and w1.is_cuda:
        import torch
        ew.storage = torch.as_tensor(_CudaArray(ew.storage_ptr(), plan.prepared_bytes),
                                     device=w1.device)
    return ew


def _device_of(x) -> int:
    if _capi.is_torch_tensor(x):
        return x.device.index if x.is_cuda else -1
    return -1


@dataclass
class Caps:
    max_tokens: int
    num_topk: int
    device: Any = None
    weight_plan: Optional[WeightsPlan] = None
    core_token_counts: Optional[Sequence[int]] = None
    route_num_experts: Optional[int] = None
    route_logits_dtype: Any = None
    quant_mode: Optional[str] = None
    apply_router_weight_on_input: bool = False
    swiglu_limit: Optional[float] = None
    swiglu_alpha: Optional[float] = None
    swiglu_beta: Optional[float] = None
    collect_activation_amax: bool = False
    deterministic_output: Optional[bool] = None
    frozen: bool = True
    regime: int = -1

    def desc(self) -> CapsDesc:
        c = CapsDesc()
        c.max_tokens = int(max(self.max_tokens, 1))
        c.num_topk = int(self.num_topk)
        c.device = _device_index(self.device)
        c.apply_router_weight_on_input = int(bool(self.apply_router_weight_on_input))
        nan = float("nan")
        c.swiglu_limit = nan if self.swiglu_limit is None else float(self.swiglu_limit)
        c.swiglu_alpha = nan if self.swiglu_alpha is None else float(self.swiglu_alpha)
        c.swiglu_beta = nan if self.swiglu_beta is None else float(self.swiglu_beta)
        c.deterministic_output = 1
        c.regime = int(self.regime)
        return c


def _check_caps(caps: Caps) -> WeightsPlan:
    if caps.weight_plan is None:
        raise InvalidArgumentError(1, "fused_moe.plan: caps.weight_plan is required")
    if caps.quant_mode is not None and str(caps.quant_mode).lower() != caps.weight_plan.quant_mode:
        raise InvalidArgumentError(1, f"fused_moe.plan: caps.quant_mode={caps.quant_mode!r} does "
                                      f"not match the weight plan's {caps.weight_plan.quant_mode!r}")
    if caps.collect_activation_amax:
        raise _capi.UnsupportedError(2, "fused_moe.plan: collect_activation_amax is not supported")
    if caps.route_num_experts:
        raise _capi.UnsupportedError(2, "fused_moe.plan: fused routing (route_num_experts) is not "
                                        "supported; pass topk_ids/topk_weights")
    return caps.weight_plan


@dataclass(frozen=True)
class ScratchBufferSpec:
    name: str
    shape: tuple
    dtype: Any
    nbytes: int


@dataclass(frozen=True)
class ExecutionPlan:
    implementation: str
    execution: str


class Plan:
    def __init__(self, caps: Caps):
        _capi.refuse_if_capturing("b12x.moe.fused_moe.plan")
        wp = _check_caps(caps)
        self.caps = caps
        self.weight_plan = wp
        self._d = wp.desc()
        self._c = caps.desc()
        h = ctypes.c_void_p()
        _capi.call("b12x_moe_plan_create", ctypes.byref(self._d), ctypes.byref(self._c),
                   ctypes.byref(h))
        self.handle = h.value
        n = ctypes.c_int64()
        _capi.call("b12x_moe_plan_scratch_bytes", self.handle, ctypes.byref(n))
        self.scratch_bytes = int(n.value)
        self.execution = plan_execution(caps.max_tokens, caps.num_topk, caps.device, wp,
                                        apply_router_weight_on_input=caps.apply_router_weight_on_input,
                                        swiglu_limit=caps.swiglu_limit,
                                        swiglu_alpha=caps.swiglu_alpha,
                                        swiglu_beta=caps.swiglu_beta, regime=caps.regime)

    def scratch_specs(self):
        try:
            import torch
            dt = torch.uint8
        except ImportError:  # pragma: no cover - numpy only
            dt = np.uint8
        return [ScratchBufferSpec("scratch", (self.scratch_bytes,), dt, self.scratch_bytes)]

    def __del__(self):
        h = getattr(self, "handle", None)
        if h is not None:
            try:
                _capi.lib().b12x_moe_plan_destroy(h)
            except Exception:  # pragma: no cover
                pass
            self.handle = None


def plan(caps: Caps) -> Plan:
    """Host-only planning; refused while torch's current stream captures a CUDA graph."""
    return Plan(caps)


def required_nbytes(caps: Caps) -> int:
    return Plan(caps).scratch_bytes


def plan_execution(num_tokens: int, num_topk: int, device=None, weight_plan=None,
                   quant_mode=None, apply_router_weight_on_input: bool = False,
                   swiglu_limit=None, swiglu_alpha=None, swiglu_beta=None,
                   regime: int = -1) -> ExecutionPlan:
    caps = Caps(max_tokens=max(int(num_tokens), 1), num_topk=num_topk, device=device,
                weight_plan=weight_plan, quant_mode=quant_mode,
                apply_router_weight_on_input=apply_router_weight_on_input,
                swiglu_limit=swiglu_limit, swiglu_alpha=swiglu_alpha, swiglu_beta=swiglu_beta,
                regime=regime)
    wp = _check_caps(caps)
    impl = ctypes.create_string_buffer(64)
    exe = ctypes.create_string_buffer(64)
    _capi.call("b12x_moe_plan_execution", ctypes.byref(wp.desc()), ctypes.byref(caps.desc()),
               int(num_tokens), impl, 64, exe, 64)
    return ExecutionPlan(impl.value.decode(), exe.value.decode())


def _scratch_tensor(scratch):
    if isinstance(scratch, dict):
        if len(scratch) != 1:
            raise InvalidArgumentError(1, "fused_moe.bind: scratch mapping must hold one tensor")
        scratch = next(iter(scratch.values()))
    elif isinstance(scratch, (list, tuple)):
        if len(scratch) != 1:
            raise InvalidArgumentError(1, "fused_moe.bind: scratch sequence must hold one tensor")
        scratch = scratch[0]
    if _capi.is_torch_tensor(scratch):
        import torch
        if scratch.dtype != torch.uint8:
            if not scratch.is_contiguous():
                raise InvalidArgumentError(1, "fused_moe.bind: scratch must be contiguous")
            scratch = scratch.view(-1).view(torch.uint8)
        else:
            scratch = scratch.view(-1)
    return scratch


@dataclass
class Binding:
    plan: Plan
    experts: ExpertWeights
    scratch: Any
    a: Any
    topk_weights: Any
    topk_ids: Any
    output: Any
    descs: tuple = field(repr=False, default=())


def bind(plan: Plan, *, scratch, a, experts: ExpertWeights, topk_weights, topk_ids,
         output=None, input_scales_static: bool = True, fast_math=None,
         unit_scale_contract: bool = False, activation_amax=None, layer_idx=None,
         route_expert_map=None, output_expert_map=None) -> Binding:
    """Checks shapes/dtypes against the plan and keeps descriptors (no allocation unless
    output is None outside capture)."""
    if route_expert_map is not None or output_expert_map is not None:
        raise _capi.UnsupportedError(2, "fused_moe.bind: expert maps are not supported "
                                        "(tensor-parallel only, no expert parallelism)")
    if activation_amax is not None:
        raise _capi.UnsupportedError(2, "fused_moe.bind: activation_amax is not supported")
    if not input_scales_static:
        raise _capi.UnsupportedError(2, "fused_moe.bind: only static input scales are supported")
    if experts.plan != plan.weight_plan:
        raise InvalidArgumentError(1, "fused_moe.bind: experts were prepared for another weight "
                                      "plan than caps.weight_plan")
    if output is None:
        if _capi.is_torch_tensor(a):
            import torch
            if torch.cuda.is_current_stream_capturing():
                raise _capi.CaptureActiveError(6, "fused_moe.bind: CUDA graph capture requires a "
                                                  "caller-owned output buffer")
            output = torch.empty_like(a)
        else:
            output = np.empty_like(a)
    scratch = _scratch_tensor(scratch)
    descs = (_capi.ref(scratch, None, "scratch"), _capi.ref(a, None, "a"),
             _capi.ref(topk_weights, None, "topk_weights"), _capi.ref(topk_ids, None, "topk_ids"),
             _capi.ref(output, None, "output"))
    _capi.call("b12x_moe_bind", plan.handle, descs[0], descs[1], experts.handle, descs[2],
               descs[3], descs[4])
    return Binding(plan, experts, scratch, a, topk_weights, topk_ids, output, descs)


def _run_c(binding: Binding, stream=None):
    d = binding.descs
    _capi.call("b12x_moe_run", binding.plan.handle, d[0], d[1], binding.experts.handle, d[2],
               d[3], d[4], _capi.stream_of(binding.output, stream))


_BINDINGS: dict = {}


def _op_impl(a, topk_weights, topk_ids, scratch, output, key: int) -> None:
    _run_c(_BINDINGS[key])


def _op_fake(a, topk_weights, topk_ids, scratch, output, key: int) -> None:
    return None


def _register():
    from .. import _torch_ops
    _torch_ops.register_op(
        "fused_moe_run",
        "(Tensor a, Tensor topk_weights, Tensor topk_ids, Tensor(a!) scratch, Tensor(b!) output, "
        "int key) -> ()", _op_impl, _op_fake)


def run(binding: Binding = None, *, stream=None):
    """Launch (routing, FC1+activation, FC2, combine) writing binding.output; returns it."""
    if binding is None:
        raise InvalidArgumentError(1, "fused_moe.run: binding is required")
    if stream is None and _capi.is_torch_tensor(binding.output):
        from .. import _torch_ops
        if _torch_ops.torch_available():
            _register()
            key = id(binding)
            _BINDINGS[key] = binding
            try:
                _torch_ops.op("fused_moe_run")(binding.a, binding.topk_weights, binding.topk_ids,
                                               binding.scratch, binding.output, key)
            finally:
                _BINDINGS.pop(key, None)
            return binding.output
    _run_c(binding, stream)
    return binding.output


def is_supported(device=None) -> bool:
    try:
        return bool(_capi.lib().b12x_moe_is_supported(_device_index(device)))
    except Exception:
        return False


def reference(*, weight_plan: WeightsPlan, a, topk_ids, topk_weights, w1, w2, w1_blockscale=None,
              w2_blockscale=None, w1_global_scale=None, w2_global_scale=None, a1_gscale=None,
              a2_gscale=None, output=None, apply_router_weight_on_input=False,
              swiglu_limit=None, swiglu_alpha=None, swiglu_beta=None):
    """CPU oracle on host (numpy) arrays. ``a``: uint16 bf16 bits or float16; output float32."""
    if output is None:
        output = np.zeros(a.shape, dtype=np.float32)
    caps = Caps(max_tokens=a.shape[0], num_topk=topk_ids.shape[1], weight_plan=weight_plan,
                apply_router_weight_on_input=apply_router_weight_on_input,
                swiglu_limit=swiglu_limit, swiglu_alpha=swiglu_alpha, swiglu_beta=swiglu_beta)
    adt = _capi.BF16 if a.dtype == np.uint16 else None
    args = [_capi.ref(a, adt, "a"), _capi.ref(topk_ids, None, "topk_ids"),
            _capi.ref(topk_weights, None, "topk_weights"),
            _capi.ref(w1, _weight_dtype(weight_plan, 1), "w1"), _opt(w1_blockscale),
            _opt(w1_global_scale), _opt(a1_gscale),
            _capi.ref(w2, _weight_dtype(weight_plan, 2), "w2"), _opt(w2_blockscale),
            _opt(w2_global_scale), _opt(a2_gscale), _capi.ref(output, None, "output")]
    _capi.call("b12x_ref_moe", ctypes.byref(weight_plan.desc()), ctypes.byref(caps.desc()), *args)
    return output
