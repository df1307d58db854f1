"""Scale-grid layout helpers (vLLM calls ``b12x._lib.intrinsics.swizzle_block_scale``).

``swizzle_block_scale(scale)`` takes a 2-D ``[rows, cols]`` or 3-D ``[batch, rows, cols]`` grid of
any 1-byte dtype (uint8, int8, torch float8_e4m3fn / float8_e8m0fnu views, ml_dtypes float8
arrays) and returns the same dtype with shape ``[..., pad128(rows), pad4(cols)]`` holding the
128x4 tensor-core layout (formats.md §B.2, b12x-contract §2.5): within each 512-byte atom
(128 rows x 4 columns) byte ``(r%32)*16 + ((r%128)/32)*4 + (c%4)``, atoms advancing along the
columns first. Padding is zero (vLLM's contract; E4M3 zero / E8M0 2^-127); ``pad=127`` gives the
MX padding b12x's MXFP8 packer uses.

numpy arrays go through the library's C ABI; torch tensors (CPU or CUDA) are handled with torch
ops on their own device (no C call, no host round trip).
"""

from __future__ import annotations

import numpy as np

__all__ = ["swizzle_block_scale", "unswizzle_block_scale"]


def _pad_to(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _is_torch(x) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch optional
        return False
    return isinstance(x, torch.Tensor)


def _check_shape(ndim: int, itemsize: int, what: str) -> None:
    if ndim not in (2, 3):
        raise ValueError(f"swizzle_block_scale: {what} must be 2-D [rows, cols] or 3-D "
                         f"[batch, rows, cols], got {ndim} dims")
    if itemsize != 1:
        raise ValueError(f"swizzle_block_scale: {what} must have a 1-byte dtype, got itemsize "
                         f"{itemsize}")


def _torch_swizzle(scale, pad: int):
    import torch
    _check_shape(scale.dim(), scale.element_size(), "scale")
    squeeze = scale.dim() == 2
    u = scale.contiguous().view(torch.uint8)
    if squeeze:
        u = u.unsqueeze(0)
    b, rows, cols = u.shape
    pr, pc = _pad_to(rows, 128), _pad_to(cols, 4)
    out = torch.full((b, pr, pc), pad, dtype=torch.uint8, device=u.device)
    out[:, :rows, :cols] = u
    # [b, R/128, 4, 32, C/4, 4] -> [b, R/128, C/4, 32, 4, 4]
    out = out.reshape(b, pr // 128, 4, 32, pc // 4, 4).permute(0, 1, 4, 3, 2, 5).contiguous()
    out = out.reshape(b, pr, pc)
    if squeeze:
        out = out.squeeze(0)
    return out.view(scale.dtype)


def _torch_unswizzle(scale, rows: int, cols: int):
    import torch
    _check_shape(scale.dim(), scale.element_size(), "scale")
    squeeze = scale.dim() == 2
    u = scale.contiguous().view(torch.uint8)
    if squeeze:
        u = u.unsqueeze(0)
    b, pr, pc = u.shape
    if pr != _pad_to(rows, 128) or pc != _pad_to(cols, 4):
        raise ValueError(f"unswizzle_block_scale: shape {tuple(scale.shape)} does not match "
                         f"rows={rows}, cols={cols} (expected [.., {_pad_to(rows, 128)}, "
                         f"{_pad_to(cols, 4)}])")
    out = u.reshape(b, pr // 128, pc // 4, 32, 4, 4).permute(0, 1, 4, 3, 2, 5).reshape(b, pr, pc)
    out = out[:, :rows, :cols].contiguous()
    if squeeze:
        out = out.squeeze(0)
    return out.view(scale.dtype)


def swizzle_block_scale(scale, pad: int = 0):
    """Swizzle a 2-D/3-D 1-byte scale grid into the 128x4 layout (see the module doc)."""
    if not 0 <= int(pad) <= 255:
        raise ValueError(f"swizzle_block_scale: pad={pad} is not a byte")
    if _is_torch(scale):
        return _torch_swizzle(scale, int(pad))
    import ctypes
    from .. import _capi, formats  # noqa: F401  (formats declares the C functions)
    a = np.asarray(scale)
    _check_shape(a.ndim, a.dtype.itemsize, "scale")
    src = np.ascontiguousarray(a).view(np.uint8)
    rows, cols = src.shape[-2], src.shape[-1]
    out = np.empty(src.shape[:-2] + (_pad_to(rows, 128), _pad_to(cols, 4)), dtype=np.uint8)
    _capi.call("b12x_swizzle_block_scale", _capi.ref(src, name="scale"),
               _capi.ref(out, name="out"), ctypes.c_int32(int(pad)))
    return out.view(a.dtype)


def unswizzle_block_scale(scale, rows: int, cols: int):
    """Inverse of swizzle_block_scale: ``[..., pad128(rows), pad4(cols)]`` -> ``[..., rows,
    cols]`` (padding dropped)."""
    if _is_torch(scale):
        return _torch_unswizzle(scale, int(rows), int(cols))
    from .. import _capi, formats  # noqa: F401
    a = np.asarray(scale)
    _check_shape(a.ndim, a.dtype.itemsize, "scale")
    src = np.ascontiguousarray(a).view(np.uint8)
    out = np.empty(src.shape[:-2] + (int(rows), int(cols)), dtype=np.uint8)
    _capi.call("b12x_unswizzle_block_scale", _capi.ref(src, name="scale"),
               _capi.ref(out, name="out"))
    return out.view(a.dtype)
