"""Checkpoints: a validating, memory-mapped safetensors reader (numpy views, zero-copy), a
writer, quantization-config parsing and layer resolution, ``inspect`` and ``quantize``.

Everything goes through the C ABI (``b12x/c_api/integration.h``); malformed files raise
:class:`b12x.B12xError` (status ``io_error``) naming the file, the tensor and the problem.

    >>> f = open_safetensors("model.safetensors")
    >>> w = f["model.layers.0.mlp.down_proj.weight"]      # read-only numpy view
    >>> cfg = load_quant_config("ckpt_dir")               # normalized dict
    >>> resolve_layer("model.layers.0.self_attn.qkv_proj", "ckpt_dir")["quant_algo"]
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi

_c = ctypes
_SIZE = _c.c_size_t
_P = _c.c_void_p
MAX_RANK = 8


class _TensorC(_c.Structure):
    _fields_ = [
        ("name", _c.c_char_p),
        ("st_dtype", _c.c_char_p),
        ("dtype", _c.c_int32),
        ("bits", _c.c_int32),
        ("ndim", _c.c_int32),
        ("shape", _c.c_int64 * MAX_RANK),
        ("offset", _c.c_uint64),
        ("nbytes", _c.c_uint64),
        ("data", _c.c_void_p),
    ]


_STR_OUT = _capi.STR_OUT
_capi.declare("b12x_safetensors_open", [_c.c_char_p, _c.POINTER(_P)])
_capi.declare("b12x_safetensors_close", [_P])
_capi.declare("b12x_safetensors_num_tensors", [_P, _c.POINTER(_c.c_int64)])
_capi.declare("b12x_safetensors_tensor_at", [_P, _c.c_int64, _c.POINTER(_TensorC)])
_capi.declare("b12x_safetensors_find", [_P, _c.c_char_p, _c.POINTER(_c.c_int64)])
_capi.declare("b12x_safetensors_metadata_json", [_P] + _STR_OUT)
_capi.declare("b12x_safetensors_parse", [_c.c_void_p, _SIZE] + _STR_OUT)
_capi.declare("b12x_safetensors_writer_create", [_c.POINTER(_P)])
_capi.declare("b12x_safetensors_writer_destroy", [_P])
_capi.declare("b12x_safetensors_writer_add", [_P, _c.c_char_p, _c.c_char_p, _c.c_int32,
                                              _c.POINTER(_c.c_int64), _c.c_void_p, _c.c_uint64])
_capi.declare("b12x_safetensors_writer_set_metadata", [_P, _c.c_char_p, _c.c_char_p])
_capi.declare("b12x_safetensors_writer_write", [_P, _c.c_char_p])
_capi.declare("b12x_quant_config_json", [_c.c_char_p, _c.c_char_p] + _STR_OUT)
_capi.declare("b12x_quant_config_resolve", [_c.c_char_p, _c.c_char_p, _c.c_char_p, _c.c_int32]
              + _STR_OUT)
_capi.declare("b12x_checkpoint_inspect", [_c.c_char_p, _c.c_int32, _c.c_int32] + _STR_OUT)
_capi.declare("b12x_checkpoint_quantize", [_c.c_char_p, _c.c_char_p, _c.c_char_p,
                                           _c.POINTER(_c.c_char_p), _c.c_int32, _c.c_float]
              + _STR_OUT)
_capi.declare("b12x_checkpoint_dequantize_linear", [_c.c_char_p, _c.c_char_p,
                                                    _c.POINTER(_c.c_float), _c.c_int64,
                                                    _c.POINTER(_c.c_int64),
                                                    _c.POINTER(_c.c_int64)])


def _b(s: Optional[Union[str, os.PathLike]]) -> Optional[bytes]:
    return None if s is None else os.fsencode(s)


_string_call = _capi.string_call


# safetensors dtype -> numpy storage dtype (bf16 and the 8-bit floats as their bit patterns).
_NP = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
    "F16": np.float16, "BF16": np.uint16, "I32": np.int32, "U32": np.uint32, "F32": np.float32,
    "F64": np.float64, "I64": np.int64, "U64": np.uint64, "C64": np.complex64,
    "F8_E4M3": np.uint8, "F8_E5M2": np.uint8, "F8_E8M0": np.uint8,
}
_FROM_NP = {
    np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8",
    np.dtype(np.int16): "I16", np.dtype(np.uint16): "U16", np.dtype(np.float16): "F16",
    np.dtype(np.int32): "I32", np.dtype(np.uint32): "U32", np.dtype(np.float32): "F32",
    np.dtype(np.float64): "F64", np.dtype(np.int64): "I64", np.dtype(np.uint64): "U64",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    st_dtype: str       # "BF16", "F8_E4M3", ...
    dtype: int          # b12x dtype code (b12x._capi.BF16, ...) or -1
    bits: int
    shape: Tuple[int, ...]
    offset: int         # absolute byte offset in the file
    nbytes: int


class SafetensorsFile:
    """A memory-mapped, validated safetensors file. ``f[name]`` is a read-only numpy view into
    the mapping (bf16 and fp8 come back as their uint16/uint8 bit patterns; F4 as packed uint8
    with the last dimension halved). The mapping lives as long as this object or any view."""

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        h = _P()
        _capi.call("b12x_safetensors_open", _b(path), _c.byref(h))
        self._h = h
        n = _c.c_int64()
        _capi.call("b12x_safetensors_num_tensors", h, _c.byref(n))
        self._infos: List[TensorInfo] = []
        self._ptrs: Dict[str, int] = {}
        for i in range(n.value):
            t = _TensorC()
            _capi.call("b12x_safetensors_tensor_at", h, _c.c_int64(i), _c.byref(t))
            info = TensorInfo(t.name.decode("utf-8"), t.st_dtype.decode(), t.dtype, t.bits,
                              tuple(t.shape[d] for d in range(t.ndim)), t.offset, t.nbytes)
            self._infos.append(info)
            self._ptrs[info.name] = t.data or 0
        self._by_name = {t.name: t for t in self._infos}
        self.metadata: Dict[str, str] = json.loads(
            _string_call("b12x_safetensors_metadata_json", h))

    def __del__(self):
        h = getattr(self, "_h", None)
        if h is not None and h.value:
            try:
                _capi.lib().b12x_safetensors_close(h)
            except Exception:  # pragma: no cover - interpreter shutdown
                pass
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __len__(self) -> int:
        return len(self._infos)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def keys(self) -> List[str]:
        return [t.name for t in self._infos]

    def tensors(self) -> List[TensorInfo]:
        return list(self._infos)

    def info(self, name: str) -> TensorInfo:
        if name not in self._by_name:
            raise KeyError(f"{self.path}: no tensor named {name!r}")
        return self._by_name[name]

    def __getitem__(self, name: str) -> np.ndarray:
        t = self.info(name)
        shape = t.shape
        if t.st_dtype == "F4":
            if shape and shape[-1] % 2:
                raise _capi.InvalidArgumentError(1, f"{self.path}: tensor {name!r} (F4) has an "
                                                    f"odd last dimension")
            np_dtype, shape = np.uint8, (shape[:-1] + (shape[-1] // 2,)) if shape else shape
        elif t.st_dtype in _NP:
            np_dtype = _NP[t.st_dtype]
        else:  # F6_*: raw bytes
            np_dtype, shape = np.uint8, (t.nbytes,)
        if t.nbytes == 0:
            arr = np.zeros(shape, dtype=np_dtype)
        else:
            arr = np.frombuffer(self._buffer(name, t.nbytes), dtype=np_dtype).reshape(shape)
        arr.flags.writeable = False  # the mapping is read-only
        return arr

    def bytes_of(self, name: str) -> np.ndarray:
        """The raw bytes of a tensor (uint8 view)."""
        t = self.info(name)
        if t.nbytes == 0:
            return np.zeros((0,), np.uint8)
        arr = np.frombuffer(self._buffer(name, t.nbytes), dtype=np.uint8)
        arr.flags.writeable = False
        return arr

    def _buffer(self, name: str, nbytes: int):
        # The ctypes buffer is the numpy view's base and holds this object, so the mapping
        # outlives every view.
        buf = (_c.c_uint8 * nbytes).from_address(self._ptrs[name])
        buf._b12x_owner = self
        return buf


def open_safetensors(path: Union[str, os.PathLike]) -> SafetensorsFile:
    return SafetensorsFile(path)


def parse_safetensors(image: bytes) -> dict:
    """Validates an in-memory safetensors image and describes it (tensors, metadata)."""
    data = bytes(image)
    buf = _c.create_string_buffer(data, len(data)) if data else None
    return json.loads(_string_call("b12x_safetensors_parse",
                                   _c.cast(buf, _c.c_void_p) if buf is not None else None,
                                   _SIZE(len(data))))


TensorLike = Union[np.ndarray, Tuple[str, np.ndarray]]


def save_safetensors(path: Union[str, os.PathLike], tensors: Mapping[str, TensorLike],
                     metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes ``{name: array}`` (or ``{name: (st_dtype, array)}`` to store e.g. uint16 bit
    patterns as "BF16" or uint8 as "F8_E4M3"); the file is written atomically."""
    w = _P()
    _capi.call("b12x_safetensors_writer_create", _c.byref(w))
    try:
        keep = []
        for name, value in tensors.items():
            if isinstance(value, tuple):
                st, arr = value
            else:
                arr = value
                st = _FROM_NP.get(np.asarray(arr).dtype)
                if st is None:
                    raise _capi.InvalidArgumentError(
                        1, f"save_safetensors: {name!r} has numpy dtype {np.asarray(arr).dtype} "
                           f"with no safetensors type; pass (st_dtype, array)")
            arr = np.ascontiguousarray(arr)
            keep.append(arr)
            shape = (_c.c_int64 * max(arr.ndim, 1))(*arr.shape)
            if st == "F4":  # arrays hold packed bytes; the file records values
                shape = (_c.c_int64 * max(arr.ndim, 1))(*arr.shape[:-1], arr.shape[-1] * 2)
            _capi.call("b12x_safetensors_writer_add", w, name.encode("utf-8"), st.encode(),
                       _c.c_int32(arr.ndim), shape, _c.c_void_p(arr.ctypes.data),
                       _c.c_uint64(arr.nbytes))
        for k, v in (metadata or {}).items():
            _capi.call("b12x_safetensors_writer_set_metadata", w, k.encode("utf-8"),
                       v.encode("utf-8"))
        _capi.call("b12x_safetensors_writer_write", w, _b(path))
    finally:
        _capi.lib().b12x_safetensors_writer_destroy(w)


def load_quant_config(dir: Optional[Union[str, os.PathLike]] = None,
                      json_text: Optional[str] = None) -> dict:
    """The normalized quantization config of a checkpoint directory (config.json, else the
    legacy hf_quant_config.json) or of a JSON text: method, global, quantized_layers, exclude,
    kv_cache_quant_algo. Unknown algorithms raise."""
    return json.loads(_string_call("b12x_quant_config_json", _b(dir),
                                   None if json_text is None else json_text.encode("utf-8")))


def resolve_layer(prefix: str, dir: Optional[Union[str, os.PathLike]] = None,
                  json_text: Optional[str] = None, is_moe: bool = False) -> dict:
    """How a layer resolves (exact, fused shards, experts parent, language_model aliasing):
    {"quant_algo": "NVFP4", "group_size": 16, ...}; "NONE" when unquantized."""
    return json.loads(_string_call("b12x_quant_config_resolve", _b(dir),
                                   None if json_text is None else json_text.encode("utf-8"),
                                   prefix.encode("utf-8"), _c.c_int32(int(is_moe))))


def inspect(dir: Union[str, os.PathLike], compute_capability: int = 0, tp_size: int = 1) -> dict:
    """Every layer with its format, bytes and the b12x path (or the reasons none runs it)."""
    return json.loads(_string_call("b12x_checkpoint_inspect", _b(dir),
                                   _c.c_int32(compute_capability), _c.c_int32(tp_size)))


FORMATS = ("nvfp4", "mxfp4", "mxfp8", "fp8", "q8_0", "iq2_xs", "iq2_xxs")


def quantize(in_dir: Union[str, os.PathLike], out_dir: Union[str, os.PathLike], format: str,
             layers: Optional[Sequence[str]] = None, input_amax: float = 0.0) -> dict:
    """BF16/FP16/F32 checkpoint -> ModelOpt MIXED_PRECISION checkpoint; returns the per-layer
    error report."""
    pats = [p.encode("utf-8") for p in (layers or [])]
    arr = (_c.c_char_p * max(len(pats), 1))(*pats)
    return json.loads(_string_call("b12x_checkpoint_quantize", _b(in_dir), _b(out_dir),
                                   format.encode(), arr, _c.c_int32(len(pats)),
                                   _c.c_float(input_amax)))


_capi.declare("b12x_checkpoint_load_linear_json", [_c.c_char_p, _c.c_char_p, _c.c_int32]
              + _STR_OUT)


@dataclass
class LinearLayer:
    """A dense layer of a checkpoint, validated against its quantization. Tensors are read-only
    numpy views into the mapped files (keys: weight, weight_scale, weight_scale_2, input_scale,
    bias, as present). ``selection`` is the policy's answer (path, reasons, ...)."""
    prefix: str
    quant: dict
    n: int
    k: int
    weight_scale_2: float
    input_scale: float
    output_scale: float  # FP8: input_scale * weight_scale; NVFP4 W4A4: the alpha
    tensors: Dict[str, np.ndarray]
    selection: dict


_FILES: Dict[str, SafetensorsFile] = {}


def load_linear(dir: Union[str, os.PathLike], prefix: str,
                compute_capability: int = 0) -> LinearLayer:
    """Loads dense layer ``prefix`` (ModelOpt / DeepSeek / GGML tensor names)."""
    j = json.loads(_string_call("b12x_checkpoint_load_linear_json", _b(dir),
                                prefix.encode("utf-8"), _c.c_int32(compute_capability)))
    views = {}
    for key, t in j["tensors"].items():
        f = _FILES.get(t["file"])
        if f is None:
            f = _FILES[t["file"]] = SafetensorsFile(t["file"])
        views[key] = f[t["name"]]
    return LinearLayer(j["prefix"], j["quant"], j["n"], j["k"], j["weight_scale_2"],
                       j["input_scale"], j["output_scale"], views, j["selection"])


# Selection paths whose GEMM format name differs from the path's tail.
_PATH_FORMAT = {"nvfp4_w4a4": "nvfp4", "mxfp4_w4a4": "mxfp4"}


def gemm_format_for_path(path: str) -> str:
    """The ``b12x.gemm`` format of a selection path (``"gemm.nvfp4_w4a16"`` -> ``"nvfp4_w4a16"``,
    ``"gemm.nvfp4_w4a4"`` -> ``"nvfp4"``)."""
    if not path.startswith("gemm."):
        raise _capi.InvalidArgumentError(1, f"gemm_format_for_path: '{path}' is not a GEMM path "
                                            f"(expected gemm.<format>)")
    tail = path[len("gemm."):]
    return _PATH_FORMAT.get(tail, tail)


def pack_linear(layer: Union[LinearLayer, str, os.PathLike], prefix: Optional[str] = None,
                device: int = 0, compute_capability: Optional[int] = None, stream=None):
    """Loads dense layer ``prefix`` of checkpoint ``layer`` (a directory, or an already loaded
    :class:`LinearLayer`) into a ``b12x.gemm.PackedWeight`` on ``device``, with the GEMM format
    the selection policy picks for that device. Raises ``UnsupportedError`` with every reason
    when b12x cannot run the layer. W4A4 NVFP4 layers take ``layer.output_scale`` as the
    per-call alpha; their activations are quantized with global scale ``1 / input_scale``."""
    from .gemm import _linear
    if not isinstance(layer, LinearLayer):
        if prefix is None:
            raise _capi.InvalidArgumentError(1, "pack_linear: prefix is required with a directory")
        if compute_capability is None:
            cc, sms, ok = _c.c_int32(), _c.c_int32(), _c.c_int32()
            _capi.call("b12x_device_query", _c.c_int32(device), _c.byref(cc), _c.byref(sms),
                       _c.byref(ok), None, _SIZE(0))
            compute_capability = cc.value
        layer = load_linear(layer, prefix, compute_capability)
    sel = layer.selection
    if not sel.get("supported"):
        raise _capi.UnsupportedError(2, f"{layer.prefix}: not supported by b12x: "
                                        f"{'; '.join(sel.get('reasons', []))}")
    fmt = gemm_format_for_path(sel["path"])
    t = layer.tensors
    weight = t["weight"]
    if fmt in ("q8_0", "iq2_xs", "iq2_xxs"):
        weight = weight.reshape(weight.shape[0], -1)  # [N, K/group, payload] -> GGML rows
    kw = {}
    if fmt in ("nvfp4", "nvfp4_w4a16"):
        kw["global_scale"] = layer.weight_scale_2
    if fmt == "fp8_tensor":
        kw["output_scale"] = layer.output_scale
    return _linear.pack_weight(fmt, weight, t.get("weight_scale"), device=device, stream=stream,
                               **kw)


# ---- MoE expert stacks -------------------------------------------------------------------------
_MOE_DECLARED = False


def _declare_moe() -> None:
    """Declared on first use: the MoE loader lives in the integration area of the library
    (src/c_api/c_api_integration.cc), which developer builds of the checkpoint area lack."""
    global _MOE_DECLARED
    if _MOE_DECLARED:
        return
    _capi.declare("b12x_checkpoint_load_moe", [_c.c_char_p, _c.c_char_p, _c.c_int64,
                                               _c.c_int32, _c.c_int32, _c.c_int32, _c.c_int32,
                                               _c.POINTER(_P)])
    _capi.declare("b12x_checkpoint_moe_destroy", [_P])
    _capi.declare("b12x_checkpoint_moe_json", [_P] + _STR_OUT)
    _capi.declare("b12x_checkpoint_moe_tensor", [_P, _c.c_char_p, _capi.TensorP])
    _MOE_DECLARED = True


# B12X_ACTIVATION_* and B12X_ACT_* of b12x/c_api/integration.h.
_ACTIVATIONS = {"silu": 1, "situ": 2, "swigluoai_uninterleave": 3, "swiglu_oai": 3,
                "swigluoai": 4, "relu2": 5, "relu2_no_mul": 5, "gelu": 6}
_ACT_FORMATS = {"auto": 0, "bf16": 1, "fp8_static": 2, "fp8_dynamic": 3, "mxfp8": 4,
                "nvfp4": 5, "mxfp4": 6}
_MOE_TENSORS = ("w1", "w1_scale", "w1_global_scale", "a1_gscale", "w2", "w2_scale",
                "w2_global_scale", "a2_gscale")


class _MoeHandle:
    def __init__(self, h):
        self.h = h

    def __del__(self):
        try:
            if self.h is not None and self.h.value:
                _capi.lib().b12x_checkpoint_moe_destroy(self.h)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def _host_view(desc, owner) -> Optional[np.ndarray]:
    """numpy view of a host descriptor (blocked dtypes as their bytes), keeping `owner` alive."""
    if not desc.data:
        return None
    shape = [int(desc.shape[i]) for i in range(desc.ndim)]
    if desc.dtype in _capi.BLOCKS:
        bv, bb = _capi.BLOCKS[desc.dtype]
        shape[-1] = shape[-1] // bv * bb
        np_dt = np.uint8
    else:
        np_dt = {_capi.FP32: np.float32, _capi.UINT8: np.uint8, _capi.UE8M0: np.uint8,
                 _capi.UE4M3: np.uint8, _capi.FP8_E4M3: np.uint8}[desc.dtype]
    n = int(np.prod(shape)) * np.dtype(np_dt).itemsize
    buf = (_c.c_uint8 * n).from_address(desc.data)
    buf._owner = owner  # the numpy view keeps the buffer, the buffer the loader handle
    return np.frombuffer(buf, dtype=np_dt).reshape(shape)


@dataclass
class MoeLayer:
    """A checkpoint's expert stack in the fused MoE's source layout (host memory). ``plan`` holds
    the ``fused_moe.plan_weights`` arguments the policy chose; ``tensors`` the read-only numpy
    sources (keys of ``prepare_weights``: w1, w1_scale, w1_global_scale, a1_gscale, w2, ...)."""
    prefix: str
    quant: dict
    selection: dict
    num_experts: int
    hidden: int
    intermediate: int
    gated: bool
    plan: dict
    tensors: Dict[str, np.ndarray]


def load_moe(dir: Union[str, os.PathLike], prefix: str, topk: int = 1,
             compute_capability: int = 0, activation: str = "silu", act_format: str = "auto",
             params_dtype: str = "bfloat16") -> MoeLayer:
    """Loads the experts under ``prefix`` ("model.layers.3.mlp.experts"), validates every expert
    and asks the selection policy for the path (raises ``UnsupportedError`` with every reason)."""
    if activation not in _ACTIVATIONS:
        raise _capi.InvalidArgumentError(1, f"load_moe: activation={activation!r} (supported: "
                                            f"{', '.join(sorted(_ACTIVATIONS))})")
    if act_format not in _ACT_FORMATS:
        raise _capi.InvalidArgumentError(1, f"load_moe: act_format={act_format!r} (supported: "
                                            f"{', '.join(sorted(_ACT_FORMATS))})")
    pd = {"bfloat16": _capi.BF16, "bf16": _capi.BF16, "float16": _capi.FP16,
          "fp16": _capi.FP16}.get(str(params_dtype).replace("torch.", ""))
    if pd is None:
        raise _capi.InvalidArgumentError(1, f"load_moe: params_dtype={params_dtype!r} "
                                            f"(supported: bfloat16, float16)")
    _declare_moe()
    h = _P()
    _capi.call("b12x_checkpoint_load_moe", _b(dir), prefix.encode("utf-8"), _c.c_int64(topk),
               _c.c_int32(compute_capability), _c.c_int32(_ACTIVATIONS[activation]),
               _c.c_int32(_ACT_FORMATS[act_format]), _c.c_int32(pd), _c.byref(h))
    owner = _MoeHandle(h)
    j = json.loads(_string_call("b12x_checkpoint_moe_json", h))
    tensors = {}
    for name in _MOE_TENSORS:
        d = _capi.Tensor()
        _capi.call("b12x_checkpoint_moe_tensor", h, name.encode(), _c.byref(d))
        v = _host_view(d, owner)
        if v is not None:
            tensors[name] = v
    return MoeLayer(j["prefix"], j["quant"], j["selection"], j["num_experts"], j["hidden"],
                    j["intermediate"], j["gated"], j["plan"], tensors)


def prepare_moe(layer: MoeLayer, device: int = 0, stream=None):
    """Copies a loaded expert stack to ``device`` (torch) and prepares it for the fused MoE.
    Returns ``(weight_plan, experts)`` for ``fused_moe.Caps(weight_plan=...)`` / ``bind``."""
    import torch
    from .moe import fused_moe
    p = layer.plan
    plan = fused_moe.plan_weights(
        quant_modes=p["quant_mode"], source_format=p["source_format"],
        activation=p["activation"], params_dtype=p["params_dtype"],
        num_experts=layer.num_experts, hidden_size=layer.hidden,
        intermediate_size=layer.intermediate, w13_layout=p["w13_layout"],
        ggml_w1_dtype=p["ggml_w1_dtype"], ggml_w2_dtype=p["ggml_w2_dtype"])
    dev = torch.device("cuda", device)
    t = layer.tensors
    # Values and block scales are read on the device; per-expert scalars may stay on the host.
    on_dev = {k: torch.from_numpy(np.array(t[k])).to(dev) for k in ("w1", "w1_scale", "w2",
                                                                    "w2_scale") if k in t}
    experts = fused_moe.prepare_weights(
        plan=plan, w1=on_dev["w1"], w2=on_dev["w2"], w1_blockscale=on_dev.get("w1_scale"),
        w2_blockscale=on_dev.get("w2_scale"), w1_global_scale=t.get("w1_global_scale"),
        w2_global_scale=t.get("w2_global_scale"), a1_gscale=t.get("a1_gscale"),
        a2_gscale=t.get("a2_gscale"), stream=stream)
    return plan, experts


def dequantize_linear(dir: Union[str, os.PathLike], prefix: str) -> np.ndarray:
    """Loads dense layer ``prefix`` from a checkpoint and reconstructs it as fp32 [n, k]."""
    n, k = _c.c_int64(), _c.c_int64()
    _capi.call("b12x_checkpoint_dequantize_linear", _b(dir), prefix.encode("utf-8"), None,
               _c.c_int64(0), _c.byref(n), _c.byref(k))
    out = np.empty((n.value, k.value), dtype=np.float32)
    _capi.call("b12x_checkpoint_dequantize_linear", _b(dir), prefix.encode("utf-8"),
               out.ctypes.data_as(_c.POINTER(_c.c_float)), _c.c_int64(out.size), _c.byref(n),
               _c.byref(k))
    return out


__all__ = ["SafetensorsFile", "TensorInfo", "open_safetensors", "parse_safetensors",
           "save_safetensors", "load_quant_config", "resolve_layer", "inspect", "quantize",
           "dequantize_linear", "load_linear", "LinearLayer", "FORMATS", "pack_linear",
           "gemm_format_for_path", "load_moe", "prepare_moe", "MoeLayer"]
