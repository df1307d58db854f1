"""Core of the linear GEMM bindings: ctypes declarations, packed weights, plan cache, run.

Formats (``b12x.gemm.FORMATS``; codes equal ``B12X_LINEAR_*`` in ``b12x/c_api/gemm.h``):

============  =====================================  =====================================
name          weight (checkpoint layout)             activations ``x``
============  =====================================  =====================================
fp8_tensor    e4m3 [N,K] + output_scale fp32[1]      e4m3 [M,K] (caller-quantized)
fp8_block     e4m3 [N,K] + fp32 [ceil(N/128),K/128]  bf16/fp16 (quantized inside, 1x128) or
                                                     e4m3 + x_scale fp32 [M,K/128]
mxfp8         e4m3 [N,K] + e8m0 [N,K/32]             bf16/fp16 (quantized inside to MXFP8)
nvfp4         u8 [N,K/2] + e4m3 [N,K/16]             NVFP4 u8 [M,K/2] + swizzled e4m3 scales
nvfp4_w4a16   same + weight_scale_2 (global_scale)   bf16/fp16
mxfp4         u8 [N,K/2] + e8m0 [N,K/32]             MXFP4 u8 [M,K/2] + swizzled e8m0 scales
mxfp4_w4a8    same                                   bf16/fp16 (quantized inside to MXFP8)
mxfp4_w4a16   same                                   bf16/fp16
iq2_xxs       GGML rows u8 [N, K/256*66]             bf16/fp16
iq2_xs        GGML rows u8 [N, K/256*74]             bf16/fp16
q8_0          GGML rows u8 [N, K/32*34]              bf16/fp16
============  =====================================  =====================================

Scales may be given in the linear layout or the 128x4-swizzled layout (``scale_swizzled=True``).
Packing copies the weights into b12x-owned device memory (host step, not capture-safe);
``PackedWeight.refresh`` rewrites the same storage. Running is capture-safe once the shape's
plan exists (``prewarm`` or one eager call): the scratch comes from torch's allocator.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Dict, Optional, Tuple

import numpy as np

from .. import _capi, _torch_ops

_T = _capi.TensorP
_VP = ctypes.c_void_p
_I32P = ctypes.POINTER(ctypes.c_int32)
_I64P = ctypes.POINTER(ctypes.c_int64)

FORMATS = {"fp8_tensor": 0, "fp8_block": 1, "mxfp8": 2, "nvfp4": 3, "nvfp4_w4a16": 4, "mxfp4": 5,
           "mxfp4_w4a8": 6, "mxfp4_w4a16": 7, "iq2_xxs": 8, "iq2_xs": 9, "q8_0": 10}
FORMAT_NAMES = {v: k for k, v in FORMATS.items()}
_W4A4 = (FORMATS["nvfp4"], FORMATS["mxfp4"])
_FP4_WEIGHTS = (3, 4, 5, 6, 7)
_GGML = {8: (_capi.IQ2_XXS, 256, 66), 9: (_capi.IQ2_XS, 256, 74), 10: (_capi.Q8_0, 32, 34)}


class WeightSource(ctypes.Structure):
    _fields_ = [("format", ctypes.c_int32), ("scale_swizzled", ctypes.c_int32),
                ("weight", _T), ("weight_scale", _T), ("output_scale", _T),
                ("global_scale", ctypes.c_float), ("in_features", ctypes.c_int64)]


class Caps(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int32), ("format", ctypes.c_int32),
                ("max_tokens", ctypes.c_int64), ("in_features", ctypes.c_int64),
                ("out_features", ctypes.c_int64), ("act_dtype", ctypes.c_int32),
                ("out_dtype", ctypes.c_int32), ("expected_m", ctypes.c_int64)]


_capi.declare("b12x_linear_format_name", [ctypes.c_int32], ctypes.c_char_p)
_capi.declare("b12x_linear_weight_pack", [ctypes.POINTER(WeightSource), ctypes.c_int32, _VP,
                                          ctypes.POINTER(_VP)])
_capi.declare("b12x_linear_weight_refresh", [_VP, ctypes.POINTER(WeightSource), _VP])
_capi.declare("b12x_linear_weight_destroy", [_VP])
_capi.declare("b12x_linear_weight_info", [_VP, _I32P, _I32P, _I64P, _I64P, _I64P, _I64P])
_capi.declare("b12x_linear_weight_values", [_VP, ctypes.POINTER(_VP), _I64P])
_capi.declare("b12x_linear_plan_create", [ctypes.POINTER(Caps), ctypes.POINTER(_VP)])
_capi.declare("b12x_linear_plan_scratch_bytes", [_VP, _I64P])
_capi.declare("b12x_linear_plan_destroy", [_VP])
_capi.declare("b12x_linear_run", [_VP, _T, _T, _T, _VP, _T, _T, _T, _VP])
_capi.declare("b12x_ref_linear", [ctypes.POINTER(WeightSource), _T, _T, ctypes.c_double, _T, _T])
_capi.declare("b12x_ref_linear_dequantize_weight", [ctypes.POINTER(WeightSource), _T])


def format_code(fmt) -> int:
    if isinstance(fmt, int):
        if fmt not in FORMAT_NAMES:
            raise _capi.InvalidArgumentError(1, f"b12x.gemm: unknown format code {fmt}")
        return fmt
    if fmt not in FORMATS:
        raise _capi.InvalidArgumentError(
            1, f"b12x.gemm: unknown format '{fmt}' (supported: {', '.join(FORMATS)})")
    return FORMATS[fmt]


def _weight_view_dtype(code: int, weight) -> Optional[int]:
    """Descriptor dtype for the weight tensor of a format (GGML rows are viewed as blocks)."""
    if code in _GGML:
        dt = _GGML[code][0]
        if _capi.is_torch_tensor(weight) or (isinstance(weight, np.ndarray) and
                                              weight.dtype == np.uint8):
            return dt
    return None


def _source(code: int, weight, weight_scale=None, *, scale_swizzled=False, global_scale=1.0,
            output_scale=None, keep: list) -> WeightSource:
    s = WeightSource()
    s.format = code
    s.scale_swizzled = 1 if scale_swizzled else 0
    wt = _capi.as_tensor(weight, _weight_view_dtype(code, weight), "weight")
    keep.append(wt)
    s.weight = ctypes.pointer(wt)
    if weight_scale is not None:
        st = _capi.as_tensor(weight_scale, None, "weight_scale")
        keep.append(st)
        s.weight_scale = ctypes.pointer(st)
    if output_scale is not None:
        if isinstance(output_scale, (float, int)):
            output_scale = np.array([float(output_scale)], dtype=np.float32)
        ot = _capi.as_tensor(output_scale, None, "output_scale")
        keep.append((output_scale, ot))
        s.output_scale = ctypes.pointer(ot)
    s.global_scale = float(global_scale)
    s.in_features = 0
    return s


class _CudaArray:
    """A __cuda_array_interface__ view of b12x-owned device bytes (torch.as_tensor wraps it)."""

    def __init__(self, ptr: int, nbytes: int, owner):
        self._owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


class _WeightTensors:
    """``packed.weight`` (vLLM reads ``packed.weight.values``): the packed bytes as a tensor."""

    def __init__(self, packed: "PackedWeight"):
        self._packed = packed

    @property
    def values(self):
        import torch
        return torch.as_tensor(_CudaArray(self._packed._values_ptr, self._packed.nbytes_values,
                                          self._packed), device=f"cuda:{self._packed.device}")


class PackedWeight:
    """Weights packed for the b12x kernels (owned device memory). Attributes: ``format``,
    ``in_features``, ``padded_in_features``, ``out_features``, ``device``, ``nbytes``,
    ``weight.values`` (a uint8 tensor view of the packed bytes, torch only)."""

    def __init__(self, fmt, weight, weight_scale=None, *, scale_swizzled=False, global_scale=1.0,
                 output_scale=None, device=None, stream=None):
        code = format_code(fmt)
        if device is None:
            device = weight.device.index if (_capi.is_torch_tensor(weight) and weight.is_cuda) \
                else 0
            if device is None:
                device = 0
        keep: list = []
        src = _source(code, weight, weight_scale, scale_swizzled=scale_swizzled,
                      global_scale=global_scale, output_scale=output_scale, keep=keep)
        h = _VP()
        _capi.call("b12x_linear_weight_pack", ctypes.byref(src), int(device),
                   _capi.stream_of(weight, stream), ctypes.byref(h))
        self._h = h
        self.format_code = code
        self.format = FORMAT_NAMES[code]
        self.scale_swizzled = scale_swizzled
        self.global_scale = float(global_scale)
        f, d, n, k, kp, nb = (ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int64(),
                              ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64())
        _capi.call("b12x_linear_weight_info", h, ctypes.byref(f), ctypes.byref(d),
                   ctypes.byref(n), ctypes.byref(k), ctypes.byref(kp), ctypes.byref(nb))
        self.device = d.value
        self.out_features = n.value
        self.in_features = k.value
        self.padded_in_features = kp.value
        self.nbytes = nb.value
        self.weight = _WeightTensors(self)
        vp, vb = _VP(), ctypes.c_int64()
        _capi.call("b12x_linear_weight_values", h, ctypes.byref(vp), ctypes.byref(vb))
        self._values_ptr = int(vp.value or 0)
        self.nbytes_values = vb.value
        _REGISTRY[id(self)] = self

    @property
    def handle(self) -> int:
        return int(self._h.value or 0)

    def refresh(self, weight, weight_scale=None, *, global_scale=None, output_scale=None,
                stream=None) -> None:
        """Rewrite the packed storage from new tensors (same format and shape); pointers stay."""
        keep: list = []
        gs = self.global_scale if global_scale is None else float(global_scale)
        src = _source(self.format_code, weight, weight_scale, scale_swizzled=self.scale_swizzled,
                      global_scale=gs, output_scale=output_scale, keep=keep)
        _capi.call("b12x_linear_weight_refresh", self._h, ctypes.byref(src),
                   _capi.stream_of(weight, stream))
        self.global_scale = gs

    def __del__(self):
        try:
            if getattr(self, "_h", None) is not None and self._h.value:
                _capi.lib().b12x_linear_weight_destroy(self._h)
                self._h = _VP()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self):
        return (f"PackedWeight({self.format}, out_features={self.out_features}, "
                f"in_features={self.in_features}, device={self.device})")


import weakref  # noqa: E402

_REGISTRY: "weakref.WeakValueDictionary[int, PackedWeight]" = weakref.WeakValueDictionary()


def pack_weight(fmt, weight, weight_scale=None, **kw) -> PackedWeight:
    """Pack checkpoint-layout weights (see the module docstring) for ``linear``."""
    return PackedWeight(fmt, weight, weight_scale, **kw)


# ---- plans ------------------------------------------------------------------------------------
class _Plan:
    def __init__(self, caps: Caps):
        h = _VP()
        _capi.call("b12x_linear_plan_create", ctypes.byref(caps), ctypes.byref(h))
        self._h = h
        nb = ctypes.c_int64()
        _capi.call("b12x_linear_plan_scratch_bytes", h, ctypes.byref(nb))
        self.scratch_bytes = nb.value

    def __del__(self):
        try:
            if self._h.value:
                _capi.lib().b12x_linear_plan_destroy(self._h)
        except Exception:  # pragma: no cover
            pass


_PLANS: Dict[Tuple, _Plan] = {}
_PLANS_LOCK = threading.Lock()


def _is_capturing() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def _act_code(code: int, x) -> int:
    d = _capi.as_tensor(x, None, "x").dtype
    if code in _W4A4 and d == _capi.UINT8:
        return _capi.FP4_E2M1
    if code == FORMATS["fp8_tensor"] and d == _capi.UINT8:
        return _capi.FP8_E4M3
    return d


def get_plan(packed: PackedWeight, m: int, act_dtype: int, out_dtype: int,
             expected_m: Optional[int] = None) -> _Plan:
    """The cached plan for ``m`` tokens (created on first use: host only, refused in capture)."""
    key = (packed.device, packed.format_code, packed.out_features, packed.in_features, int(m),
           act_dtype, out_dtype, int(expected_m or 0))
    p = _PLANS.get(key)
    if p is not None:
        return p
    with _PLANS_LOCK:
        p = _PLANS.get(key)
        if p is None:
            if _is_capturing():
                raise _capi.CaptureActiveError(
                    6, f"b12x.gemm: no plan for {packed.format} M={m} (N={packed.out_features}, "
                       f"K={packed.in_features}); call prewarm() or run once before capture")
            c = Caps()
            c.device = packed.device
            c.format = packed.format_code
            c.max_tokens = int(m)
            c.in_features = packed.in_features
            c.out_features = packed.out_features
            c.act_dtype = act_dtype
            c.out_dtype = out_dtype
            c.expected_m = int(expected_m or 0)
            p = _Plan(c)
            _PLANS[key] = p
    return p


def _out_code(out_dtype) -> int:
    if out_dtype is None:
        return _capi.BF16
    if isinstance(out_dtype, int):
        return out_dtype
    s = str(out_dtype).replace("torch.", "")
    table = {"bfloat16": _capi.BF16, "bf16": _capi.BF16, "float16": _capi.FP16,
             "fp16": _capi.FP16, "half": _capi.FP16}
    if s not in table:
        raise _capi.InvalidArgumentError(1, f"b12x.gemm: out_dtype {out_dtype} (supported: "
                                            f"bfloat16, float16)")
    return table[s]


def _torch_dtype(code: int):
    import torch
    return torch.bfloat16 if code == _capi.BF16 else torch.float16


def run_linear_out(x, x_scale, packed: PackedWeight, bias, alpha, out, expected_m=None,
                   stream=None) -> None:
    """Launch into ``out`` [M, N] (torch CUDA tensors; capture-safe once the plan exists)."""
    import torch
    m = int(x.shape[0])
    if m == 0:
        return
    oc = _capi.as_tensor(out, None, "out").dtype
    plan = get_plan(packed, m, _act_code(packed.format_code, x), oc, expected_m)
    scratch = None
    if plan.scratch_bytes > 0:
        scratch = torch.empty(plan.scratch_bytes, dtype=torch.uint8, device=x.device)
    _capi.call("b12x_linear_run", plan._h, _capi.ref(scratch, name="scratch"),
               _capi.ref(x, name="x"), _capi.ref(x_scale, name="x_scale"), packed._h,
               _capi.ref(out, name="out"), _capi.ref(bias, name="bias"),
               _capi.ref(alpha, name="alpha"), _capi.stream_of(x, stream))


def _torch_linear_op(x, x_scale, weight: int, bias, alpha, out) -> None:
    packed = _REGISTRY.get(int(weight))
    if packed is None:
        raise _capi.InvalidArgumentError(1, "b12x.gemm: unknown packed weight id (was it freed?)")
    run_linear_out(x, x_scale, packed, bias, alpha, out)


def _register() -> None:
    if not _torch_ops.torch_available():
        return

    def _fake(x, x_scale, weight, bias, alpha, out):
        return None

    _torch_ops.register_op(
        "gemm_linear",
        "(Tensor x, Tensor? x_scale, int weight, Tensor? bias, Tensor? alpha, Tensor(a!) out) -> ()",
        _torch_linear_op, _fake)


_register()


def linear(x, packed: PackedWeight, *, x_scale=None, bias=None, alpha=None, out=None,
           out_dtype=None, expected_m=None, stream=None):
    """``y = alpha * x . W^T + bias`` with a packed weight (torch CUDA tensors).

    ``x`` is ``[..., K]`` (bf16/fp16, or the quantized layout of the format: e4m3 values, packed
    FP4 ``[..., K/2]``); ``x_scale`` holds W4A4 swizzled scales or fp8_block fp32 [M, K/128];
    ``alpha`` is a float32 [1] CUDA tensor (W4A4 NVFP4). Returns ``[..., N]`` in ``out_dtype``
    (default: x's dtype when bf16/fp16, else bf16), or writes ``out``. numpy inputs run the CPU
    reference (use ``reference_linear``)."""
    import torch
    lead = tuple(x.shape[:-1])
    x2 = x.reshape(-1, x.shape[-1])
    if out is None:
        if out_dtype is None:
            out_dtype = x.dtype if x.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
        out = torch.empty((x2.shape[0], packed.out_features), dtype=out_dtype, device=x.device)
        ret = out.reshape(*lead, packed.out_features)
    else:
        ret = out
        out = out.reshape(-1, packed.out_features)
    if not x2.is_contiguous() and x2.stride(-1) != 1:
        x2 = x2.contiguous()
    if _torch_ops.torch_available() and "gemm_linear" in _torch_ops._REGISTERED and stream is None:
        _torch_ops.op("gemm_linear")(x2, x_scale, id(packed), bias, alpha, out)
    else:
        run_linear_out(x2, x_scale, packed, bias, alpha, out, expected_m, stream)
    return ret


def prewarm(packed: PackedWeight, token_counts, *, x_dtype=None, out_dtype=None,
            expected_m=None) -> None:
    """Create the plans for every token count before capture (no kernel launch)."""
    oc = _out_code(out_dtype)
    if x_dtype is None:
        if packed.format_code in _W4A4:
            ac = _capi.FP4_E2M1
        elif packed.format_code == FORMATS["fp8_tensor"]:
            ac = _capi.FP8_E4M3
        else:
            ac = _capi.BF16
    else:
        ac = _out_code(x_dtype) if not isinstance(x_dtype, int) else x_dtype
    for m in token_counts:
        if int(m) > 0:
            get_plan(packed, int(m), ac, oc, expected_m)


# ---- CPU reference -------------------------------------------------------------------------------
def reference_linear(fmt, weight, weight_scale, x, *, x_scale=None, alpha: float = 1.0, bias=None,
                     scale_swizzled=False, global_scale=1.0, output_scale=None) -> np.ndarray:
    """fp64 CPU reference ``[M, N]`` from host (numpy) checkpoint tensors and activations
    (bf16 given as uint16 bit patterns). Activations the op quantizes inside are quantized with
    the same rules first."""
    code = format_code(fmt)
    keep: list = []
    src = _source(code, weight, weight_scale, scale_swizzled=scale_swizzled,
                  global_scale=global_scale, output_scale=output_scale, keep=keep)
    x2 = x.reshape(-1, x.shape[-1])
    out = np.empty((x2.shape[0], _n_of(code, weight)), dtype=np.float64)
    _capi.call("b12x_ref_linear", ctypes.byref(src), _capi.ref(x2, None, "x"),
               _capi.ref(x_scale, None, "x_scale"), float(alpha), _capi.ref(bias, None, "bias"),
               _capi.ref(out, None, "out"))
    return out


def reference_dequantize_weight(fmt, weight, weight_scale=None, *, scale_swizzled=False,
                                global_scale=1.0) -> np.ndarray:
    code = format_code(fmt)
    keep: list = []
    src = _source(code, weight, weight_scale, scale_swizzled=scale_swizzled,
                  global_scale=global_scale, keep=keep)
    n = _n_of(code, weight)
    k = _k_of(code, weight)
    out = np.empty((n, k), dtype=np.float64)
    _capi.call("b12x_ref_linear_dequantize_weight", ctypes.byref(src), _capi.ref(out, None, "out"))
    return out


def _n_of(code, weight) -> int:
    return int(weight.shape[0])


def _k_of(code, weight) -> int:
    if code in _GGML:
        _, bv, bb = _GGML[code]
        return int(weight.shape[-1]) // bb * bv
    if code in _FP4_WEIGHTS:
        return 2 * int(weight.shape[-1])
    return int(weight.shape[-1])


def is_supported(device=None) -> bool:
    """True when the library loads and ``device`` (default 0) is a CUDA device whose
    architecture this build contains (SM90 and SM120/121 builds; the portable kernels)."""
    try:
        lib = _capi.lib()
    except ImportError:
        return False
    if int(lib.b12x_device_count()) == 0:
        return False
    if device is None:
        dev = 0
    elif isinstance(device, int):
        dev = device
    else:
        dev = getattr(device, "index", None) or 0
    cc, sm, ok = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
    name = ctypes.create_string_buffer(256)
    if lib.b12x_device_query(dev, ctypes.byref(cc), ctypes.byref(sm), ctypes.byref(ok), name,
                             256) != 0:
        return False
    return bool(ok.value)
