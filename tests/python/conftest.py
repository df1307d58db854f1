"""pytest setup: import b12x from python/ and load the library built into build/ unless
B12X_LIBRARY points elsewhere. Tests needing torch or a GPU skip with a message without them."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "B12X_LIBRARY" not in os.environ:
    candidate = os.path.join(ROOT, "build", "libb12x.so")
    if os.path.exists(candidate):
        os.environ["B12X_LIBRARY"] = candidate


def _has_cuda_torch():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


@pytest.fixture
def cuda_torch():
    """The torch module, when torch with a CUDA device is available; otherwise skip."""
    if not _has_cuda_torch():
        pytest.skip("needs torch with a CUDA device")
    import torch
    return torch


@pytest.fixture(autouse=True)
def _seed():
    import numpy as np
    np.random.seed(None)
    yield
