"""Paged causal GQA attention: decode, verify and extend over a paged KV cache.

The surface vLLM's b12x attention backend calls (vllm-contract §1.5, §6)::

    caps = Caps(device=0, mode="decode", dtype=torch.bfloat16, kv_dtype=torch.float8_e4m3fn,
                num_q_heads=32, num_kv_heads=8, head_dim_qk=128, head_dim_vo=128, page_size=64,
                max_total_q=B, max_batch=B, max_page_table_width=W, use_cuda_graph=True)
    plan = plan(caps)                                  # host only, before capture
    scratch = torch.empty(plan.layout.nbytes, dtype=torch.uint8, device="cuda")
    binding = plan.bind(scratch, q, k_cache, v_cache, out, page_table, cache_seqlens,
                        cu_seqlens_q, window_left=-1, k_descale=kd, v_descale=vd,
                        attention_sink_bias=sinks)     # views only, capture-safe
    out, lse = run(binding=binding)                    # launch only, capture-safe

Semantics (b12x-contract §4): k_cache / v_cache ``[num_pages, page_size, Hkv, D]`` (head_dim
contiguous, other strides free, e.g. the two planes of vLLM's ``[N, 2, page, Hkv, D]`` cache),
``page_table`` int32 ``[B, W]``, ``cache_seqlens`` int32 ``[B]`` including the new tokens,
``cu_seqlens_q`` int32 ``[B+1]``, right-aligned causal mask, ``window_left`` (-1 = off, inclusive),
sinks fp32 ``[Hq]`` in natural-log units (denominator only), scale ``Dqk^-0.5`` (or
``softmax_scale``). ``lse`` is base 2, a ``[T, Hq]`` view of head-major storage in the scratch.

The live schedule (row tiles, KV splits) is derived on the device from the metadata each launch,
so a captured graph replays correctly with new lengths and page tables written in place.
``prepare_*_replay_state`` therefore only validate and refuse to run during capture.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Optional

from .. import _capi, _torch_ops

__all__ = ["Caps", "Plan", "Binding", "plan", "bind", "run", "compile", "append_kv", "reference",
           "decode_graph_capacity", "verify_graph_capacity", "extend_graph_capacity",
           "decode_graph_scratch_envelope", "infer_mode", "is_supported", "GraphCapacity"]

MODES = {"decode": 0, "extend": 1, "verify": 2}
_T = _capi.TensorP


class _CCaps(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in (
        "device", "mode", "q_dtype", "kv_dtype", "num_q_heads", "num_kv_heads", "head_dim_qk",
        "head_dim_vo", "page_size", "max_batch", "max_page_table_width", "max_total_q",
        "max_splits", "use_cuda_graph")]

KV_PREFIX_STABLE = 1  # B12X_PAGED_CAPS_KV_PREFIX_STABLE (plan_create_ex flags)


class _CPlanInfo(ctypes.Structure):
    _fields_ = [("scratch_bytes", ctypes.c_int64), ("partial_rows", ctypes.c_int64),
                ("lse_offset", ctypes.c_int64), ("tile_rows", ctypes.c_int32),
                ("tile_kv", ctypes.c_int32), ("split_limit", ctypes.c_int32),
                ("target_ctas", ctypes.c_int32), ("kernel", ctypes.c_char * 96)]


class _CArgs(ctypes.Structure):
    _fields_ = [("q", _T), ("k_cache", _T), ("v_cache", _T), ("out", _T), ("page_table", _T),
                ("cache_seqlens", _T), ("cu_seqlens_q", _T), ("k_descale", _T),
                ("v_descale", _T), ("sinks", _T), ("lse", _T), ("window_left", ctypes.c_int32),
                ("softmax_scale", ctypes.c_float), ("num_splits", ctypes.c_int32)]


_VP = ctypes.c_void_p
_capi.declare("b12x_attention_paged_plan_create",
              [ctypes.POINTER(_CCaps), _VP, ctypes.POINTER(_VP)])
_capi.declare("b12x_attention_paged_plan_create_ex",
              [ctypes.POINTER(_CCaps), ctypes.c_uint32, _VP, ctypes.POINTER(_VP)])
_capi.declare("b12x_attention_paged_plan_destroy", [_VP])
_capi.declare("b12x_attention_paged_plan_info", [_VP, ctypes.POINTER(_CPlanInfo)])
_capi.declare("b12x_attention_paged_bind", [_VP, _T, ctypes.POINTER(_CArgs), ctypes.POINTER(_VP)])
_capi.declare("b12x_attention_paged_binding_destroy", [_VP])
_capi.declare("b12x_attention_paged_run", [_VP, _VP])
_capi.declare("b12x_attention_paged_binding_info",
              [_VP, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32)])
_capi.declare("b12x_attention_paged_forward", [_VP, _T, ctypes.POINTER(_CArgs), _VP])
_capi.declare("b12x_attention_append_kv", [_T, _T, _T, _T, _T, _T, _T, _VP])
_capi.declare("b12x_ref_paged_attention", [ctypes.POINTER(_CArgs)])
_capi.declare("b12x_ref_append_kv", [_T, _T, _T, _T, _T, _T, _T])

_DTYPE_NAMES = {"bf16": _capi.BF16, "bfloat16": _capi.BF16, "fp16": _capi.FP16,
                "float16": _capi.FP16, "half": _capi.FP16, "fp8": _capi.FP8_E4M3,
                "fp8_e4m3": _capi.FP8_E4M3, "float8_e4m3fn": _capi.FP8_E4M3,
                "e4m3": _capi.FP8_E4M3, "auto": None}


def _dtype_code(x, what: str, default=_capi.BF16) -> int:
    if x is None:
        return default
    if isinstance(x, int):
        return x
    s = str(x).replace("torch.", "")
    if s in _DTYPE_NAMES:
        code = _DTYPE_NAMES[s]
        return default if code is None else code
    raise _capi.InvalidArgumentError(
        1, f"b12x.attention.paged: {what}={x!r} (supported: bf16, fp16, fp8_e4m3)")


def _device_index(device) -> int:
    if device is None:
        torch = _capi._torch()
        if torch is not None and torch.cuda.is_available():
            return torch.cuda.current_device()
        return 0
    if isinstance(device, int):
        return device
    idx = getattr(device, "index", None)
    if idx is not None:
        return int(idx)
    if isinstance(device, str):
        return int(device.split(":")[1]) if ":" in device else 0
    return 0


def is_supported(device=None) -> bool:
    """True when a GPU this build was compiled for is visible (SM89/SM90/SM120/SM121)."""
    try:
        lib = _capi.lib()
        if lib.b12x_device_count() == 0:
            return False
        cc, sms, ok = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        name = ctypes.create_string_buffer(128)
        st = lib.b12x_device_query(_device_index(device), ctypes.byref(cc), ctypes.byref(sms),
                                   ctypes.byref(ok), name, 128)
        return st == 0 and bool(ok.value)
    except Exception:  # pragma: no cover - no library / driver
        return False


@dataclass
class Caps:
    """Capacities of a plan (b12x.attention.paged.Caps). ``max_work_items``,
    ``max_partial_rows``, ``num_cache_pages``, ``copy_runtime_metadata`` are accepted for
    compatibility; ``max_partial_rows=0`` disables split-KV. ``max_splits`` (this library):
    0 = automatic, 1 = never split.

    ``kv_prefix_stable`` (this library; C++ ``PagedCaps::kv_prefix_stable``): the caller's
    promise that no kernel still running when an attention call launches (one that let it launch
    early through programmatic dependent launch) writes K/V rows below ``cache_seqlens[b] -
    q_len`` of the pages ``page_table[b]`` names; the new tokens' rows and the metadata may still
    be written. Decode / verify plans then copy their first K/V tiles before the PDL wait
    (``plan.kernel`` ends in ``_early``). True by default here: vLLM's call path keeps it (its
    cache append, ``reshape_and_cache_flash``, writes only the new tokens' slots, and no kernel
    rewrites a page in place while a request reads it); pass False when a kernel that may overlap
    the call through PDL rewrites older rows (e.g. an in-place page copy)."""
    device: Any = None
    mode: str = "decode"
    dtype: Any = "bf16"
    kv_dtype: Any = "bf16"
    num_q_heads: int = 0
    num_kv_heads: int = 0
    head_dim_qk: int = 0
    head_dim_vo: Optional[int] = None
    page_size: int = 64
    max_total_q: int = 0
    max_batch: int = 0
    max_page_table_width: int = 0
    max_work_items: Optional[int] = None
    max_partial_rows: Optional[int] = None
    num_cache_pages: Optional[int] = None
    use_cuda_graph: bool = False
    copy_runtime_metadata: bool = True
    msa_block_sparse: bool = False
    msa_union_tile: Any = None
    max_splits: int = 0
    kv_prefix_stable: bool = True

    def _to_c(self) -> _CCaps:
        if self.mode not in MODES:
            raise _capi.InvalidArgumentError(
                1, f"b12x.attention.paged: mode={self.mode!r} (supported: decode, extend, verify)")
        if self.msa_block_sparse:
            raise _capi.UnsupportedError(2, "b12x.attention.paged: MSA block-sparse attention is "
                                            "not supported")
        c = _CCaps()
        c.device = _device_index(self.device)
        c.mode = MODES[self.mode]
        c.q_dtype = _dtype_code(self.dtype, "dtype")
        c.kv_dtype = _dtype_code(self.kv_dtype, "kv_dtype", default=c.q_dtype)
        c.num_q_heads = int(self.num_q_heads)
        c.num_kv_heads = int(self.num_kv_heads)
        c.head_dim_qk = int(self.head_dim_qk)
        c.head_dim_vo = int(self.head_dim_vo if self.head_dim_vo is not None else self.head_dim_qk)
        c.page_size = int(self.page_size)
        c.max_batch = int(self.max_batch)
        c.max_page_table_width = int(self.max_page_table_width)
        c.max_total_q = int(self.max_total_q)
        splits = int(self.max_splits)
        if self.max_partial_rows is not None and int(self.max_partial_rows) == 0 and splits == 0:
            splits = 1
        c.max_splits = splits
        c.use_cuda_graph = int(bool(self.use_cuda_graph))
        return c

    def _flags(self) -> int:
        return KV_PREFIX_STABLE if self.kv_prefix_stable else 0


def _scratch_tensor(scratch):
    if isinstance(scratch, dict):
        if len(scratch) != 1:
            raise _capi.InvalidArgumentError(1, "b12x.attention.paged: scratch mapping must hold "
                                                f"one tensor, got {len(scratch)}")
        scratch = next(iter(scratch.values()))
    elif isinstance(scratch, (list, tuple)):
        if len(scratch) != 1:
            raise _capi.InvalidArgumentError(1, "b12x.attention.paged: scratch sequence must hold "
                                                f"one tensor, got {len(scratch)}")
        scratch = scratch[0]
    if scratch is None:
        raise _capi.InvalidArgumentError(1, "b12x.attention.paged: scratch is required")
    return scratch


class Plan:
    """A plan (host only). ``layout.nbytes`` is the scratch size; ``scratch_specs()`` returns
    one uint8 spec."""

    def __init__(self, caps: Caps, stream=None):
        self.caps = caps
        self._ccaps = caps._to_c()
        handle = _VP()
        _capi.call("b12x_attention_paged_plan_create_ex", ctypes.byref(self._ccaps),
                   caps._flags(), _capi.stream_of(None, stream) if stream is not None else _VP(0),
                   ctypes.byref(handle))
        self._handle = handle
        info = _CPlanInfo()
        _capi.call("b12x_attention_paged_plan_info", handle, ctypes.byref(info))
        self.info = info
        self.kernel = info.kernel.decode()
        self.layout = SimpleNamespace(nbytes=int(info.scratch_bytes),
                                      lse_offset=int(info.lse_offset),
                                      partial_rows=int(info.partial_rows))
        self.max_partial_rows = int(info.partial_rows)
        self.split_limit = int(info.split_limit)
        self._prepared = False

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h is not None and h.value:
            try:
                _capi.lib().b12x_attention_paged_plan_destroy(h)
            except Exception:  # pragma: no cover - interpreter shutdown
                pass
            self._handle = None

    @property
    def handle(self) -> int:
        return int(self._handle.value)

    def scratch_specs(self):
        return [SimpleNamespace(name="scratch", nbytes=self.layout.nbytes, dtype="uint8")]

    def _refuse_capture(self, what: str):
        torch = _capi._torch()
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise _capi.CaptureActiveError(
                6, f"b12x.attention.paged: {what} cannot run while a CUDA graph is being captured; "
                   "call it before capture")

    def prepare_decode_graph_replay_state(self, batch, max_page_table_width=None,
                                          total_q_capacity=None, max_cache_page_count=None,
                                          fixed_split_size=-1, window_left=-1,
                                          force_split_kv=None):
        """Validates a decode graph bucket against the plan. Nothing else is needed: the kernel
        derives its schedule from the device metadata each replay."""
        self._refuse_capture("prepare_decode_graph_replay_state")
        c = self._ccaps
        if int(batch) > c.max_batch:
            raise _capi.InvalidArgumentError(1, f"b12x.attention.paged: batch={batch} exceeds the "
                                                f"plan's max_batch={c.max_batch}")
        if max_page_table_width is not None and int(max_page_table_width) > c.max_page_table_width:
            raise _capi.InvalidArgumentError(
                1, f"b12x.attention.paged: max_page_table_width={max_page_table_width} exceeds the "
                   f"plan's {c.max_page_table_width}")
        if total_q_capacity is not None and int(total_q_capacity) > c.max_total_q:
            raise _capi.InvalidArgumentError(
                1, f"b12x.attention.paged: total_q_capacity={total_q_capacity} exceeds the plan's "
                   f"max_total_q={c.max_total_q}")
        self._prepared = True

    def prepare_graph_replay_state(self, page_table=None, cache_seqlens=None, cu_seqlens_q=None,
                                   active_total_q=None, window_left=-1, **_ignored):
        self._refuse_capture("prepare_graph_replay_state")
        if page_table is not None:
            self.prepare_decode_graph_replay_state(int(page_table.shape[0]),
                                                   int(page_table.shape[1]))
        self._prepared = True

    def bind(self, scratch, q, k_cache, v_cache, output, page_table, cache_seqlens, cu_seqlens_q,
             fixed_split_size=None, disable_split_kv=False, window_left=-1, active_total_q=None,
             k_descale=None, v_descale=None, attention_sink_bias=None,
             relative_attention_bias=None, q2k_indices=None, softmax_scale=None,
             num_splits=None, return_lse=True, lse=None) -> "Binding":
        return Binding(self, scratch, q, k_cache, v_cache, output, page_table, cache_seqlens,
                       cu_seqlens_q, window_left=window_left, active_total_q=active_total_q,
                       k_descale=k_descale, v_descale=v_descale, sinks=attention_sink_bias,
                       softmax_scale=softmax_scale,
                       num_splits=1 if disable_split_kv else (num_splits or 0),
                       return_lse=return_lse, lse=lse,
                       unsupported=(relative_attention_bias, q2k_indices))


def _make_args(q, k_cache, v_cache, out, page_table, cache_seqlens, cu_seqlens_q, k_descale,
               v_descale, sinks, lse, window_left, softmax_scale, num_splits, kv_code=None):
    keep = []

    def r(x, name, dtype=None):
        if x is None:
            return None
        t = _capi.as_tensor(x, dtype, name)
        keep.append(t)
        return ctypes.pointer(t)

    a = _CArgs()
    a.q = r(q, "q")
    a.k_cache = r(k_cache, "k_cache", kv_code)
    a.v_cache = r(v_cache, "v_cache", kv_code)
    a.out = r(out, "out")
    a.page_table = r(page_table, "page_table")
    a.cache_seqlens = r(cache_seqlens, "cache_seqlens")
    a.cu_seqlens_q = r(cu_seqlens_q, "cu_seqlens_q")
    a.k_descale = r(k_descale, "k_descale")
    a.v_descale = r(v_descale, "v_descale")
    a.sinks = r(sinks, "sinks")
    a.lse = r(lse, "lse")
    a.window_left = int(-1 if window_left is None else window_left)
    a.softmax_scale = float(softmax_scale or 0.0)
    a.num_splits = int(num_splits or 0)
    return a, keep


def _kv_code(k_cache, plan_kv: int):
    """uint8 caches are viewed as e4m3 when the plan's KV dtype is FP8."""
    if plan_kv == _capi.FP8_E4M3:
        return _capi.FP8_E4M3
    return None


class Binding:
    """Views of one call (no allocation besides host descriptors). ``output`` and ``lse`` are
    the tensors ``run`` returns."""

    def __init__(self, plan_: Plan, scratch, q, k_cache, v_cache, output, page_table,
                 cache_seqlens, cu_seqlens_q, window_left=-1, active_total_q=None,
                 k_descale=None, v_descale=None, sinks=None, softmax_scale=None, num_splits=0,
                 return_lse=True, lse=None, unsupported=(None, None)):
        if any(x is not None for x in unsupported):
            raise _capi.UnsupportedError(2, "b12x.attention.paged: relative_attention_bias and "
                                            "q2k_indices (MSA) are not supported")
        self.plan = plan_
        self.scratch = _scratch_tensor(scratch)
        T = int(q.shape[0])
        if active_total_q is not None and int(active_total_q) > T:
            raise _capi.InvalidArgumentError(
                1, f"b12x.attention.paged: active_total_q={active_total_q} exceeds q rows {T}")
        k_descale = _as_scale_vector(k_descale, int(page_table.shape[0]))
        v_descale = _as_scale_vector(v_descale, int(page_table.shape[0]))
        if lse is None and return_lse and _capi.is_torch_tensor(self.scratch):
            import torch
            hq = int(q.shape[1])
            off = plan_.layout.lse_offset
            lse = (self.scratch[off:off + hq * T * 4].view(torch.float32).view(hq, T).t())
        self.output, self.lse = output, lse
        self._tensors = (q, k_cache, v_cache, output, page_table, cache_seqlens, cu_seqlens_q,
                         k_descale, v_descale, sinks, lse, self.scratch)
        self._args, self._keep = _make_args(q, k_cache, v_cache, output, page_table,
                                            cache_seqlens, cu_seqlens_q, k_descale, v_descale,
                                            sinks, lse, window_left, softmax_scale, num_splits,
                                            _kv_code(k_cache, plan_.caps._to_c().kv_dtype))
        self._scratch_desc = _capi.as_tensor(self.scratch, None, "scratch")
        handle = _VP()
        _capi.call("b12x_attention_paged_bind", plan_._handle, ctypes.byref(self._scratch_desc),
                   ctypes.byref(self._args), ctypes.byref(handle))
        self._handle = handle
        self.window_left = window_left
        self.device_tensor = q
        splits, tiles = ctypes.c_int32(), ctypes.c_int32()
        _capi.call("b12x_attention_paged_binding_info", handle, ctypes.byref(splits),
                   ctypes.byref(tiles))
        self.num_splits, self.num_row_tiles = int(splits.value), int(tiles.value)

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h is not None and h.value:
            try:
                _capi.lib().b12x_attention_paged_binding_destroy(h)
            except Exception:  # pragma: no cover
                pass
            self._handle = None

    def launch(self, stream=None):
        _capi.call("b12x_attention_paged_run", self._handle,
                   _capi.stream_of(self.device_tensor, stream))


def _as_scale_vector(s, batch: int):
    """Scalars and [1] / [B, 1] scale tensors become [B] / broadcast views (no copy)."""
    if s is None:
        return None
    if _capi.is_torch_tensor(s):
        if s.dim() == 0:
            return s.reshape(1)
        return s
    return s


def plan(caps: Caps, stream=None) -> Plan:
    """Plan from capacities (host only; refuses during capture)."""
    return Plan(caps, stream)


def bind(plan_: Plan, scratch=None, q=None, k_cache=None, v_cache=None, output=None,
         page_table=None, cache_seqlens=None, cu_seqlens_q=None, **kwargs) -> Binding:
    return plan_.bind(scratch, q, k_cache, v_cache, output, page_table, cache_seqlens,
                      cu_seqlens_q, **kwargs)


def compile(binding: Binding = None, **_ignored) -> Binding:  # noqa: A001 - b12x name
    """Kernels are compiled ahead of time; this validates the binding and launches nothing."""
    if binding is None:
        raise _capi.InvalidArgumentError(1, "b12x.attention.paged.compile: binding is required")
    return binding


def run(binding: Binding = None, stream=None):
    """Launch (capture-safe). Returns ``(output, lse)``; lse is base 2 or None."""
    if binding is None:
        raise _capi.InvalidArgumentError(1, "b12x.attention.paged.run: binding is required")
    binding.launch(stream)
    return binding.output, binding.lse


def infer_mode(cu_seqlens_q) -> str:
    """decode iff every q_len is 1 (reads the metadata on the host: not for use in capture)."""
    import numpy as np
    cu = cu_seqlens_q.cpu().numpy() if _capi.is_torch_tensor(cu_seqlens_q) else np.asarray(cu_seqlens_q)
    return "decode" if bool(np.all(np.diff(cu) == 1)) else "extend"


# ---- graph capacities ------------------------------------------------------------------------
@dataclass
class GraphCapacity:
    max_work_items: int
    max_partial_rows: int
    representative_cache_seqlen: int
    max_splits: int
    scratch_nbytes: int
    caps: Caps = field(repr=False, default=None)

    @property
    def nbytes(self) -> int:
        return self.scratch_nbytes


def _capacity(mode, device, q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim_qk,
              head_dim_vo, page_size, batch, total_q, max_cache_page_count) -> GraphCapacity:
    caps = Caps(device=device, mode=mode, dtype=q_dtype, kv_dtype=kv_dtype,
                num_q_heads=num_q_heads, num_kv_heads=num_kv_heads, head_dim_qk=head_dim_qk,
                head_dim_vo=head_dim_vo, page_size=page_size, max_total_q=total_q,
                max_batch=batch, max_page_table_width=max_cache_page_count, use_cuda_graph=True)
    p = Plan(caps)
    group = int(num_q_heads) // int(num_kv_heads)
    per_req = max(1, -(-int(total_q) // int(batch)))
    tiles = -(-(per_req * group) // int(p.info.tile_rows))
    work = int(batch) * int(num_kv_heads) * tiles * max(1, p.split_limit)
    caps.max_work_items = work
    caps.max_partial_rows = p.max_partial_rows
    return GraphCapacity(max_work_items=work, max_partial_rows=p.max_partial_rows,
                         representative_cache_seqlen=int(max_cache_page_count) * int(page_size),
                         max_splits=p.split_limit, scratch_nbytes=p.layout.nbytes, caps=caps)


def decode_graph_capacity(device=None, q_dtype=None, kv_dtype=None, num_q_heads=None,
                          num_kv_heads=None, head_dim_qk=None, head_dim_vo=None, page_size=None,
                          batch=None, max_cache_page_count=None, window_left=-1, **_ignored):
    return _capacity("decode", device, q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim_qk,
                     head_dim_vo, page_size, batch, batch, max_cache_page_count)


def verify_graph_capacity(device=None, q_dtype=None, kv_dtype=None, num_q_heads=None,
                          num_kv_heads=None, head_dim_qk=None, head_dim_vo=None, page_size=None,
                          batch=None, query_len=None, max_cache_page_count=None, window_left=-1,
                          **_ignored):
    return _capacity("verify", device, q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim_qk,
                     head_dim_vo, page_size, batch, int(batch) * int(query_len),
                     max_cache_page_count)


def extend_graph_capacity(device=None, q_dtype=None, kv_dtype=None, num_q_heads=None,
                          num_kv_heads=None, head_dim_qk=None, head_dim_vo=None, page_size=None,
                          batch=None, total_q_capacity=None, max_cache_page_count=None,
                          window_left=-1, **_ignored):
    return _capacity("extend", device, q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim_qk,
                     head_dim_vo, page_size, batch, total_q_capacity, max_cache_page_count)


def decode_graph_scratch_envelope(device=None, q_dtype=None, kv_dtype=None, num_q_heads=None,
                                  num_kv_heads=None, head_dim_qk=None, head_dim_vo=None,
                                  page_size=None, batch=None, max_cache_page_count=None,
                                  window_left=-1, **_ignored):
    """Scratch bytes that serve every decode bucket of batch 1..batch (``.nbytes``)."""
    cap = decode_graph_capacity(device, q_dtype, kv_dtype, num_q_heads, num_kv_heads, head_dim_qk,
                                head_dim_vo, page_size, batch, max_cache_page_count, window_left)
    return SimpleNamespace(nbytes=cap.scratch_nbytes, capacity=cap)


# ---- KV append and the CPU reference ---------------------------------------------------------
def append_kv(key, value, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None,
              stream=None) -> None:
    """Write key/value ``[T, Hkv, D]`` into the cache at ``slot_mapping`` (int64, page*page_size
    + offset, negative = skip); FP8 caches need fp32 ``k_scale``/``v_scale`` (one value)."""
    fp8 = None
    dt = getattr(k_cache, "dtype", None)
    if dt is not None and ("float8" in str(dt) or str(dt) in ("uint8", "torch.uint8")):
        fp8 = _capi.FP8_E4M3
    keep = [_capi.as_tensor(key, None, "key"), _capi.as_tensor(value, None, "value"),
            _capi.as_tensor(k_cache, fp8, "k_cache"), _capi.as_tensor(v_cache, fp8, "v_cache"),
            _capi.as_tensor(slot_mapping, None, "slot_mapping")]
    ks = _capi.ref(_as_scale_vector(k_scale, 1), None, "k_scale")
    vs = _capi.ref(_as_scale_vector(v_scale, 1), None, "v_scale")
    _capi.call("b12x_attention_append_kv", *[ctypes.pointer(t) for t in keep], ks, vs,
               _capi.stream_of(key, stream))


def reference(q, k_cache, v_cache, page_table, cache_seqlens, cu_seqlens_q, *, window_left=-1,
              k_descale=None, v_descale=None, attention_sink_bias=None, softmax_scale=None,
              kv_fp8=False):
    """CPU reference on numpy arrays (bf16 as uint16 bit patterns, fp8 as uint8 with
    ``kv_fp8=True``). Returns ``(out float64 [T, Hq, Dv], lse float64 [T, Hq] base 2)``."""
    import numpy as np
    T, hq = int(q.shape[0]), int(q.shape[1])
    dv = int(v_cache.shape[3])
    out = np.zeros((T, hq, dv), dtype=np.float64)
    lse = np.zeros((T, hq), dtype=np.float64)
    kv_code = _capi.FP8_E4M3 if kv_fp8 else None
    args, keep = _make_args(q, k_cache, v_cache, out, page_table, cache_seqlens, cu_seqlens_q,
                            k_descale, v_descale, attention_sink_bias, lse, window_left,
                            softmax_scale, 0, kv_code)
    _capi.call("b12x_ref_paged_attention", ctypes.byref(args))
    return out, lse


# ---- torch custom op (out variant) -----------------------------------------------------------
def _op_impl(scratch, q, k_cache, v_cache, out, page_table, cache_seqlens, cu_seqlens_q,
             k_descale, v_descale, sinks, lse, plan_handle, window_left, softmax_scale,
             num_splits):
    args, keep = _make_args(q, k_cache, v_cache, out, page_table, cache_seqlens, cu_seqlens_q,
                            k_descale, v_descale, sinks, lse, window_left, softmax_scale,
                            num_splits,
                            _capi.FP8_E4M3 if k_cache.element_size() == 1 else None)
    sd = _capi.as_tensor(scratch, None, "scratch")
    _capi.call("b12x_attention_paged_forward", _VP(plan_handle), ctypes.byref(sd),
               ctypes.byref(args), _capi.stream_of(q))


def _op_fake(*args):
    return None


try:
    _torch_ops.register_op(
        "paged_attention",
        "(Tensor(a!) scratch, Tensor q, Tensor k_cache, Tensor v_cache, Tensor(b!) out, "
        "Tensor page_table, Tensor cache_seqlens, Tensor cu_seqlens_q, Tensor? k_descale, "
        "Tensor? v_descale, Tensor? sinks, Tensor(c!)? lse, int plan, int window_left, "
        "float softmax_scale, int num_splits) -> ()",
        _op_impl, _op_fake)
except Exception as _e:  # pragma: no cover - depends on the torch build
    import warnings
    warnings.warn(f"b12x.attention.paged: torch custom op not registered: {_e}")
