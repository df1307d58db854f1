"""Q8_0 embedding from Python: the numpy (CPU reference) path against ``b12x.formats``' GGML
decoder rounded to bf16/fp16, out-of-range ids (error naming the id and the vocab, zero rows),
validation, and (with torch + CUDA) the GPU one-shot, plan/bind/run, status and graph replay."""

import numpy as np
import pytest

import b12x
from b12x import embedding as E
from b12x import formats


def make_table(vocab, dim):
    x = (np.random.randn(vocab, dim) * np.exp2(np.random.uniform(-6, 2, (vocab, 1)))).astype(
        np.float32)
    return formats.quantize_ggml("q8_0", x)  # uint8 [vocab, dim/32*34]


def expected(table, ids, out_dtype="bf16"):
    rows = formats.dequantize_ggml("q8_0", table[ids])  # float32 [T, dim] (exact products)
    return formats.encode_scalar(out_dtype, rows)


@pytest.mark.parametrize("vocab,dim,T", [(10, 32, 1), (1000, 256, 37), (50, 2080, 5)])
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_reference_matches_formats(vocab, dim, T, id_dtype):
    table = make_table(vocab, dim)
    ids = np.random.randint(0, vocab, T).astype(id_dtype)
    out = E.embedding_q8_0(table, ids)
    assert out.shape == (T, dim) and out.dtype == np.uint16
    np.testing.assert_array_equal(out, expected(table, ids))
    out16 = E.embedding_q8_0(table, ids, out_dtype="fp16")
    np.testing.assert_array_equal(out16.view(np.uint16), expected(table, ids, "fp16"))


def test_out_of_range_ids_raise_and_zero():
    table = make_table(100, 64)
    ids = np.array([5, 100, -1, 7], np.int64)
    out = np.full((4, 64), 0xFFFF, np.uint16)
    with pytest.raises(b12x.InvalidArgumentError, match=r"ids\[1\]=100 is out of range for "
                                                         r"vocab=100"):
        E.embedding_q8_0_out(table, ids, out)
    assert (out[1] == 0).all() and (out[2] == 0).all()
    np.testing.assert_array_equal(out[[0, 3]], expected(table, ids[[0, 3]]))
    bad, first, fid = E.reference_embedding_q8_0(table, ids, out)
    assert (bad, first, fid) == (2, 1, 100)


def test_validation():
    table = make_table(10, 64)
    with pytest.raises(b12x.InvalidArgumentError, match="34-byte"):
        E.embedding_q8_0(table[:, :40], np.zeros(2, np.int32))
    with pytest.raises(b12x.InvalidArgumentError, match="out_dtype"):
        E.embedding_q8_0(table, np.zeros(2, np.int32), out_dtype="fp32")
    with pytest.raises(b12x.InvalidArgumentError, match="ids"):
        E.embedding_q8_0(table, np.zeros(2, np.float32))


# ---- GPU ---------------------------------------------------------------------------------------
def test_gpu_one_shot_and_errors(cuda_torch):
    torch = cuda_torch
    table = make_table(3000, 1024)
    ids = np.random.randint(0, 3000, 100).astype(np.int64)
    out = E.embedding_q8_0(torch.from_numpy(table).cuda(), torch.from_numpy(ids).cuda())
    np.testing.assert_array_equal(out.view(torch.int16).cpu().numpy().view(np.uint16),
                                  expected(table, ids))
    ids[10] = 3000
    with pytest.raises(b12x.InvalidArgumentError, match=r"ids\[10\]=3000.*vocab=3000"):
        E.embedding_q8_0(torch.from_numpy(table).cuda(), torch.from_numpy(ids).cuda())


def test_gpu_plan_bind_run_graph(cuda_torch):
    torch = cuda_torch
    vocab, dim, T = 5000, 2048, 16
    table = make_table(vocab, dim)
    w = torch.from_numpy(table).cuda()
    emb = E.Q8_0Embedding(w, max_tokens=T, id_dtype="int32", out_dtype="bf16")
    ids = torch.zeros(T, dtype=torch.int32, device="cuda")
    out = torch.empty((T, dim), dtype=torch.bfloat16, device="cuda")
    emb.bind(ids, out)
    emb.run()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        emb.run()
    for rep in range(3):
        h = np.random.randint(0, vocab, T).astype(np.int32)
        if rep == 1:
            h[4] = -3
        ids.copy_(torch.from_numpy(h))
        g.replay()
        bad, first, fid = emb.status()
        if rep == 1:
            assert (bad, first, fid) == (1, 4, -3)
            with pytest.raises(b12x.InvalidArgumentError, match="vocab=5000"):
                emb.check()
            h[4] = 0  # compare the zero row separately
            got = out.view(torch.int16).cpu().numpy().view(np.uint16)
            assert (got[4] == 0).all()
            got[4] = expected(table, h[4:5])[0]
        else:
            assert bad == 0
            emb.check()
            got = out.view(torch.int16).cpu().numpy().view(np.uint16)
        np.testing.assert_array_equal(got, expected(table, h))


def test_gpu_custom_op(cuda_torch):
    torch = cuda_torch
    table = make_table(300, 512)
    ids = np.random.randint(0, 300, 9).astype(np.int32)
    out = torch.empty((9, 512), dtype=torch.float16, device="cuda")
    torch.ops.b12x.embedding_q8_0(torch.from_numpy(table).cuda(), torch.from_numpy(ids).cuda(),
                                  out)
    np.testing.assert_array_equal(out.cpu().numpy().view(np.uint16),
                                  expected(table, ids, "fp16"))
