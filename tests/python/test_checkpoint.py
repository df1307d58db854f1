"""b12x.checkpoint: safetensors views, malformed files, quant configs, quantize round trip.

numpy only; the decoders below are independent numpy oracles of the stored formats."""

import json
import os
import struct

import numpy as np
import pytest

from b12x import B12xError
from b12x import checkpoint as ck


def bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def image(header: str, data: bytes = b"", length=None) -> bytes:
    h = header.encode()
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def test_write_read_views(tmp_path):
    rng = np.random.default_rng()
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = bf16_bits(rng.standard_normal(7))
    q = rng.integers(0, 255, (4, 6), dtype=np.uint8)
    path = tmp_path / "m.safetensors"
    ck.save_safetensors(path, {"a": a, "b": ("BF16", b), "q": ("F8_E4M3", q),
                               "f4": ("F4", q[:, :2]), "e": np.zeros((0, 3), np.int64)},
                        {"format": "pt"})
    f = ck.open_safetensors(path)
    assert set(f.keys()) == {"a", "b", "q", "f4", "e"}
    assert f.metadata == {"format": "pt"}
    np.testing.assert_array_equal(f["a"], a)
    np.testing.assert_array_equal(f["b"], b)
    assert f.info("b").st_dtype == "BF16" and f.info("b").dtype == 0
    assert f.info("q").st_dtype == "F8_E4M3"
    assert f.info("f4").shape == (4, 4)  # values, stored two per byte
    np.testing.assert_array_equal(f["f4"], q[:, :2])
    assert f["e"].shape == (0, 3)
    view = f["a"]
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0, 0] = 1.0
    # zero-copy: the view points into the mapping, and keeps it alive
    del f
    import gc
    gc.collect()
    np.testing.assert_array_equal(view, a)
    with pytest.raises(KeyError):
        ck.open_safetensors(path)["missing"]


@pytest.mark.parametrize("header,data,length,fragment", [
    ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', b"\0" * 4, None,
     "run past the data section"),
    ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', b"\0" * 8, 1 << 40,
     "exceeds the limit"),
    ('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', b"\0" * 8, None, "malformed JSON"),
    ('{"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}', b"\0" * 8, None, "unknown dtype"),
    ('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', b"\0" * 8, None, "needs 12 bytes"),
    ('{"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},'
     '"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}', b"\0" * 8, None, "overlaps"),
    ('{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,8]}}', b"\0" * 8, None, "non-negative"),
    ('{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
     '"w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}', b"\0" * 8, None, "duplicate key"),
])
def test_malformed_images(tmp_path, header, data, length, fragment):
    img = image(header, data, length)
    with pytest.raises(B12xError) as e:
        ck.parse_safetensors(img)
    assert e.value.status == 10 and fragment in str(e.value)
    p = tmp_path / "bad.safetensors"
    p.write_bytes(img)
    with pytest.raises(B12xError) as e:
        ck.open_safetensors(p)
    assert "bad.safetensors" in str(e.value) and fragment in str(e.value)


def test_random_mutations_never_crash():
    rng = np.random.default_rng(1)
    base = image('{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2,2],'
                 '"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[4],'
                 '"data_offsets":[16,24]}}', bytes(range(24)))
    ck.parse_safetensors(base)
    accepted = 0
    for _ in range(400):
        m = bytearray(base)
        for _ in range(int(rng.integers(1, 4))):
            op = rng.integers(0, 3)
            pos = int(rng.integers(0, len(m)))
            if op == 0:
                m[pos] = int(rng.integers(0, 256))
            elif op == 1 and len(m) > 1:
                del m[pos]
            else:
                m.insert(pos, int(rng.integers(0, 256)))
        try:
            ck.parse_safetensors(bytes(m))
            accepted += 1
        except B12xError as e:
            assert e.status in (1, 10), str(e)
    assert accepted < 400


def test_quant_config_and_resolution(tmp_path):
    cfg = {"quantization_config": {
        "quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
        "quantized_layers": {
            "model.layers.0.self_attn.q_proj": {"quant_algo": "NVFP4", "group_size": 16},
            "model.layers.0.self_attn.k_proj": {"quant_algo": "NVFP4", "group_size": 16},
            "model.layers.0.self_attn.v_proj": {"quant_algo": "NVFP4", "group_size": 16},
            "model.layers.0.mlp.down_proj": {"quant_algo": "IQ2_XXS", "group_size": 256,
                                             "block_payload_bytes": 66, "packing": "ggml"},
            "model.layers.1.mlp.experts.0.gate_proj": {"quant_algo": "MXFP8"}}}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    c = ck.load_quant_config(tmp_path)
    assert c["method"] == "modelopt_mixed"
    assert c["quantized_layers"]["model.layers.0.mlp.down_proj"]["block_payload_bytes"] == 66
    r = ck.resolve_layer("model.layers.0.self_attn.qkv_proj", tmp_path)
    assert r["quant_algo"] == "NVFP4" and r["group_size"] == 16
    assert ck.resolve_layer("model.layers.1.mlp.experts", tmp_path, is_moe=True)["quant_algo"] \
        == "MXFP8"
    assert ck.resolve_layer("lm_head", tmp_path)["quant_algo"] == "NONE"
    txt = json.dumps({"quantization_config": {"quant_method": "fp8",
                                              "weight_block_size": [128, 128]}})
    assert ck.load_quant_config(json_text=txt)["method"] == "fp8_block"
    with pytest.raises(B12xError, match="NVFP5"):
        ck.load_quant_config(json_text='{"quantization_config": {"quant_method": "modelopt",'
                                       ' "quant_algo": "NVFP5"}}')
    with pytest.raises(B12xError, match="norm"):
        ck.load_quant_config(json_text=json.dumps({"quantization_config": {
            "quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
            "quantized_layers": {"model.norm": {"quant_algo": "FP8"}}}}))


def make_tiny(d, rng):
    d.mkdir(parents=True, exist_ok=True)
    shapes = {"model.embed_tokens.weight": (32, 256), "model.norm.weight": (256,),
              "model.layers.0.self_attn.o_proj.weight": (128, 256),
              "model.layers.0.mlp.down_proj.weight": (256, 512)}
    src = {}
    for name, shape in shapes.items():
        x = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        src[name] = bf16_bits(x)
    ck.save_safetensors(d / "model.safetensors", {k: ("BF16", v) for k, v in src.items()})
    (d / "config.json").write_text(json.dumps({"hidden_size": 256, "num_attention_heads": 4,
                                               "num_key_value_heads": 4,
                                               "torch_dtype": "bfloat16"}))
    return {k: bf16_to_f32(v) for k, v in src.items()}


E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def e4m3_decode(b):
    b = b.astype(np.int32)
    s = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    return (s * v).astype(np.float32)


def test_quantize_q8_0_and_nvfp4_round_trip(tmp_path):
    rng = np.random.default_rng(5)
    src = make_tiny(tmp_path / "in", rng)
    name = "model.layers.0.mlp.down_proj"
    x = src[name + ".weight"]

    rep = ck.quantize(tmp_path / "in", tmp_path / "q8", "q8_0")
    assert {l["name"] for l in rep["layers"]} == {name, "model.layers.0.self_attn.o_proj"}
    for l in rep["layers"]:
        assert 0 < l["rel_rms_error"] <= l["bound"]
    f = ck.open_safetensors(tmp_path / "q8" / "model.safetensors")
    blocks = np.asarray(f[name + ".weight"])
    assert blocks.shape == (256, 512 // 32, 34) and blocks.dtype == np.uint8
    d = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    q = blocks[..., 2:].copy().view(np.int8).astype(np.float32)
    ref = (d * q).reshape(256, 512)
    got = ck.dequantize_linear(tmp_path / "q8", name)
    np.testing.assert_array_equal(got, ref)
    assert np.sqrt(((got - x) ** 2).sum() / (x ** 2).sum()) < 0.012
    ins = ck.inspect(tmp_path / "q8", compute_capability=121)
    layer = {l["name"]: l for l in ins["layers"]}[name]
    assert layer["format"] == "Q8_0" and layer["selection"]["path"] == "gemm.q8_0"
    assert layer["selection"]["arch"] == "native"
    assert ins["errors"] == 0

    rep = ck.quantize(tmp_path / "in", tmp_path / "nv", "nvfp4", layers=["down_proj$"],
                      input_amax=10.0)
    assert [l["name"] for l in rep["layers"]] == [name]
    f = ck.open_safetensors(tmp_path / "nv" / "model.safetensors")
    packed = np.asarray(f[name + ".weight"])
    sf = e4m3_decode(np.asarray(f[name + ".weight_scale"]))
    gs2 = float(np.asarray(f[name + ".weight_scale_2"]))
    assert abs(float(np.asarray(f[name + ".input_scale"])) - 10.0 / 2688) < 1e-9
    codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(256, 512)
    ref = (E2M1[codes] * np.repeat(sf, 16, axis=1)).astype(np.float32) / np.float32(1 / gs2)
    got = ck.dequantize_linear(tmp_path / "nv", name)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)
    assert np.sqrt(((got - x) ** 2).sum() / (x ** 2).sum()) < 0.13
    ins = ck.inspect(tmp_path / "nv", compute_capability=90)
    layer = {l["name"]: l for l in ins["layers"]}[name]
    assert layer["selection"]["path"] == "gemm.nvfp4_w4a4"
    assert layer["selection"]["arch"] == "portable"
    o = {l["name"]: l for l in ins["layers"]}["model.layers.0.self_attn.o_proj"]
    assert o["format"] == "BF16" and not o["selection"]["supported"]

    layer = ck.load_linear(tmp_path / "nv", name, compute_capability=120)
    assert layer.quant["quant_algo"] == "NVFP4" and (layer.n, layer.k) == (256, 512)
    np.testing.assert_array_equal(layer.tensors["weight"], packed)
    assert set(layer.tensors) == {"weight", "weight_scale", "weight_scale_2", "input_scale"}
    assert abs(layer.output_scale - layer.input_scale * layer.weight_scale_2) < 1e-12
    assert layer.selection["path"] == "gemm.nvfp4_w4a4"

    with pytest.raises(B12xError, match="input-amax"):
        ck.quantize(tmp_path / "in", tmp_path / "fp8", "fp8")
    with pytest.raises(B12xError, match="format"):
        ck.quantize(tmp_path / "in", tmp_path / "x", "int3")
