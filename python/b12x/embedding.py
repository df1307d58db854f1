"""Q8_0 embedding lookup: ``out[t] = dequant(weight[ids[t]])``.

``weight`` holds GGML Q8_0 rows: a uint8 array/tensor ``[vocab, dim/32*34]`` (each 34-byte block
is an fp16 scale ``d`` then 32 int8 values; value = fp16(d) * q). ``ids`` is int32 or int64
``[T]``; ``out`` is bf16 or fp16 ``[T, dim]`` (numpy: uint16 bf16 bit patterns or float16).
Out-of-range ids (``id < 0`` or ``id >= vocab``) are an error, reported without reading out of
bounds: the kernel writes a zero row and sets the token's device status flag.

One-shot (synchronises to check the status; raises ``InvalidArgumentError`` naming the first bad
id and the vocab)::

    out = embedding_q8_0(weight, ids)                  # bf16 result (torch CUDA or numpy)
    embedding_q8_0_out(weight, ids, out)

Serving (plan once, bind persistent buffers, run inside CUDA graphs; check when convenient)::

    emb = Q8_0Embedding(weight, max_tokens=8192, id_dtype="int32", out_dtype="bf16")
    emb.bind(ids_buffer, out_buffer)    # status scratch (1 byte/token) allocated by the ctor
    emb.run()                           # launch only, capture-safe
    emb.status()                        # -> (bad_tokens, first_bad_token, first_bad_id), syncs
    emb.check()                         # raises like the one-shot if the last run saw bad ids

numpy inputs use the CPU reference (bit-identical to the kernel). With torch the one-shot body
is also registered as the custom op ``torch.ops.b12x.embedding_q8_0(weight, ids, out)``
(out-variant schema, fake implementation for tracing).
"""

from __future__ import annotations

import ctypes
from typing import Optional, Tuple

import numpy as np

from . import _capi, _torch_ops

__all__ = ["embedding_q8_0", "embedding_q8_0_out", "Q8_0Embedding", "reference_embedding_q8_0"]

_T = _capi.TensorP
_I64P = ctypes.POINTER(ctypes.c_int64)


class EmbeddingCaps(ctypes.Structure):
    _fields_ = [("vocab", ctypes.c_int64), ("dim", ctypes.c_int64), ("max_tokens", ctypes.c_int64),
                ("id_dtype", ctypes.c_int32), ("out_dtype", ctypes.c_int32),
                ("device", ctypes.c_int32)]


_capi.declare("b12x_embedding_plan_create", [ctypes.POINTER(EmbeddingCaps),
                                             ctypes.POINTER(ctypes.c_void_p)])
_capi.declare("b12x_embedding_plan_destroy", [ctypes.c_void_p])
_capi.declare("b12x_embedding_scratch_bytes", [ctypes.c_void_p, _I64P])
_capi.declare("b12x_embedding_bind", [ctypes.c_void_p, _T, _T, _T, _T])
_capi.declare("b12x_embedding_run", [ctypes.c_void_p, ctypes.c_void_p])
_capi.declare("b12x_embedding_status", [ctypes.c_void_p, ctypes.c_void_p, _I64P, _I64P, _I64P])
_capi.declare("b12x_embedding_check", [ctypes.c_void_p, ctypes.c_void_p])
_capi.declare("b12x_embedding_q8_0", [_T, _T, _T, ctypes.c_void_p])
_capi.declare("b12x_ref_embedding_q8_0", [_T, _T, _T, _I64P, _I64P, _I64P])

_DT = {"bf16": _capi.BF16, "bfloat16": _capi.BF16, "fp16": _capi.FP16, "float16": _capi.FP16,
       "int32": _capi.INT32, "int64": _capi.INT64}


def _code(name_or_code, what: str) -> int:
    if isinstance(name_or_code, int):
        return name_or_code
    s = str(name_or_code).replace("torch.", "")
    if s not in _DT:
        raise _capi.InvalidArgumentError(1, f"b12x.embedding: {what}={name_or_code!r} (supported: "
                                            f"{', '.join(sorted(_DT))})")
    return _DT[s]


def _dim_of(weight) -> Tuple[int, int]:
    if len(weight.shape) != 2:
        raise _capi.InvalidArgumentError(
            1, f"b12x.embedding: weight must be 2-D uint8 [vocab, dim/32*34], got shape "
               f"{tuple(weight.shape)}")
    vocab, row = int(weight.shape[0]), int(weight.shape[1])
    if row % 34 != 0:
        raise _capi.InvalidArgumentError(
            1, f"b12x.embedding: weight row of {row} bytes is not a whole number of 34-byte "
               f"Q8_0 blocks")
    return vocab, row // 34 * 32


def _is_cuda(x) -> bool:
    return _capi.is_torch_tensor(x) and x.is_cuda


def reference_embedding_q8_0(weight, ids, out) -> Tuple[int, int, int]:
    """CPU reference into ``out``; returns ``(bad_tokens, first_bad_token, first_bad_id)``."""
    bad, first, fid = ctypes.c_int64(0), ctypes.c_int64(-1), ctypes.c_int64(0)
    _capi.call("b12x_ref_embedding_q8_0", _capi.ref(weight, _capi.Q8_0, "weight"),
               _capi.ref(ids, name="ids"), _capi.ref(out, name="out"), ctypes.byref(bad),
               ctypes.byref(first), ctypes.byref(fid))
    return bad.value, first.value, fid.value


def embedding_q8_0_out(weight, ids, out) -> None:
    """One-shot lookup into ``out``; raises on out-of-range ids (after writing zero rows)."""
    if _is_cuda(weight):
        # The one-shot synchronises to read the out-of-range status: never inside a capture.
        _capi.refuse_if_capturing("b12x.embedding.embedding_q8_0")
        _gpu_embedding(weight, ids, out)
        return
    vocab, _ = _dim_of(weight)
    bad, first, fid = reference_embedding_q8_0(weight, ids, out)
    if bad:
        raise _capi.InvalidArgumentError(
            1, f"[invalid_argument] embedding_q8_0: ids[{first}]={fid} is out of range for "
               f"vocab={vocab} (valid ids: 0..{vocab - 1}; {bad} token(s) out of range, their "
               f"rows were written as zeros)")


def embedding_q8_0(weight, ids, *, out_dtype: str = "bf16"):
    """Functional one-shot: allocates ``out [T, dim]`` (bf16 by default, or fp16)."""
    _, dim = _dim_of(weight)
    code = _code(out_dtype, "out_dtype")
    if _capi.is_torch_tensor(weight):
        import torch
        dt = torch.bfloat16 if code == _capi.BF16 else torch.float16
        out = torch.empty((int(ids.shape[0]), dim), dtype=dt, device=weight.device)
    else:
        out = np.empty((int(ids.shape[0]), dim), dtype=np.uint16 if code == _capi.BF16
                       else np.float16)
    embedding_q8_0_out(weight, ids, out)
    return out


class Q8_0Embedding:
    """plan -> bind -> run wrapper over the C ABI (torch CUDA tensors)."""

    def __init__(self, weight, *, max_tokens: int, id_dtype="int32", out_dtype="bf16"):
        _capi.refuse_if_capturing("b12x.embedding.Q8_0Embedding")
        if not _is_cuda(weight):
            raise _capi.InvalidArgumentError(
                1, "b12x.embedding.Q8_0Embedding: weight must be a torch CUDA tensor (use "
                   "embedding_q8_0 for numpy)")
        vocab, dim = _dim_of(weight)
        self.weight, self.vocab, self.dim = weight, vocab, dim
        caps = EmbeddingCaps(vocab, dim, int(max_tokens), _code(id_dtype, "id_dtype"),
                             _code(out_dtype, "out_dtype"), int(weight.device.index or 0))
        self._plan = ctypes.c_void_p()
        _capi.call("b12x_embedding_plan_create", ctypes.byref(caps), ctypes.byref(self._plan))
        n = ctypes.c_int64()
        _capi.call("b12x_embedding_scratch_bytes", self._plan, ctypes.byref(n))
        import torch
        self.scratch = torch.zeros(n.value, dtype=torch.uint8, device=weight.device)
        self.ids = self.out = None

    def bind(self, ids, out) -> None:
        """Binds persistent ``ids [T]`` and ``out [T, dim]`` buffers (T <= max_tokens)."""
        _capi.call("b12x_embedding_bind", self._plan, _capi.ref(self.scratch, name="scratch"),
                   _capi.ref(self.weight, _capi.Q8_0, "weight"), _capi.ref(ids, name="ids"),
                   _capi.ref(out, name="out"))
        self.ids, self.out = ids, out

    def run(self, stream=None) -> None:
        _capi.call("b12x_embedding_run", self._plan, _capi.stream_of(self.weight, stream))

    def status(self, stream=None) -> Tuple[int, int, int]:
        bad, first, fid = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        _capi.call("b12x_embedding_status", self._plan, _capi.stream_of(self.weight, stream),
                   ctypes.byref(bad), ctypes.byref(first), ctypes.byref(fid))
        return bad.value, first.value, fid.value

    def check(self, stream=None) -> None:
        _capi.call("b12x_embedding_check", self._plan, _capi.stream_of(self.weight, stream))

    def __del__(self):
        plan = getattr(self, "_plan", None)
        if plan is not None and plan.value:
            try:
                _capi.lib().b12x_embedding_plan_destroy(plan)
            except Exception:  # pragma: no cover - interpreter shutdown
                pass
            self._plan = None


def _gpu_embedding(weight, ids, out):
    _capi.call("b12x_embedding_q8_0", _capi.ref(weight, _capi.Q8_0, "weight"),
               _capi.ref(ids, name="ids"), _capi.ref(out, name="out"), _capi.stream_of(out))


def _register() -> None:
    if not _torch_ops.torch_available():
        return

    def _fake(weight, ids, out):
        return None

    _torch_ops.register_op("embedding_q8_0", "(Tensor weight, Tensor ids, Tensor(a!) out) -> ()",
                           _gpu_embedding, _fake)


_register()
