"""Loads libb12x and declares its C ABI (b12x/c_api.h) with ctypes.

No compile-time dependency on Python or PyTorch: the shared library exports plain C functions,
and tensors cross as ``b12x_tensor`` descriptors (pointer, dtype, shape, strides, device).
numpy arrays are always accepted; torch tensors are accepted when torch is importable.

The library is found, in order, at ``$B12X_LIBRARY``, next to this package
(``b12x/libb12x.so``), or in a build directory of the source tree (``build*/libb12x.so``).
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any, Optional, Sequence

import numpy as np

MAX_DIMS = 6
HOST = -1

# Values of b12x::DType (include/b12x/c_api/core.h).
BF16, FP16, FP32, INT32, INT64, UINT8 = 0, 1, 2, 3, 4, 5
FP8_E4M3, FP8_E5M2, FP4_E2M1, UE8M0, UE4M3 = 6, 7, 8, 9, 10
Q8_0, IQ2_XXS, IQ2_XS, FP64, INT8 = 11, 12, 13, 14, 15

DTYPE_NAMES = {
    BF16: "bf16", FP16: "fp16", FP32: "fp32", INT32: "int32", INT64: "int64", UINT8: "uint8",
    FP8_E4M3: "fp8_e4m3", FP8_E5M2: "fp8_e5m2", FP4_E2M1: "fp4_e2m1", UE8M0: "ue8m0",
    UE4M3: "ue4m3", Q8_0: "q8_0", IQ2_XXS: "iq2_xxs", IQ2_XS: "iq2_xs", FP64: "fp64", INT8: "int8",
}
DTYPE_CODES = {v: k for k, v in DTYPE_NAMES.items()}
# (values per block, bytes per block) for packed/blocked types.
BLOCKS = {FP4_E2M1: (2, 1), Q8_0: (32, 34), IQ2_XXS: (256, 66), IQ2_XS: (256, 74)}


class B12xError(RuntimeError):
    """Raised for any failing b12x call; ``status`` holds the C status code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class InvalidArgumentError(B12xError, ValueError):
    pass


class UnsupportedError(B12xError, NotImplementedError):
    pass


class CaptureActiveError(B12xError):
    pass


class KernelResolutionFrozenError(B12xError):
    pass


_ERROR_CLASSES = {1: InvalidArgumentError, 2: UnsupportedError, 6: CaptureActiveError,
                  7: KernelResolutionFrozenError}


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("device", ctypes.c_int32),
    ]


TensorP = ctypes.POINTER(Tensor)


def _candidates():
    env = os.environ.get("B12X_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libb12x.so")
    root = os.path.dirname(os.path.dirname(here))
    for pattern in ("build/libb12x.so", "build*/libb12x.so"):
        yield from sorted(glob.glob(os.path.join(root, pattern)))


_lib: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The loaded shared library (loaded once, on first use)."""
    global _lib
    if _lib is None:
        errors = []
        for path in _candidates():
            if os.path.exists(path):
                try:
                    _lib = ctypes.CDLL(path)
                    break
                except OSError as e:  # pragma: no cover - depends on the machine
                    errors.append(f"{path}: {e}")
        if _lib is None:
            raise ImportError(
                "b12x: could not load libb12x.so (set B12X_LIBRARY, or build the library with "
                "CMake into build/)" + ("; tried: " + "; ".join(errors) if errors else ""))
        _declare(_lib)
    return _lib


_DECLARATIONS: list = []


def declare(name: str, argtypes: Sequence[Any], restype: Any = ctypes.c_int32) -> None:
    """Register a C function signature; applied when the library loads (or now if loaded)."""
    _DECLARATIONS.append((name, list(argtypes), restype))
    if _lib is not None:
        _apply(_lib, name, list(argtypes), restype)


def _apply(handle, name, argtypes, restype):
    fn = getattr(handle, name)
    fn.argtypes = argtypes
    fn.restype = restype


def _declare(handle):
    for name, argtypes, restype in _DECLARATIONS:
        _apply(handle, name, argtypes, restype)


declare("b12x_last_error", [], ctypes.c_char_p)
declare("b12x_status_name", [ctypes.c_int32], ctypes.c_char_p)
declare("b12x_version", [], ctypes.c_char_p)
declare("b12x_compiled_archs", [], ctypes.c_char_p)
declare("b12x_dtype_name", [ctypes.c_int32], ctypes.c_char_p)
declare("b12x_device_count", [], ctypes.c_int32)
declare("b12x_device_query", [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32),
                              ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
                              ctypes.c_char_p, ctypes.c_size_t])
declare("b12x_freeze_kernel_resolution", [ctypes.c_char_p])
declare("b12x_unfreeze_kernel_resolution", [])
declare("b12x_kernel_resolution_frozen", [], ctypes.c_int32)


def check(status: int) -> None:
    """Raise the matching B12xError subclass for a non-zero status."""
    if status != 0:
        msg = lib().b12x_last_error().decode("utf-8", "replace")
        name = lib().b12x_status_name(status).decode()
        raise _ERROR_CLASSES.get(status, B12xError)(status, f"[{name}] {msg}")


def call(name: str, *args) -> None:
    """Call a status-returning C function and raise on failure."""
    check(getattr(lib(), name)(*args))


#: Argument types of a string-returning C ABI function's tail (char* buf, size_t len, size_t* needed).
STR_OUT = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]


def string_call(name: str, *args) -> str:
    """Calls a (..., char* buf, size_t len, size_t* needed) function, growing the buffer."""
    needed = ctypes.c_size_t(0)
    size = 1 << 16
    while True:
        buf = ctypes.create_string_buffer(size)
        call(name, *args, buf, ctypes.c_size_t(size), ctypes.byref(needed))
        if needed.value <= size:
            return buf.value.decode("utf-8")
        size = needed.value


# ---- numpy / torch -> descriptor ------------------------------------------------------------
_NUMPY_DTYPES = {
    np.dtype(np.float16): FP16, np.dtype(np.float32): FP32, np.dtype(np.float64): FP64,
    np.dtype(np.int32): INT32, np.dtype(np.int64): INT64, np.dtype(np.uint8): UINT8,
    np.dtype(np.int8): INT8, np.dtype(np.uint16): BF16,  # numpy has no bf16: uint16 bit patterns
}


def _torch():
    try:
        import torch  # noqa: F401
        return torch
    except ImportError:  # pragma: no cover - torch optional
        return None


def _torch_dtype_code(t) -> int:
    torch = _torch()
    table = {torch.bfloat16: BF16, torch.float16: FP16, torch.float32: FP32,
             torch.float64: FP64, torch.int32: INT32, torch.int64: INT64, torch.uint8: UINT8,
             torch.int8: INT8}
    for name, code in (("float8_e4m3fn", FP8_E4M3), ("float8_e5m2", FP8_E5M2),
                       ("float8_e8m0fnu", UE8M0), ("float4_e2m1fn_x2", FP4_E2M1)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = code
    if t.dtype not in table:
        raise InvalidArgumentError(1, f"b12x: unsupported torch dtype {t.dtype}")
    return table[t.dtype]


def refuse_if_capturing(what: str) -> None:
    """Raise CaptureActiveError when torch's current CUDA stream is capturing a graph.

    Plans that take no stream (MoE, embedding) can only detect a capture on the legacy stream in
    C++; serving engines capture on their own (non-blocking) streams, so the Python layer checks
    torch's current stream before planning."""
    torch = _torch()
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise CaptureActiveError(6, f"{what}: planning is refused while a CUDA graph is being "
                                    "captured on the current stream; plan before capture")


def is_torch_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def as_tensor(x, dtype: Optional[int] = None, name: str = "tensor") -> Tensor:
    """Describe a numpy array or torch tensor.

    ``dtype`` reinterprets the storage: e.g. a uint8 ``[N, K/2]`` array with ``dtype=FP4_E2M1``
    becomes an fp4 ``[N, K]`` descriptor, a uint8 ``[N, K/32*34]`` array with ``dtype=Q8_0`` a
    q8_0 ``[N, K]`` descriptor. The storage element must be one byte for such reinterpretation.
    """
    if x is None:
        raise InvalidArgumentError(1, f"b12x: {name} is None")
    if is_torch_tensor(x):
        code = _torch_dtype_code(x)
        shape = list(x.shape)
        strides = list(x.stride())
        ptr = x.data_ptr()
        device = x.device.index if x.device.type == "cuda" else HOST
        if x.device.type == "cuda" and device is None:
            device = _torch().cuda.current_device()
        itemsize = x.element_size()
    else:
        if not isinstance(x, np.ndarray):
            raise InvalidArgumentError(1, f"b12x: {name} must be a numpy array or torch tensor, "
                                          f"got {type(x).__name__}")
        if x.dtype not in _NUMPY_DTYPES:
            raise InvalidArgumentError(1, f"b12x: {name} has unsupported numpy dtype {x.dtype}")
        code = _NUMPY_DTYPES[x.dtype]
        itemsize = x.itemsize
        shape = list(x.shape)
        strides = [s // itemsize for s in x.strides]
        if any(s * itemsize != bs for s, bs in zip(strides, x.strides)):
            raise InvalidArgumentError(1, f"b12x: {name} has strides {x.strides} that are not a "
                                          f"multiple of its item size {itemsize}")
        ptr = x.ctypes.data
        device = HOST
    if dtype is not None and dtype != code:
        if dtype in BLOCKS:
            if itemsize != 1:
                raise InvalidArgumentError(1, f"b12x: {name} must be a byte tensor to be viewed "
                                              f"as {DTYPE_NAMES[dtype]}")
            bv, bb = BLOCKS[dtype]
            if shape and shape[-1] % bb != 0:
                raise InvalidArgumentError(
                    1, f"b12x: {name} last dim {shape[-1]} bytes is not a whole number of "
                       f"{DTYPE_NAMES[dtype]} blocks ({bb} bytes)")
            if shape and strides[-1] != 1 and shape[-1] > 1:
                raise InvalidArgumentError(1, f"b12x: {name} must be contiguous in its last dim")
            strides = [s // bb * bv if i < len(shape) - 1 else 1 for i, s in enumerate(strides)]
            if shape:
                shape[-1] = shape[-1] // bb * bv
        else:
            nb = 1 if dtype in (UINT8, INT8, FP8_E4M3, FP8_E5M2, UE8M0, UE4M3) else None
            if nb is not None and itemsize != 1:
                raise InvalidArgumentError(1, f"b12x: {name} must be a byte tensor to be viewed "
                                              f"as {DTYPE_NAMES[dtype]}")
            if dtype == BF16 and itemsize != 2:
                raise InvalidArgumentError(1, f"b12x: {name} must be 2-byte to be viewed as bf16")
        code = dtype
    if len(shape) > MAX_DIMS:
        raise InvalidArgumentError(1, f"b12x: {name} has {len(shape)} dims (max {MAX_DIMS})")
    t = Tensor()
    t.data = ptr
    t.dtype = code
    t.ndim = len(shape)
    for i, (s, st) in enumerate(zip(shape, strides)):
        t.shape[i] = s
        t.strides[i] = st
    t.device = device
    return t


def ref(x, dtype: Optional[int] = None, name: str = "tensor"):
    """ctypes pointer to a descriptor of x (None stays None, for optional arguments)."""
    if x is None:
        return None
    return ctypes.pointer(as_tensor(x, dtype, name))


def stream_of(x=None, stream=None) -> ctypes.c_void_p:
    """The stream to launch on: explicit ``stream`` (int handle or torch stream), else torch's
    current stream on the tensor's device, else the legacy default stream."""
    if stream is not None:
        handle = getattr(stream, "cuda_stream", stream)
        return ctypes.c_void_p(int(handle))
    torch = _torch()
    if torch is not None and x is not None and is_torch_tensor(x) and x.is_cuda:
        return ctypes.c_void_p(torch.cuda.current_stream(x.device).cuda_stream)
    return ctypes.c_void_p(0)
