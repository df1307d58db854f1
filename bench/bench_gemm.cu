// Linear GEMM benchmark: every weight format on the (N, K) shapes of issue 3 and M in
// {1, 4, 16, 64, 256, 2048}, with cuBLAS BF16 and cuBLASLt FP8 (per-tensor) peers timed in the
// same process. CUDA-graph timing, weights rotated past L2, read-bandwidth ceiling measured here.
//
// Columns: us, effective GB/s (packed weight bytes + activations + output), % of the measured read
// bandwidth, TFLOP/s, speed-up vs cuBLAS BF16 and vs cuBLASLt FP8.
//   B12X_BENCH_FORMATS=nvfp4_w4a16,iq2_xs  restricts the formats; B12X_BENCH_QUICK=1 fewer shapes.
//   B12X_BENCH_FP8B_PREQUANT=1: fp8_block with caller-quantized activations (no quantizer pass).
//   B12X_BENCH_NO_PEERS=1: skip the cuBLAS / cuBLASLt peers (probe runs; x columns read 0).
//   B12X_BENCH_FLOOR=1: also time a read-only kernel over each shape's NVFP4 bytes (time_floor);
//   B12X_BENCH_FLOOR_SEG=<v>, B12X_BENCH_FLOOR_ORDER=1..4: in the M = 1 stream kernel's order;
//   B12X_BENCH_FLOOR_GRID=<CTAs>: that many CTAs instead of CTAs per SM x SMs (the kernel's grid).
//   B12X_BENCH_VARIANTS="A=1 B=2;A=0" (probes, session 21): each row planned and timed once per
//   variant (its plan-time env set around plan()), back to back on the same packed weights; rows
//   carry a [v<i>] tag.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "b12x/gemm.h"
#include "b12x/status.h"
#include "bench_common.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"

using namespace b12x;
using gemm::LinearFormat;

#define CUBLAS_CHECK(expr)                                                               \
  do {                                                                                   \
    cublasStatus_t s_ = (expr);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      std::fprintf(stderr, "%s:%d %s failed: %d\n", __FILE__, __LINE__, #expr, (int)s_); \
      std::exit(2);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

std::mt19937_64 g_rng(12345);

std::vector<uint8_t> rand_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  uint64_t x = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) x = g_rng();
    v[i] = static_cast<uint8_t>(x >> (8 * (i % 8)));
  }
  return v;
}
void fill_range(std::vector<uint8_t>& v, int lo, int hi) {
  for (auto& b : v) b = static_cast<uint8_t>(lo + b % (hi - lo + 1));
}
void no_nan_e4m3(std::vector<uint8_t>& v) {
  for (auto& b : v)
    if ((b & 0x7F) == 0x7F) b ^= 1;
}

struct DevMem {
  void* p = nullptr;
  explicit DevMem(size_t n) { BENCH_CUDA(cudaMalloc(&p, std::max<size_t>(n, 16))); }
  ~DevMem() { cudaFree(p); }
};

/// Checkpoint tensors (host) of a random weight.
struct Source {
  std::vector<uint8_t> w, s;
  std::vector<float> sf;
  float os = 0.01f;
  gemm::WeightSource src;
};

Source make_source(LinearFormat f, int64_t N, int64_t K) {
  Source s;
  s.src.format = f;
  switch (f) {
    case LinearFormat::kNvfp4:
    case LinearFormat::kNvfp4W4A16:
      s.w = rand_bytes(N * K / 2);
      s.s = rand_bytes(N * K / 16);
      fill_range(s.s, 0x20, 0x50);
      s.src.weight = TensorRef::contiguous(s.w.data(), DType::kUInt8, {N, K / 2});
      s.src.weight_scale = TensorRef::contiguous(s.s.data(), DType::kFP8E4M3, {N, K / 16});
      s.src.global_scale = 0.01f;
      break;
    case LinearFormat::kMxfp4:
    case LinearFormat::kMxfp4W4A8:
    case LinearFormat::kMxfp4W4A16:
      s.w = rand_bytes(N * K / 2);
      s.s = rand_bytes(N * K / 32);
      fill_range(s.s, 118, 126);
      s.src.weight = TensorRef::contiguous(s.w.data(), DType::kUInt8, {N, K / 2});
      s.src.weight_scale = TensorRef::contiguous(s.s.data(), DType::kUE8M0, {N, K / 32});
      break;
    case LinearFormat::kFp8Tensor:
    case LinearFormat::kMxfp8:
    case LinearFormat::kFp8Block:
      s.w = rand_bytes(N * K);
      no_nan_e4m3(s.w);
      s.src.weight = TensorRef::contiguous(s.w.data(), DType::kFP8E4M3, {N, K});
      if (f == LinearFormat::kMxfp8) {
        s.s = rand_bytes(N * K / 32);
        fill_range(s.s, 118, 126);
        s.src.weight_scale = TensorRef::contiguous(s.s.data(), DType::kUE8M0, {N, K / 32});
      } else if (f == LinearFormat::kFp8Block) {
        s.sf.assign(((N + 127) / 128) * (K / 128), 0.01f);
        s.src.weight_scale =
            TensorRef::contiguous(s.sf.data(), DType::kFP32, {(N + 127) / 128, K / 128});
      } else {
        s.src.output_scale = TensorRef::contiguous(&s.os, DType::kFP32, {1});
      }
      break;
    case LinearFormat::kQ8_0:
    case LinearFormat::kIq2Xxs:
    case LinearFormat::kIq2Xs: {
      const int bv = f == LinearFormat::kQ8_0 ? 32 : 256;
      const int bb = f == LinearFormat::kQ8_0 ? 34 : f == LinearFormat::kIq2Xs ? 74 : 66;
      const int64_t rb = K / bv * bb;
      s.w = rand_bytes(N * rb);
      const uint16_t d = fmt::float_to_fp16_bits(0.01f);
      for (int64_t i = 0; i < N * K / bv; ++i) {
        s.w[i * bb] = d & 0xFF;
        s.w[i * bb + 1] = d >> 8;
      }
      s.src.weight = TensorRef::contiguous(s.w.data(), DType::kUInt8, {N, rb});
      break;
    }
  }
  return s;
}

/// The activation inputs of a format (device), sized for M tokens: views into pools generated
/// once (random bf16, random e4m3/e2m1 bytes, scale bytes in sane ranges).
struct ActIn {
  TensorRef xt, xst;
  DType act = DType::kBF16;
  int64_t bytes = 0;
};

struct Pools {
  std::unique_ptr<DevMem> bf16, bytes, sc_nv, sc_mx;
  size_t n = 0, nsc = 0;
  void init(size_t max_values, size_t max_scales) {
    n = max_values;
    nsc = max_scales;
    std::vector<uint8_t> h(2 * n);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t b = fmt::float_to_bf16_bits(nd(g_rng));
      h[2 * i] = b & 0xFF;
      h[2 * i + 1] = b >> 8;
    }
    bf16 = std::make_unique<DevMem>(h.size());
    BENCH_CUDA(cudaMemcpy(bf16->p, h.data(), h.size(), cudaMemcpyHostToDevice));
    h = rand_bytes(n);
    no_nan_e4m3(h);
    bytes = std::make_unique<DevMem>(h.size());
    BENCH_CUDA(cudaMemcpy(bytes->p, h.data(), h.size(), cudaMemcpyHostToDevice));
    h = rand_bytes(nsc);
    fill_range(h, 0x30, 0x40);
    sc_nv = std::make_unique<DevMem>(h.size());
    BENCH_CUDA(cudaMemcpy(sc_nv->p, h.data(), h.size(), cudaMemcpyHostToDevice));
    h = rand_bytes(nsc);
    fill_range(h, 120, 126);
    sc_mx = std::make_unique<DevMem>(h.size());
    BENCH_CUDA(cudaMemcpy(sc_mx->p, h.data(), h.size(), cudaMemcpyHostToDevice));
  }
};
Pools g_pools;

ActIn make_act(LinearFormat f, int64_t M, int64_t K) {
  ActIn a;
  if (f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4) {
    const bool nv = f == LinearFormat::kNvfp4;
    const int64_t cols = nv ? K / 16 : K / 32;
    const int64_t scb = fmt::swizzled_scale_bytes(M, cols);
    a.xst =
        TensorRef::contiguous(nv ? g_pools.sc_nv->p : g_pools.sc_mx->p, DType::kUInt8, {scb}, 0);
    a.act = DType::kFP4E2M1;
    a.xt = TensorRef::contiguous(g_pools.bytes->p, DType::kUInt8, {M, K / 2}, 0);
    a.bytes = M * K / 2 + scb;
  } else if (f == LinearFormat::kFp8Block && std::getenv("B12X_BENCH_FP8B_PREQUANT") != nullptr) {
    // Probe: block FP8 with caller-quantized activations (e4m3 + fp32 [M, K/128] scales), the
    // GEMM without the activation quantizer in front of it.
    a.act = DType::kFP8E4M3;
    a.xt = TensorRef::contiguous(g_pools.bytes->p, DType::kFP8E4M3, {M, K}, 0);
    a.xst = TensorRef::contiguous(g_pools.sc_nv->p, DType::kFP32, {M, K / 128}, 0);
    a.bytes = M * K + M * (K / 128) * 4;
  } else if (f == LinearFormat::kFp8Tensor) {
    a.act = DType::kFP8E4M3;
    a.xt = TensorRef::contiguous(g_pools.bytes->p, DType::kFP8E4M3, {M, K}, 0);
    a.bytes = M * K;
  } else {
    a.act = DType::kBF16;
    a.xt = TensorRef::contiguous(g_pools.bf16->p, DType::kBF16, {M, K}, 0);
    a.bytes = M * K * 2;
  }
  return a;
}

// ---------------------------------------------------------------- peers ---------------------
// Launches per graph and timed replays: large-M runs are long enough for fewer samples (the whole
// benchmark must stay under a minute).
int per_graph(int64_t M) {
  return M >= 256 ? 4 : 20;
}
int reps(int64_t M) {
  return M >= 256 ? 5 : 9;
}

struct CublasPeer {
  cublasHandle_t h = nullptr;
  cublasLtHandle_t lt = nullptr;
  DevMem* ws = nullptr;
  CublasPeer() {
    CUBLAS_CHECK(cublasCreate(&h));
    CUBLAS_CHECK(cublasLtCreate(&lt));
    ws = new DevMem(64 << 20);
  }
  ~CublasPeer() {
    cublasDestroy(h);
    cublasLtDestroy(lt);
    delete ws;
  }
};

/// cuBLAS BF16: y[M,N] = x[M,K] W[N,K]^T, column-major y^T = W x^T.
double time_cublas_bf16(CublasPeer& peer, int64_t M, int64_t N, int64_t K) {
  const size_t wbytes = static_cast<size_t>(N) * K * 2;
  const int rot = bench::rotation_count(wbytes);
  std::vector<std::unique_ptr<DevMem>> ws;
  for (int i = 0; i < rot; ++i) {
    ws.push_back(std::make_unique<DevMem>(wbytes));
    BENCH_CUDA(cudaMemset(ws.back()->p, 0x3c, wbytes));
  }
  DevMem x(M * K * 2), y(M * N * 2);
  BENCH_CUDA(cudaMemset(x.p, 0x3c, M * K * 2));
  const float alpha = 1.f, beta = 0.f;
  return bench::time_graph_us(
      [&](int i, cudaStream_t s) {
        CUBLAS_CHECK(cublasSetStream(peer.h, s));
        CUBLAS_CHECK(cublasGemmEx(peer.h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, ws[i % rot]->p,
                                  CUDA_R_16BF, K, x.p, CUDA_R_16BF, K, &beta, y.p, CUDA_R_16BF, N,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      },
      per_graph(M), reps(M));
}

/// cuBLASLt FP8 e4m3 x e4m3 -> bf16 (TN), per-tensor scales or (block = true) DeepSeek-style
/// 128x128 weight / 1x128 activation fp32 block scales. Returns <0 when unsupported here.
double time_cublaslt_fp8(CublasPeer& peer, int64_t M, int64_t N, int64_t K, bool block = false) {
  const size_t wbytes = static_cast<size_t>(N) * K;
  const int rot = bench::rotation_count(wbytes);
  std::vector<std::unique_ptr<DevMem>> ws;
  for (int i = 0; i < rot; ++i) {
    ws.push_back(std::make_unique<DevMem>(wbytes));
    BENCH_CUDA(cudaMemset(ws.back()->p, 0x38, wbytes));
  }
  DevMem x(M * K), y(M * N * 2), sc(16);
  BENCH_CUDA(cudaMemset(x.p, 0x38, M * K));
  const float one = 1.f;
  BENCH_CUDA(cudaMemcpy(sc.p, &one, 4, cudaMemcpyHostToDevice));
  const size_t nsa = static_cast<size_t>((N + 127) / 128 + 1) * ((K + 127) / 128 + 1);
  const size_t nsb = static_cast<size_t>(M + 128) * ((K + 127) / 128 + 1);
  DevMem sa(nsa * 4), sb(nsb * 4);
  {
    std::vector<float> ones(std::max(nsa, nsb), 1.f);
    BENCH_CUDA(cudaMemcpy(sa.p, ones.data(), nsa * 4, cudaMemcpyHostToDevice));
    BENCH_CUDA(cudaMemcpy(sb.p, ones.data(), nsb * 4, cudaMemcpyHostToDevice));
  }
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
    return -1;
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  void* sp = sc.p;
  if (block) {
    const int32_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    if (cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof(ma)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof(mb)) !=
            CUBLAS_STATUS_SUCCESS) {
      cublasLtMatmulDescDestroy(op);
      return -1;
    }
    void* pa = sa.p;
    void* pb = sb.p;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof(pa));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof(pb));
  } else {
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sp, sizeof(sp));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sp, sizeof(sp));
  }
  cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  size_t wsz = 64 << 20;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz,
                                       sizeof(wsz));
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  double us = -1;
  if (cublasLtMatmulAlgoGetHeuristic(peer.lt, op, la, lb, lc, lc, pref, 1, &heur, &found) ==
          CUBLAS_STATUS_SUCCESS &&
      found > 0) {
    const float alpha = 1.f, beta = 0.f;
    const bool ok =
        cublasLtMatmul(peer.lt, op, &alpha, ws[0]->p, la, x.p, lb, &beta, y.p, lc, y.p, lc,
                       &heur.algo, peer.ws->p, wsz, nullptr) == CUBLAS_STATUS_SUCCESS &&
        cudaDeviceSynchronize() == cudaSuccess;
    cudaGetLastError();
    if (ok) {
      us = bench::time_graph_us(
          [&](int i, cudaStream_t s) {
            CUBLAS_CHECK(cublasLtMatmul(peer.lt, op, &alpha, ws[i % rot]->p, la, x.p, lb, &beta,
                                        y.p, lc, y.p, lc, &heur.algo, peer.ws->p, wsz, s));
          },
          per_graph(M), reps(M));
    }
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return us;
}

// Floor probe (session 16, B12X_BENCH_FLOOR=1): the cost of one call that only streams a
// shape's NVFP4 bytes (N x K / 2 codes + N x K / 16 scales), timed like the kernels (graph of
// per_graph(1) launches, sets rotated past L2), so the M = 1 targets can be read against what a
// launch per call allows at all. Each thread keeps 4 16-byte loads in flight
// (ld.global.nc.L1::no_allocate, like the stream kernel's ring); with PDL the griddepcontrol.wait
// follows the first loads (the weights do not depend on the predecessor) and kTrig launches the
// dependents once the thread's last loads are out (the stream kernels' early trigger).
// Load order (session 18, B12X_BENCH_FLOOR_SEG=<v>, B12X_BENCH_FLOOR_ORDER): 0 grid-strided
// 16-byte loads; else the M = 1 stream kernel's order over 512-byte vectors (lane l's 16 bytes
// of each), in blocks of 4 vectors (one per ring slot): 1 each warp owns segments of v vectors
// (a tile's K part), w, w + W, ... for warp w of W, and walks each from its start; 2 the same,
// warp w starting at block w mod v / 4 (wrapping); 3 a CTA's 8 warps share segments of 8 v
// vectors (a tile of 8 K parts), warp w reading blocks w, w + 8, ... (the parts interleaved); 4
// = 3 with CTA b starting at block round b mod v / 4. Addresses advance by counters (round 69's
// first version divided 64-bit indices per load and measured its own instruction cost).
template <bool kTrig>
__global__ void __launch_bounds__(256)
    floor_read_kernel(const uint4* __restrict__ p, int64_t n, int order, int seg, unsigned* out) {
  const int lane = threadIdx.x & 31, wc = threadIdx.x >> 5;
  const int64_t tid = int64_t{blockIdx.x} * 256 + threadIdx.x;
  const int64_t nvec = n / 32;  // 512-byte vectors
  // The walk: 16-byte unit of load q of block `blk` is base + blk-th block + (q % 4) vectors.
  int64_t stride = int64_t{gridDim.x} * 256;  // order 0: units between a thread's loads
  int64_t sbase = 0, sstep = 0;  // segment start, step between this walker's segments (vectors)
  int boff = 0, bstride = 4, nbk = 1, rot = 0, rd = 0, done = 0;
  if (order != 0) {
    nbk = seg / 4;
    const bool cta = order >= 3;
    sbase = cta ? int64_t{blockIdx.x} * 8 * seg : (int64_t{blockIdx.x} * 8 + wc) * seg;
    sstep = cta ? int64_t{gridDim.x} * 8 * seg : int64_t{gridDim.x} * 8 * seg;
    boff = cta ? 4 * wc : 0;
    bstride = cta ? 32 : 4;
    rot = order == 2   ? static_cast<int>((int64_t{blockIdx.x} * 8 + wc) % nbk)
          : order == 4 ? static_cast<int>(blockIdx.x % nbk)
                       : 0;
    rd = rot;
  }
  int64_t i = tid;  // order 0: the next unit
  int64_t v0 = 0;   // orders 1-4: the block's first vector
  auto next_block = [&]() -> bool {
    if (order == 0) return i < n;
    if (sbase >= nvec) return false;
    v0 = sbase + boff + int64_t{rd} * bstride;
    if (++rd == nbk) rd = 0;
    if (++done == nbk) done = 0, rd = rot, sbase += sstep;
    return true;
  };
  auto ld = [&](int b) {
    uint4 v = make_uint4(0, 0, 0, 0);
    const int64_t j = order == 0 ? i + b * stride : (v0 + b) * 32 + lane;
    if (j < n)
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p + j));
    return v;
  };
  uint4 r[4] = {};
  if (next_block()) {
#pragma unroll
    for (int b = 0; b < 4; ++b) r[b] = ld(b);
    i += 4 * stride;
  }
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  unsigned acc = 0;
  while (next_block()) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const uint4 v = r[b];
      r[b] = ld(b);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    i += 4 * stride;
  }
#if __CUDA_ARCH__ >= 900
  if constexpr (kTrig) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#pragma unroll
  for (int b = 0; b < 4; ++b) acc ^= r[b].x ^ r[b].y ^ r[b].z ^ r[b].w;
  if (acc == 0x9E3779B9u) out[tid] = acc;
}

/// Prints one line per (mode, CTAs per SM): plain launches, PDL (trigger at exit), PDL with the
/// early trigger; B12X_BENCH_FLOOR_CTAS="2,3" the CTAs per SM of 256 threads.
void time_floor(int64_t N, int64_t K, double bw) {
  const int64_t bytes = (N * K / 2 + N * K / 16 + 15) / 16 * 16;
  const int rot = bench::rotation_count(bytes);
  DevMem buf(bytes * rot), out(4 << 20);
  BENCH_CUDA(cudaMemset(buf.p, 0x5A, bytes * rot));
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::vector<int> per_sm = {2, 3};
  if (const char* e = std::getenv("B12X_BENCH_FLOOR_CTAS"); e && *e) {
    per_sm.clear();
    std::stringstream ss(e);
    std::string item;
    while (std::getline(ss, item, ',')) per_sm.push_back(std::atoi(item.c_str()));
  }
  const char* names[3] = {"plain", "pdl", "pdl+trig"};
  const char* seg_env = std::getenv("B12X_BENCH_FLOOR_SEG");
  const char* ord_env = std::getenv("B12X_BENCH_FLOOR_ORDER");
  const int seg = seg_env != nullptr ? std::max(4, std::atoi(seg_env) / 4 * 4) : 0;
  const int order = seg == 0 ? 0 : ord_env != nullptr ? std::clamp(std::atoi(ord_env), 1, 4) : 1;
  const char* grid_env = std::getenv("B12X_BENCH_FLOOR_GRID");
  const int grid_ctas = grid_env != nullptr ? std::atoi(grid_env) : 0;
  for (int c : per_sm) {
    if (c < 1 || c > 8) continue;
    for (int mode = seg > 0 ? 2 : 0; mode < 3; ++mode) {
      const double us = bench::time_graph_us(
          [&](int i, cudaStream_t s) {
            cudaLaunchConfig_t cfg{};
            cfg.gridDim = dim3(static_cast<unsigned>(grid_ctas > 0 ? grid_ctas : sms * c));
            cfg.blockDim = dim3(256);
            cfg.stream = s;
            cudaLaunchAttribute attr{};
            attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr.val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = &attr;
            cfg.numAttrs = mode > 0 ? 1 : 0;
            const uint4* src =
                reinterpret_cast<const uint4*>(static_cast<uint8_t*>(buf.p) + (i % rot) * bytes);
            unsigned* o = static_cast<unsigned*>(out.p);
            BENCH_CUDA(mode == 2 ? cudaLaunchKernelEx(&cfg, floor_read_kernel<true>, src,
                                                      bytes / 16, order, seg, o)
                                 : cudaLaunchKernelEx(&cfg, floor_read_kernel<false>, src,
                                                      bytes / 16, order, seg, o));
          },
          per_graph(1), reps(1));
      std::printf(
          "floor %6ld %6ld %2d/SM %-8s order %d seg %3d grid %4d %8.2f us %6.1f %%bw (%.1f MB)\n",
          (long)N, (long)K, c, names[mode], order, seg, grid_ctas > 0 ? grid_ctas : sms * c, us,
          100.0 * bytes / us / 1e3 / bw, bytes / 1e6);
    }
  }
  std::fflush(stdout);
}

int64_t bench_max_tokens() {
  const char* e = std::getenv("B12X_BENCH_MAX_TOKENS");
  return e != nullptr ? std::atoll(e) : 0;
}

/// B12X_BENCH_VARIANTS: ';'-separated variants of space-separated NAME=VALUE settings.
std::vector<std::vector<std::pair<std::string, std::string>>> bench_variants() {
  std::vector<std::vector<std::pair<std::string, std::string>>> vs;
  const char* e = std::getenv("B12X_BENCH_VARIANTS");
  if (e == nullptr || *e == 0) return {{}};
  std::stringstream ss(e);
  std::string item;
  while (std::getline(ss, item, ';')) {
    std::stringstream vs1(item);
    std::string kv;
    std::vector<std::pair<std::string, std::string>> v;
    while (vs1 >> kv) {
      const auto q = kv.find('=');
      if (q != std::string::npos) v.emplace_back(kv.substr(0, q), kv.substr(q + 1));
    }
    vs.push_back(v);
  }
  return vs;
}

bool format_enabled(LinearFormat f) {
  const char* e = std::getenv("B12X_BENCH_FORMATS");
  if (!e || !*e) return true;
  std::stringstream ss(e);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item == gemm::format_name(f)) return true;
  return false;
}

}  // namespace

int main() {
  int dev = 0;
  BENCH_CUDA(cudaSetDevice(dev));
  const auto t_start = std::chrono::steady_clock::now();
  const double bw = bench::measure_read_bandwidth_gbs();
  std::printf("gemm benchmark on %s, read bandwidth %.0f GB/s\n", bench::gpu_name().c_str(), bw);
  const bool quick = std::getenv("B12X_BENCH_QUICK") != nullptr;
  std::vector<std::pair<int64_t, int64_t>> shapes = {
      {4096, 4096}, {14336, 4096}, {4096, 14336}, {6144, 4096}, {2048, 7168}};
  if (quick) shapes.resize(2);
  std::vector<int64_t> Ms = {1, 4, 16, 64, 256, 2048};
  // Probe filters (tools/gemm-probe.sh): B12X_BENCH_SHAPES="14336x4096,4096x4096" (N x K) and
  // B12X_BENCH_MS="1,16" restrict the sweep.
  if (const char* e = std::getenv("B12X_BENCH_SHAPES"); e && *e) {
    std::vector<std::pair<int64_t, int64_t>> keep;
    std::stringstream ss(e);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const auto x = item.find('x');
      if (x == std::string::npos) continue;
      keep.emplace_back(std::atoll(item.substr(0, x).c_str()),
                        std::atoll(item.substr(x + 1).c_str()));
    }
    shapes = keep;
  }
  if (const char* e = std::getenv("B12X_BENCH_MS"); e && *e) {
    std::vector<int64_t> keep;
    std::stringstream ss(e);
    std::string item;
    while (std::getline(ss, item, ',')) keep.push_back(std::atoll(item.c_str()));
    Ms = keep;
  }
  CublasPeer peer;
  g_pools.init(2048 * 14336, fmt::swizzled_scale_bytes(2048, 14336 / 16));
  // B12X_BENCH_NO_PEERS=1 (probes): no cuBLAS / cuBLASLt timings (their columns read 0).
  const bool peers = std::getenv("B12X_BENCH_NO_PEERS") == nullptr;
  const char* budget_env = std::getenv("B12X_BENCH_BUDGET_S");
  const double budget = budget_env ? std::atof(budget_env) : 50.0;
  bench::JsonRows json;
  const auto variants = bench_variants();
  std::printf("%-12s %6s %6s %5s %10s %9s %6s %8s %8s %8s\n", "format", "N", "K", "M", "us", "GB/s",
              "%bw", "TFLOP/s", "xBF16", "xFP8");
  for (auto [N, K] : shapes) {
    std::vector<double> t_bf16(Ms.size()), t_fp8(Ms.size()), t_fp8b(Ms.size());
    if (std::getenv("B12X_BENCH_FLOOR") != nullptr) time_floor(N, K, bw);
    for (size_t i = 0; i < Ms.size() && peers; ++i) {
      t_bf16[i] = time_cublas_bf16(peer, Ms[i], N, K);
      t_fp8[i] = time_cublaslt_fp8(peer, Ms[i], N, K);
      t_fp8b[i] = time_cublaslt_fp8(peer, Ms[i], N, K, /*block=*/true);
      const double flops = 2.0 * Ms[i] * N * K;
      const char* names[3] = {"cublas_bf16", "cublaslt_fp8", "cublaslt_fp8_block"};
      for (int p = 0; p < 3; ++p) {
        const double t = p == 0 ? t_bf16[i] : p == 1 ? t_fp8[i] : t_fp8b[i];
        if (t <= 0) continue;
        const double bytes = static_cast<double>(N) * K * (p == 0 ? 2 : 1) +
                             static_cast<double>(Ms[i]) * K * (p == 0 ? 2 : 1) + Ms[i] * N * 2.0;
        std::printf("%-12s %6ld %6ld %5ld %10.2f %9.0f %6.1f %8.1f\n", names[p], (long)N, (long)K,
                    (long)Ms[i], t, bytes / t / 1e3, 100.0 * bytes / t / 1e3 / bw, flops / t / 1e6);
        json.add({{"op", bench::JsonRows::str(names[p])},
                  {"N", bench::JsonRows::num(N)},
                  {"K", bench::JsonRows::num(K)},
                  {"M", bench::JsonRows::num(Ms[i])},
                  {"us", bench::JsonRows::num(t)},
                  {"gbs", bench::JsonRows::num(bytes / t / 1e3)},
                  {"pct_bw", bench::JsonRows::num(100.0 * bytes / t / 1e3 / bw)},
                  {"tflops", bench::JsonRows::num(flops / t / 1e6)}});
      }
    }
    for (int fi = 0; fi < gemm::kNumLinearFormats; ++fi) {
      const auto f = static_cast<LinearFormat>(fi);
      if (!format_enabled(f)) continue;
      if (K % gemm::format_k_multiple(f) != 0) continue;
      Source src = make_source(f, N, K);
      std::shared_ptr<gemm::PackedWeight> base;
      try {
        base = gemm::PackedWeight::pack(src.src, dev, nullptr);
      } catch (const Error& e) {
        std::printf("%-12s pack failed: %s\n", gemm::format_name(f), e.what());
        continue;
      }
      const int rot = bench::rotation_count(base->stream_bytes());
      std::vector<std::shared_ptr<gemm::PackedWeight>> wts = {base};
      for (int r = 1; r < rot; ++r) wts.push_back(base->clone(nullptr));
      for (size_t mi = 0; mi < Ms.size(); ++mi) {
        const int64_t M = Ms[mi];
        ActIn a = make_act(f, M, K);
        gemm::Caps caps;
        caps.device = dev;
        caps.format = f;
        // B12X_BENCH_MAX_TOKENS=<n>: plans sized for max(M, n) tokens (vLLM sizes its plans for
        // many tokens; run picks kernels by the bound M).
        caps.max_tokens = std::max<int64_t>(M, bench_max_tokens());
        caps.in_features = K;
        caps.out_features = N;
        caps.act_dtype = a.act;
        caps.out_dtype = DType::kBF16;
        caps.expected_m = M;
        DevMem y(M * N * 2), alpha(16);
        const float one = 1.f;
        BENCH_CUDA(cudaMemcpy(alpha.p, &one, 4, cudaMemcpyHostToDevice));
        for (size_t vi = 0; vi < variants.size(); ++vi) try {
            for (const auto& [k, v] : variants[vi]) setenv(k.c_str(), v.c_str(), 1);
            const gemm::Plan plan = gemm::plan(caps);
            for (const auto& kv : variants[vi]) unsetenv(kv.first.c_str());
            const std::string vtag =
                variants.size() > 1 ? " [v" + std::to_string(vi) + "]" : std::string();
            DevMem scratch(plan.scratch_bytes);
            const TensorRef st = TensorRef::contiguous(
                scratch.p, DType::kUInt8, {std::max<int64_t>(plan.scratch_bytes, 1)}, dev);
            const TensorRef yt = TensorRef::contiguous(y.p, DType::kBF16, {M, N}, dev);
            const TensorRef at = (f == LinearFormat::kNvfp4)
                                     ? TensorRef::contiguous(alpha.p, DType::kFP32, {1}, dev)
                                     : TensorRef{};
            std::vector<gemm::Binding> binds;
            for (auto& w : wts)
              binds.push_back(gemm::bind(plan, st, a.xt, a.xst, *w, yt, TensorRef{}, at));
            const double t = bench::time_graph_us(
                [&](int i, cudaStream_t s) { gemm::run(binds[i % binds.size()], s); }, per_graph(M),
                reps(M));
            const double flops = 2.0 * M * N * K;
            const double bytes = static_cast<double>(base->stream_bytes()) + a.bytes + M * N * 2.0;
            const double xb = t_bf16[mi] / t, xf = t_fp8[mi] > 0 ? t_fp8[mi] / t : 0;
            const double xfb = t_fp8b[mi] > 0 ? t_fp8b[mi] / t : 0;
            std::printf("%-12s %6ld %6ld %5ld %10.2f %9.0f %6.1f %8.1f %8.2f %8.2f%s\n",
                        gemm::format_name(f), (long)N, (long)K, (long)M, t, bytes / t / 1e3,
                        100.0 * bytes / t / 1e3 / bw, flops / t / 1e6, xb, xf, vtag.c_str());
            // B12X_BENCH_DESCRIBE=1: the plan's grid and kernel choices under each row.
            if (std::getenv("B12X_BENCH_DESCRIBE") != nullptr)
              std::printf("  plan:%s\n", plan.describe().c_str());
            std::fflush(stdout);
            json.add(
                {{"op", bench::JsonRows::str(gemm::format_name(f))},
                 {"N", bench::JsonRows::num(N)},
                 {"K", bench::JsonRows::num(K)},
                 {"M", bench::JsonRows::num(M)},
                 {"us", bench::JsonRows::num(t)},
                 {"gbs", bench::JsonRows::num(bytes / t / 1e3)},
                 {"pct_bw", bench::JsonRows::num(100.0 * bytes / t / 1e3 / bw)},
                 {"tflops", bench::JsonRows::num(flops / t / 1e6)},
                 {"x_cublas_bf16", bench::JsonRows::num(xb)},
                 {"x_cublaslt_fp8", bench::JsonRows::num(xf)},
                 {"x_cublaslt_fp8_block", bench::JsonRows::num(xfb)},
                 {"weight_bytes", bench::JsonRows::num(static_cast<double>(base->stream_bytes()))},
                 {"kernel", bench::JsonRows::str(
                                binds[0].regime == gemm::Regime::kDecode ? "decode" : "tiled")},
                 {"split_k", bench::JsonRows::num(plan.split_k)}});
          } catch (const Error& e) {
            for (const auto& kv : variants[vi]) unsetenv(kv.first.c_str());
            std::printf("%-12s M=%ld failed: %s\n", gemm::format_name(f), (long)M, e.what());
          }
      }
      json.write("gemm", bw);  // incremental: a timeout still leaves the rows so far
      const double el =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      if (el > budget) {
        std::printf("time budget reached after %.0f s; stopping\n", el);
        goto done;
      }
    }
  }
done:
  std::printf("results: %s\n", json.write("gemm", bw).c_str());
  return 0;
}
