"""Registers b12x ops as PyTorch custom ops (``torch.library``) with fake implementations.

Nothing here is imported unless torch is present. Ops use out-variant schemas
(``Tensor(a!) out``) so the functional wrappers allocate outside the op and nothing allocates
inside; the fake implementation only checks metadata, which lets ``torch.compile`` and Dynamo
trace around the op without calling into C.
"""

from __future__ import annotations

from typing import Callable, Optional

_LIB = None
_REGISTERED = set()


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def library():
    global _LIB
    if _LIB is None:
        import torch
        _LIB = torch.library.Library("b12x", "FRAGMENT")
    return _LIB


def register_op(name: str, schema: str, impl: Callable, fake: Optional[Callable] = None,
                dispatch_key: str = "CUDA") -> None:
    """Define ``b12x::<name>`` with ``schema`` ("(Tensor x, Tensor(a!) out) -> ()"), its
    implementation for ``dispatch_key`` and a fake (meta) implementation. Idempotent."""
    if name in _REGISTERED or not torch_available():
        return
    import torch
    lib = library()
    lib.define(name + schema)
    lib.impl(name, impl, dispatch_key)
    if fake is not None:
        torch.library.register_fake("b12x::" + name, fake, lib=lib)
    _REGISTERED.add(name)


def op(name: str):
    """The registered op ``torch.ops.b12x.<name>``."""
    import torch
    return getattr(torch.ops.b12x, name)
