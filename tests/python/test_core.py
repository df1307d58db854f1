import ctypes

import numpy as np
import pytest

import b12x
from b12x import _capi


def test_version_and_archs():
    assert b12x.version() == "0.1.0"
    archs = b12x.compiled_archs()
    assert archs and all(a in ("89", "90a", "120a", "121a") for a in archs)
    assert b12x.device_count() >= 0


def test_descriptor_from_numpy_and_block_view():
    x = np.zeros((3, 4), dtype=np.float32)
    t = _capi.as_tensor(x)
    assert (t.dtype, t.ndim, t.shape[0], t.shape[1], t.strides[0], t.device) == (
        _capi.FP32, 2, 3, 4, 4, _capi.HOST)
    rows = np.zeros((2, 3 * 34), dtype=np.uint8)
    q = _capi.as_tensor(rows, _capi.Q8_0)
    assert (q.shape[1], q.strides[0]) == (96, 96)
    fp4 = _capi.as_tensor(np.zeros((5, 8), dtype=np.uint8), _capi.FP4_E2M1)
    assert (fp4.shape[1], fp4.strides[0]) == (16, 16)
    with pytest.raises(b12x.InvalidArgumentError, match="whole number of q8_0 blocks"):
        _capi.as_tensor(np.zeros((2, 35), dtype=np.uint8), _capi.Q8_0)


def test_freeze_flag():
    assert not b12x.kernel_resolution_frozen()
    b12x.freeze_kernel_resolution("test")
    try:
        assert b12x.kernel_resolution_frozen()
    finally:
        b12x.unfreeze_kernel_resolution()
    assert not b12x.kernel_resolution_frozen()


def test_error_message_and_code():
    status = _capi.lib().b12x_device_query(-5, None, None, None, None, 0)
    if b12x.device_count() == 0:
        assert status == 4  # no device
    else:
        assert status == 1
    msg = _capi.lib().b12x_last_error().decode()
    assert msg
