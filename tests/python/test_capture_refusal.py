"""Planning while torch's current CUDA stream captures a graph is refused with a clear error.

Runs without a GPU: a stand-in torch module reports an active capture, so the check that
serving engines rely on (their captures use non-blocking streams the C++ plans cannot see) is
exercised in CI too. The GPU tests capture for real."""

import types

import numpy as np
import pytest

from b12x import _capi, embedding
from b12x.moe import fused_moe


def _fake_torch(capturing: bool):
    cuda = types.SimpleNamespace(is_available=lambda: True,
                                 is_current_stream_capturing=lambda: capturing)
    return types.SimpleNamespace(cuda=cuda)


@pytest.fixture
def capturing(monkeypatch):
    monkeypatch.setattr(_capi, "_torch", lambda: _fake_torch(True))


def test_refuse_if_capturing_names_the_op(capturing):
    with pytest.raises(_capi.CaptureActiveError, match="some.op: planning is refused while a "
                                                       "CUDA graph is being captured"):
        _capi.refuse_if_capturing("some.op")


def test_no_refusal_without_capture(monkeypatch):
    monkeypatch.setattr(_capi, "_torch", lambda: _fake_torch(False))
    _capi.refuse_if_capturing("some.op")
    monkeypatch.setattr(_capi, "_torch", lambda: None)  # no torch at all
    _capi.refuse_if_capturing("some.op")


def test_moe_plan_refused_during_capture(monkeypatch):
    wp = fused_moe.plan_weights(quant_modes="nvfp4", source_format="modelopt_nvfp4",
                                activation="silu", params_dtype="bfloat16", hidden_size=256,
                                intermediate_size=128, num_experts=8)
    caps = fused_moe.Caps(max_tokens=4, num_topk=8, device=0, weight_plan=wp, quant_mode="nvfp4")
    monkeypatch.setattr(_capi, "_torch", lambda: _fake_torch(True))
    with pytest.raises(_capi.CaptureActiveError, match="b12x.moe.fused_moe.plan"):
        fused_moe.plan(caps)


def test_embedding_plan_refused_during_capture(capturing):
    weight = np.zeros((4, 34), dtype=np.uint8)
    with pytest.raises(_capi.CaptureActiveError, match="b12x.embedding.Q8_0Embedding"):
        embedding.Q8_0Embedding(weight, max_tokens=8)
