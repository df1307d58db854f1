"""b12x: ahead-of-time compiled kernels for quantized LLM inference (FP8/FP4/GGML linear,
fused tensor-parallel MoE, paged GQA attention) on Blackwell SM120/SM121, also running on
SM89/SM90. This package binds the library's C ABI; it needs numpy, and torch only for the
torch-facing helpers.
"""

from __future__ import annotations

from . import _capi
from ._capi import (B12xError, CaptureActiveError, InvalidArgumentError,  # noqa: F401
                    KernelResolutionFrozenError, UnsupportedError)


def warmup(layers, token_counts, stream=None) -> dict:
    """Plan every (layer, token count), launch each new kernel signature once (see
    ``b12x._warmup``; imported on first use so builds without the integration area still load)."""
    from . import _warmup
    return _warmup.warmup(layers, token_counts, stream)


def resolved_kernels() -> list:
    """Every kernel signature resolved by a plan in this process."""
    from . import _warmup
    return _warmup.resolved_kernels()


def clear_resolved_kernels() -> None:
    from . import _warmup
    _warmup.clear_resolved_kernels()

__all__ = ["version", "compiled_archs", "device_count", "freeze_kernel_resolution",
           "unfreeze_kernel_resolution", "kernel_resolution_frozen", "warmup",
           "resolved_kernels", "clear_resolved_kernels", "B12xError"]


def version() -> str:
    return _capi.lib().b12x_version().decode()


def __getattr__(name):
    if name == "__version__":
        return version()
    if name == "formats":  # `import b12x; b12x.formats.dequantize_ggml(...)` (lazy submodule)
        import importlib
        return importlib.import_module(".formats", __name__)
    raise AttributeError(name)


def compiled_archs() -> list:
    return [a for a in _capi.lib().b12x_compiled_archs().decode().split(";") if a]


def device_count() -> int:
    return int(_capi.lib().b12x_device_count())


def freeze_kernel_resolution(reason: str = "") -> None:
    _capi.call("b12x_freeze_kernel_resolution", reason.encode())


def unfreeze_kernel_resolution() -> None:
    _capi.call("b12x_unfreeze_kernel_resolution")


def kernel_resolution_frozen() -> bool:
    return bool(_capi.lib().b12x_kernel_resolution_frozen())


# Aliases used by the original package.
freeze_compilation = freeze_kernel_resolution
unfreeze_compilation = unfreeze_kernel_resolution
