// Tiled linear kernel for large M (the prefill regime).
//
// CTA tile 128 tokens x kBN weight rows x 64 K per stage, 8 warps, 3-4 stage cp.async pipeline
// (as many stages as fit SM12x's 99 KB), one barrier per stage. Activations (bf16/fp16 or e4m3,
// row major) come from shared memory by ldmatrix; B fragments are decoded per lane from the
// packed atoms straight into MMA registers (an atom's a0..a3 registers are the b0/b1 registers of
// its two n8 tiles), which keeps the shared-memory traffic of B at the packed size.
//
// The budget that matters is instructions per MMA (one scheduler issues one instruction per
// cycle and an m16n8k16 every ~6 cycles at the H200's mma.sync rate): decoding a fragment
// register costs ~5, so the FP4 fold mode runs 1 x 8 warps of 128 tokens x 32 rows (each
// fragment decoded once per CTA, reused by 8 m16 tiles; kBN = 256); the other modes run 2 x 4
// warps of 64 x 32 (kBN = 128).
//
// Scales never sit on the MMA critical path: every stage carries a small scale area in shared
// memory holding exactly what that stage's MMAs need, already converted. The scale words of stage
// s are fetched from global memory into registers in the iteration that issues its cp.async
// copies and stored to shared memory one iteration later (still >= 1 barrier before the stage is
// consumed), so their latency overlaps the MMAs.
//
// Numerics per mode (all exact up to fp32 summation order, see docs/gemm.md):
//  - kFold (NVFP4; MXFP4 with BF16 MMAs; MXFP8): the block scale is folded into the decoded BF16
//    weights (FP4 x UE4M3 x 2^-7, FP4 x 2^-7 x E8M0 and E4M3 x 2^-7 x E8M0 are exact in BF16);
//    the activation E8M0 is folded into the BF16 activations by the pre-pass. MXFP8 activations
//    are pre-passed in the k order of the e4m3 k32 weight fragment, so the fragment's bytes are
//    BF16 k16 fragments once decoded in place.
//  - kGroup (Q8_0, IQ2, MXFP4 with FP16 MMAs): fp32 weight group scales applied per group (32 K,
//    16 for IQ2_XS) to a per-weight-tile temporary (BF16 cannot hold Q8_0 d x q or IQ2
//    d x (2s+1)/8 x grid exactly, FP16 cannot hold FP4 x E8M0).
//  - kF8Promote (per-tensor / block FP8): e4m3 m16n8k32 MMAs accumulate one 128-K group (two
//    stages) in a temporary (the FP8 MMA accumulator keeps only ~13 mantissa bits on SM89/SM90),
//    then promote to fp32, times the activation x weight block scales for block FP8.
#pragma once

#include <cooperative_groups.h>
#include <cuda/std/type_traits>

#include "gemm/kernels/linear_common.cuh"

namespace b12x::gemm::lin {

enum class TiledMode : int { kFold, kGroup, kF8Promote };

/// Per-(format, MMA dtype) shape of the CTA tile and of one pipeline stage:
/// [A tile][packed B tile][scale area].
template <WFmt F, class T, bool kAlt = false, int kTok = 128>
struct TiledCfg {
  /// kTok: tokens per CTA, 128 or 64 (mid M: half the MMAs of a 128-token tile would be padding
  /// at M <= 64; every mode then runs 1 x 8 warps of 64 tokens x 32 rows, kBN = 256).
  static constexpr int kBM = kTok, kBK = 64, kThreads = 256;
  static_assert(kTok == 128 || (kTok == 64 && !kAlt), "token tile");
  static constexpr int kAPitch = kBK + 8;     // halves; 144-byte rows keep ldmatrix conflict-free
  static constexpr int kAPitchF8 = kBK + 16;  // bytes; 80-byte rows, conflict-free as well
  static constexpr WTraits kTr = wtraits(F);
  /// FP8 MMAs on e4m3 activations: per-tensor and block FP8. MXFP8 runs on BF16 MMAs instead
  /// (its per-32 activation x weight scales would cost 8 fp32 instructions per FP8 MMA).
  static constexpr bool kF8 = kTr.fp8mma && F != WFmt::kFp8Mx;
  static constexpr bool kIq2 = F == WFmt::kIq2Xxs || F == WFmt::kIq2Xs;
  /// E8M0 weight scales folded into the decoded BF16 weights (MXFP4 with BF16 MMAs, MXFP8).
  static constexpr bool kE8Fold = (F == WFmt::kMxfp4 && !T::kFp16) || F == WFmt::kFp8Mx;
  static constexpr TiledMode kMode = kF8                              ? TiledMode::kF8Promote
                                     : (F == WFmt::kNvfp4 || kE8Fold) ? TiledMode::kFold
                                                                      : TiledMode::kGroup;
  static constexpr int kGroup = kTr.group;  // K group of the weight scale (0: none)
  /// 16-row weight tiles per warp: 4 (64x64 warp tiles) where the registers allow it; the fp32
  /// group temporaries of kGroup would spill with 128 accumulators.
  /// kAlt (session 7's probe variants, not instantiated since session 21): the group mode on
  /// 64x64 warp tiles (its registers reach 255 and spill a little), the fold mode on 2 x 4 warps
  /// of 64x32 at two CTAs per SM (twice the warps to hide latencies, each fragment decoded by two
  /// warps). FP8 promotion keeps a second warp-tile-sized accumulator and has no variant.
  static constexpr int kWN = (kAlt && kMode == TiledMode::kGroup) ? 4 : 2;
  static constexpr int kNT = 2 * kWN;  // n8 tiles per warp
  /// Warp grid: FP4 fold runs 1 (tokens) x 8 (rows) warps of 128x32, so that every weight
  /// fragment is decoded by exactly one warp and reused by 8 m16 tiles (the FP4 decode is ~5
  /// instructions per fragment register, the dominant non-MMA work); the others (MXFP8 too:
  /// 16 KB of packed B per 256-row stage would leave room for 2 stages) run 2 x 4 warps of
  /// 64 x 16kWN.
  static constexpr int kWarpsM =
      kTok == 64 || (kMode == TiledMode::kFold && F != WFmt::kFp8Mx && !kAlt) ? 1 : 2;
  /// Launch with __launch_bounds__(256, 2): the fold configs with 64x32 warp tiles fit 128
  /// registers and 2 x their shared memory fits an SM90 SM.
  static constexpr bool kTwoCta = kMode == TiledMode::kFold && (kWarpsM == 2 || kTok == 64);
  static constexpr int kWarpsN = 8 / kWarpsM;
  static constexpr int kMT = kBM / 16 / kWarpsM;  // m16 tiles per warp
  static constexpr int kBN = kWarpsN * 16 * kWN;
  static constexpr int kBTiles = kBN / 16;
  static constexpr int kAtomBytes = kTr.slots * kTr.lane_bytes;
  static constexpr int kABytes = kF8 ? kBM * kAPitchF8 : kBM * kAPitch * 2;
  static constexpr int kBBytes = kBTiles * 2 * kAtomBytes;
  /// Weight scale items per stage (one global fetch each): NVFP4 one u32 of 4 UE4M3 codes per
  /// row (stored as 4 splats [group][row]), block FP8 one fp32 per 128-row block of the CTA (the
  /// 64-K stage lies in one 128-K group), otherwise one word per (row, group)
  /// (MXFP4 fold: a BF16 splat of the E8M0 scale; else the fp32 scale).
  static constexpr int kWItems = F == WFmt::kNvfp4      ? kBN
                                 : F == WFmt::kFp8Block ? kBN / 128
                                 : kGroup == 0          ? 0
                                                        : kBN * (kBK / kGroup);
  static constexpr int kWWords = F == WFmt::kNvfp4 ? 4 * kBN : (kWItems + 3) / 4 * 4;
  /// Activation group scales (fp32 rows or E8M0 rows) of the FP8 formats with groups.
  static constexpr bool kHasXs = F == WFmt::kFp8Block;
  static constexpr int kXGroups = !kHasXs ? 0 : (kGroup >= kBK ? 1 : kBK / kGroup);
  static constexpr int kXItems = kXGroups * kBM;
  static constexpr int kItems = kWItems + kXItems;
  static constexpr int kItemsPerThread = (kItems + kThreads - 1) / kThreads;
  static constexpr int kScaleBytes = (kWWords + kXItems) * 4;
  static constexpr int kStageBytes = kABytes + kBBytes + kScaleBytes;
  /// Static shared memory of the kernel (NVFP4 splat table, IQ2 grid/sign tables).
  static constexpr int kStaticBytes = F == WFmt::kNvfp4    ? 512
                                      : F == WFmt::kIq2Xs  ? (512 * 4 + 512) * 4
                                      : F == WFmt::kIq2Xxs ? (256 * 4 + 512) * 4
                                                           : 64;
  /// As many stages (up to 4) as fit SM12x's 99 KB.
  static constexpr int kStages = 4 * kStageBytes + kStaticBytes <= 101376   ? 4
                                 : 3 * kStageBytes + kStaticBytes <= 101376 ? 3
                                                                            : 2;
  static constexpr int kAccPerThread = kMT * kNT * 4;
  /// The split-K reduction moves the accumulators through shared memory in chunks of 64 floats
  /// per thread (64 KB), which the pipeline buffers must hold.
  static constexpr int kRedChunk = 64;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static constexpr int kSmemBytes =
      kPipeBytes > kThreads* kRedChunk * 4 ? kPipeBytes : kThreads* kRedChunk * 4;
  static_assert(kStageBytes % 16 == 0, "stage must keep 16-byte alignment");
  static_assert(kStages >= 3, "tiled pipeline needs 3 stages");
  static_assert(kSmemBytes + kStaticBytes <= 101376,
                "tiled kernel exceeds SM12x's 99 KB of shared memory");
  static_assert(kAccPerThread % kRedChunk == 0, "reduction chunks");
  static_assert(kMode == TiledMode::kFold || kMT == 4, "group / FP8 loops assume 4 m16 tiles");
  static_assert(kMode != TiledMode::kFold || kWN == 2, "fold loop: 2 weight tiles per warp");
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/// Raw scale word of item i for the stage starting at absolute K k0 (see TiledCfg): fetched with
/// plain loads into registers, converted by tiled_scale_store one iteration later.
template <WFmt F, class T, bool kAlt, int kTok>
__device__ __forceinline__ uint32_t tiled_scale_fetch(const LinearParams& p, int i, int64_t n0,
                                                      int64_t m0, int64_t k0) {
  using C = TiledCfg<F, T, kAlt, kTok>;
  if (i < C::kWItems) {
    if constexpr (F == WFmt::kNvfp4) {
      const int64_t row = n0 + i;
      // scale_ld = KP/16 is a multiple of 32 and k0/16 of 4: an aligned u32 of 4 codes.
      return row < p.NP
                 ? __ldg(reinterpret_cast<const uint32_t*>(p.wscale + row * p.scale_ld + k0 / 16))
                 : 0u;
    } else if constexpr (F == WFmt::kFp8Block) {
      // n0 is a multiple of 128; a block past the padded rows has no scale row.
      if (n0 + 128 * i >= p.NP) return 0u;
      return __float_as_uint(
          __ldg(reinterpret_cast<const float*>(p.wscale) + (n0 / 128 + i) * p.scale_ld + k0 / 128));
    } else if constexpr (C::kGroup > 0) {
      const int j = i / C::kBN;
      const int64_t row = n0 + (i % C::kBN);
      const int64_t kk = k0 + j * C::kGroup;
      if (row >= p.NP) return 0u;
      if constexpr (F == WFmt::kMxfp4 || F == WFmt::kFp8Mx) {
        return __ldg(p.wscale + row * p.scale_ld + kk / 32);
      } else if constexpr (F == WFmt::kQ8_0) {
        return __ldg(reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + kk / 32);
      } else {  // IQ2: fp16 d | 4-bit sub-scale << 16
        const uint32_t d =
            __ldg(reinterpret_cast<const uint16_t*>(p.wscale) + row * p.scale_ld + kk / 256);
        const int64_t jj = kk / C::kGroup;
        const uint32_t sv =
            (__ldg(p.wscale2 + row * p.scale2_ld + jj / 2) >> (4 * (jj & 1))) & 0xFu;
        return d | (sv << 16);
      }
    }
    return 0u;
  } else if constexpr (C::kHasXs) {
    // Activation group scale (token r, group j); 1.0 for padding rows / K beyond the input
    // (x is zero-filled there).
    const int x = i - C::kWItems;
    const int j = x / C::kBM;
    const int64_t m = m0 + (x % C::kBM);
    const int64_t kk = k0 + j * C::kGroup;
    const bool valid = m < p.M && kk < p.K;
    switch (p.xs_kind) {
      case kXsF32Rows:
        return valid ? __float_as_uint(__ldg(p.xscale + m * p.xscale_ld + kk / C::kGroup))
                     : 0x3F800000u;
      case kXsE8m0Rows:
        return valid ? __ldg(p.xq_scale + m * p.xscale_ld + kk / C::kGroup) : 127u;
      default:
        return 127u;
    }
  }
  return 0u;
}

/// Convert and store item i into a stage's scale area (weights: [group][row], activations:
/// [group][token] after the weight words).
template <WFmt F, class T, bool kAlt, int kTok>
__device__ __forceinline__ void tiled_scale_store(const LinearParams& p, int i, uint32_t raw,
                                                  uint32_t* area, const uint32_t* lut) {
  using C = TiledCfg<F, T, kAlt, kTok>;
  if (i < C::kWItems) {
    if constexpr (F == WFmt::kNvfp4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) area[j * C::kBN + i] = lut[(raw >> (8 * j)) & 0x7Fu];
    } else if constexpr (C::kE8Fold) {
      area[i] = e8m0_bf16_splat(raw);
    } else if constexpr (F == WFmt::kMxfp4 || F == WFmt::kFp8Mx) {
      area[i] = __float_as_uint(e8m0_f32(raw));
    } else if constexpr (F == WFmt::kFp8Block) {
      area[i] = raw;
    } else if constexpr (F == WFmt::kQ8_0) {
      area[i] = __float_as_uint(half_bits_f32(raw));
    } else if constexpr (C::kGroup > 0) {
      const float d = half_bits_f32(raw & 0xFFFFu);
      area[i] = __float_as_uint(d * static_cast<float>(2 * (raw >> 16) + 1) * 0.125f);
    }
  } else if constexpr (C::kHasXs) {
    const uint32_t v = p.xs_kind == kXsF32Rows ? raw : __float_as_uint(e8m0_f32(raw));
    area[C::kWWords + (i - C::kWItems)] = v;
  }
}

template <WFmt F, class T, bool kAlt, int kTok>
__device__ __forceinline__ void linear_tiled_body(const LinearParams& p) {
  using C = TiledCfg<F, T, kAlt, kTok>;
  constexpr WTraits kTr = C::kTr;
  constexpr int kApv = 16 / kTr.lane_bytes;  // atoms per 16-byte lane vector
  constexpr int kAtomBytes = C::kAtomBytes;
  constexpr bool kIq2 = C::kIq2;
  constexpr int kGroup = C::kGroup;
  constexpr int kScaleStep = kGroup == 16 ? 1 : 2;  // k16 steps per fp32 scale application
  constexpr bool kF8 = C::kF8;
  constexpr int kStages = C::kStages;
  constexpr int kWN = C::kWN, kNT = C::kNT, kBN = C::kBN, kMT = C::kMT;
  constexpr int kWRows = kBN / C::kWarpsN;    // weight rows per warp (16 kWN)
  constexpr int kWTok = C::kBM / C::kWarpsM;  // tokens per warp
  constexpr TiledMode kMode = C::kMode;

  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint32_t lut[F == WFmt::kNvfp4 ? 128 : 1];
  __shared__ alignas(16) uint32_t gtab[kIq2 ? (F == WFmt::kIq2Xs ? 512 * 4 : 256 * 4) : 4];
  __shared__ alignas(16) uint32_t stab[kIq2 ? 512 : 4];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;  // tokens kWTok*wm, rows kWRows*wn
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * C::kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t tile0 = n0 / 16;  // first 16-row tile of the CTA

  if constexpr (F == WFmt::kNvfp4) {
    if (tid < 128) lut[tid] = nvfp4_scale_splat<T>(static_cast<uint8_t>(tid));
  }
  if constexpr (kIq2) load_iq2_tables<F == WFmt::kIq2Xs, T>(gtab, stab, tid, 256);
  // The prologue's scale stores read lut.
  __syncthreads();

  griddep_wait();  // activations and the output belong to earlier kernels of the stream

  auto a_stage = [&](int s) { return smem + s * C::kStageBytes; };
  auto b_stage = [&](int s) { return smem + s * C::kStageBytes + C::kABytes; };
  auto scale_area = [&](int s) {
    return reinterpret_cast<uint32_t*>(smem + s * C::kStageBytes + C::kABytes + C::kBBytes);
  };

  // Split-K over grid.z (one thread-block cluster): this CTA's stages [kb_begin, kb_end).
  // (32-bit stage counters: KP / 64 < 2^31.)
  const int total_k = static_cast<int>(p.KP / C::kBK);
  const int per_split = (total_k + p.split - 1) / p.split;
  const int kb_begin = min(total_k, static_cast<int>(blockIdx.z) * per_split);
  const int num_k = min(total_k, kb_begin + per_split) - kb_begin;

  auto load_stage = [&](int s, int kb) {
    const int64_t k0 = static_cast<int64_t>(kb) * C::kBK;  // kb: absolute stage index
    uint8_t* as = a_stage(s);
    // A: 128 rows x (kBK * element bytes / 16) chunks; chunk c = tid + 256 i is row
    // c / kRowChunks, so pass i moves 256 / kRowChunks rows from one base pointer.
    {
      constexpr int kRowBytes = kF8 ? C::kBK : 2 * C::kBK;
      constexpr int kRowChunks = kRowBytes / 16;
      constexpr int kRowsPerPass = C::kThreads / kRowChunks;
      constexpr int kPitch = kF8 ? C::kAPitchF8 : 2 * C::kAPitch;  // bytes
      const int r0 = tid / kRowChunks, colb = (tid % kRowChunks) * 16;
      const int64_t ldb = kF8 ? p.ldx_bytes : 2 * p.ldx;
      const uint8_t* xb = static_cast<const uint8_t*>(p.x);
      const uint8_t* src0 = xb + (m0 + r0) * ldb + k0 * (kF8 ? 1 : 2) + colb;
      const bool kvalid = k0 + colb / (kF8 ? 1 : 2) < p.K;
#pragma unroll
      for (int i = 0; i < C::kBM / kRowsPerPass; ++i) {
        const int r = r0 + i * kRowsPerPass;
        const bool valid = kvalid && m0 + r < p.M;
        cp_async16(as + r * kPitch + colb, valid ? src0 + i * kRowsPerPass * ldb : xb, valid);
      }
    }
    // B: kBTiles row tiles x 2 atoms, contiguous kAtomBytes*2 per tile (the packed order keeps a
    // tile's consecutive K vectors adjacent).
    // Chunk c = tid + 256 i: every i moves by the same number of tiles, so one base pointer and
    // the tile stride address all of a thread's chunks.
    uint8_t* bs = b_stage(s);
    constexpr int kChunksPerTile = 2 * kAtomBytes / 16;
    constexpr int kChunks = C::kBTiles * kChunksPerTile;
    static_assert(kChunks % C::kThreads == 0 || kChunks < C::kThreads, "B chunk split");
    const int tl0 = tid / kChunksPerTile, off = (tid % kChunksPerTile) * 16;
    const int64_t tile_stride = p.kvec * static_cast<int64_t>(kTr.slots) * 16;
    const uint8_t* src0 = p.wvals + (tile0 + tl0) * tile_stride +
                          (k0 / 32 / kApv) * static_cast<int64_t>(kTr.slots) * 16 + off;
    constexpr int kTilesPerPass = C::kThreads / kChunksPerTile;  // 0 when a tile has > 256 chunks
    static_assert(kTilesPerPass >= 1, "B tile larger than one pass");
#pragma unroll
    for (int i = 0; i < (kChunks + C::kThreads - 1) / C::kThreads; ++i) {
      if (kChunks >= C::kThreads || tid < kChunks) {
        const int tl = tl0 + i * kTilesPerPass;
        const bool valid = tile0 + tl < p.n16;
        const uint8_t* src = src0 + i * kTilesPerPass * tile_stride;
        cp_async16(bs + tl * 2 * kAtomBytes + off, valid ? src : p.wvals, valid);
      }
    }
  };

  uint32_t sraw[C::kItemsPerThread > 0 ? C::kItemsPerThread : 1];
  auto fetch_scales = [&](int kb) {
#pragma unroll
    for (int j = 0; j < C::kItemsPerThread; ++j) {
      const int i = tid + j * C::kThreads;
      sraw[j] = i < C::kItems ? tiled_scale_fetch<F, T, kAlt, kTok>(
                                    p, i, n0, m0, static_cast<int64_t>(kb) * C::kBK)
                              : 0u;
    }
  };
  auto store_scales = [&](int s) {
#pragma unroll
    for (int j = 0; j < C::kItemsPerThread; ++j) {
      const int i = tid + j * C::kThreads;
      if (i < C::kItems) tiled_scale_store<F, T, kAlt, kTok>(p, i, sraw[j], scale_area(s), lut);
    }
  };

  float acc[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  // FP8 MMA partials of the current 128-K group (two stages): written fresh by the group's first
  // MMAs, promoted to acc at the group's end.
  constexpr bool kF8P = kMode == TiledMode::kF8Promote;
  float pacc[kF8P ? kMT : 1][kF8P ? kNT : 1][4];

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < num_k) {
      load_stage(s, kb_begin + s);
      fetch_scales(kb_begin + s);
      store_scales(s);
    }
    cp_async_commit();
  }

  for (int kb = 0; kb < num_k; ++kb) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      // Scales of stage kb+kStages-2 (fetched last iteration) go to its slot, whose previous
      // stage (kb-2) every warp finished before the previous barrier; the stage is consumed
      // at least one barrier later. Then the copies and scale fetches of stage kb+kStages-1.
      const int nk = kb + kStages - 1;
      if (kb >= 1 && nk - 1 < num_k) store_scales((nk - 1) % kStages);
      if (nk < num_k) {
        load_stage(nk % kStages, kb_begin + nk);
        fetch_scales(kb_begin + nk);
      }
      cp_async_commit();
    }
    const int s = static_cast<int>(kb % kStages);
    const uint8_t* as = a_stage(s);
    const uint8_t* bs = b_stage(s);
    const uint32_t* sa = scale_area(s);
    const float* wsa = reinterpret_cast<const float*>(sa);
    const float* xsa = reinterpret_cast<const float*>(sa + C::kWWords);

    if constexpr (kMode == TiledMode::kF8Promote) {
      // Per-tensor / block FP8: atom by atom into the group partials (the first atom of a group
      // starts them from zero), promoted once per 128-K group: one FFMA per output element per
      // four k32 MMAs.
      auto f8_atom = [&](auto fresh, int at) {
        uint32_t af[4][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          const int row = wm * 64 + mt * 16 + (lane & 15);
          ldmatrix_x4(af[mt], as + row * C::kAPitchF8 + at * 32 + (lane >> 4) * 16);
        }
#pragma unroll
        for (int ar = 0; ar < kWN; ++ar) {
          const uint4 rv = *reinterpret_cast<const uint4*>(bs + (wn * kWN + ar) * 2 * kAtomBytes +
                                                           at * kAtomBytes + lane * 16);
          const uint32_t bw[4] = {rv.x, rv.y, rv.z, rv.w};
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int n2 = 0; n2 < 2; ++n2) {
              if constexpr (decltype(fresh)::value) {
                mma16832_e4m3_zero(pacc[mt][2 * ar + n2], af[mt], bw[n2], bw[2 + n2]);
              } else {
                mma16832_e4m3(pacc[mt][2 * ar + n2], af[mt], bw[n2], bw[2 + n2]);
              }
            }
        }
      };
      const int kabs = kb_begin + kb;  // absolute stage: groups are stages (2j, 2j+1)
      if ((kabs & 1) == 0 || kb == 0) {
        f8_atom(cuda::std::true_type{}, 0);
      } else {
        f8_atom(cuda::std::false_type{}, 0);
      }
      f8_atom(cuda::std::false_type{}, 1);
      if ((kabs & 1) != 0 || kb == num_k - 1) {
        // Block FP8: the group's activation x weight block scales (the warp's 32 rows lie in one
        // 128-row block).
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float sxw = 1.f;
            if constexpr (kGroup == 128)
              sxw = xsa[wm * 64 + mt * 16 + g + 8 * h] * wsa[(wn * kWRows) / 128];
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                acc[mt][nt][2 * h + e] = fmaf(pacc[mt][nt][2 * h + e], sxw, acc[mt][nt][2 * h + e]);
          }
      }
    } else if constexpr (kMode == TiledMode::kFold) {
      // Warp tile kWTok tokens x 32 rows (kWN = 2 weight tiles = 4 n8 tiles): a tile's
      // fragments are decoded once per k16 step and feed the warp's kMT m16 tiles.
      const uint16_t* ash = reinterpret_cast<const uint16_t*>(as);
      constexpr bool kFp4 = F != WFmt::kFp8Mx;
      // The lane's packed words. FP4: both atoms of a tile in one vector, atom 0 = (x: step 0,
      // y: step 1), atom 1 = (z, w). FP8 (one vector per atom): the k32 fragment, x/y = rows
      // g/g+8 of k 4t..4t+3 (step 0), z/w the same of k 16+4t.. (step 1).
      uint4 rv[kWN];
      if constexpr (kFp4) {
#pragma unroll
        for (int ar = 0; ar < kWN; ++ar)
          rv[ar] =
              *reinterpret_cast<const uint4*>(bs + (wn * kWN + ar) * 2 * kAtomBytes + lane * 16);
      }
#pragma unroll
      for (int at = 0; at < 2; ++at) {
        if constexpr (!kFp4) {
#pragma unroll
          for (int ar = 0; ar < kWN; ++ar)
            rv[ar] = *reinterpret_cast<const uint4*>(bs + (wn * kWN + ar) * 2 * kAtomBytes +
                                                     at * kAtomBytes + lane * 16);
        }
        // 16-bit scale splats of rows g (h = 0) and g+8 (h = 1) of each tile for the atom's two
        // k16 steps: NVFP4 [16-group][row] (groups 2at, 2at+1), E8M0 [32-group][row].
        uint32_t sc[kWN][2][2];
#pragma unroll
        for (int ar = 0; ar < kWN; ++ar) {
          const int r = (wn * kWN + ar) * 16 + g;
#pragma unroll
          for (int st = 0; st < 2; ++st)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if constexpr (F == WFmt::kNvfp4) {
                sc[ar][st][h] = sa[(2 * at + st) * kBN + r + 8 * h];
              } else {
                sc[ar][st][h] = sa[at * kBN + r + 8 * h];
              }
            }
        }
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          uint32_t af[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            ldmatrix_x4(af[mt], ash + (wm * kWTok + mt * 16 + (lane & 15)) * C::kAPitch + at * 32 +
                                    st * 16 + (lane >> 4) * 8);
#pragma unroll
          for (int ar = 0; ar < kWN; ++ar) {
            uint32_t bf[4];  // a0..a3 of the 16-row tile = b0/b1 of its two n8 tiles
            if constexpr (kFp4) {
              const uint32_t w = at ? (st ? rv[ar].w : rv[ar].z) : (st ? rv[ar].y : rv[ar].x);
              uint32_t pairs[4];
              fp4_word_pairs<T>(w, pairs);
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const uint32_t bits = pairs[j];
                if constexpr (F == WFmt::kNvfp4) {
                  bf[j] = fma2<T>(bits, sc[ar][st][j & 1], kNegZero2<T>());
                } else {
                  // v * 2^-7 (exact), then times the E8M0 splat (exact within BF16's range).
                  bf[j] = fma2<T>(fma2<T>(bits, kFp4Unit2<T>(), kNegZero2<T>()), sc[ar][st][j & 1],
                                  kNegZero2<T>());
                }
              }
            } else {
              // MXFP8: the k32 fragment's bytes (k = 16st + 4t + 0..3) are this step's slots
              // (2t, 2t+1 | 8+2t, 9+2t) in the permuted k order of the activation pre-pass:
              // a0/a2 = bytes 0-1 / 2-3 of row g's word, a1/a3 the same of row g+8's. Each pair
              // decodes to v * 2^-7 (exact), then times the E8M0 splat.
              const uint32_t w0 = st ? rv[ar].z : rv[ar].x;
              const uint32_t w1 = st ? rv[ar].w : rv[ar].y;
              bf[0] = fma2<T>(fp8_pair_bf16(prmt(w0, 0, 0x4140u)), sc[ar][st][0], kNegZero2<T>());
              bf[2] = fma2<T>(fp8_pair_bf16(prmt(w0, 0, 0x4342u)), sc[ar][st][0], kNegZero2<T>());
              bf[1] = fma2<T>(fp8_pair_bf16(prmt(w1, 0, 0x4140u)), sc[ar][st][1], kNegZero2<T>());
              bf[3] = fma2<T>(fp8_pair_bf16(prmt(w1, 0, 0x4342u)), sc[ar][st][1], kNegZero2<T>());
            }
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
              for (int n2 = 0; n2 < 2; ++n2)
                mma16816<T>(acc[mt][2 * ar + n2], af[mt], bf[n2], bf[2 + n2]);
          }
        }
      }
    } else {
      // kGroup: 2 x 4 warps of 64 x 16kWN; fp32 weight group scales on per-tile temporaries.
#pragma unroll
      for (int at = 0; at < 2; ++at) {  // atom (32 k) within the stage
        // A fragments for 4 m16 tiles x 2 k16 steps.
        uint32_t af[4][2][4];
        const uint16_t* ash = reinterpret_cast<const uint16_t*>(as);
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int st = 0; st < 2; ++st) {
            const int row = wm * 64 + mt * 16 + (lane & 15);
            const int col = at * 32 + st * 16 + (lane >> 4) * 8;
            ldmatrix_x4(af[mt][st], ash + row * C::kAPitch + col);
          }
#pragma unroll
        for (int ar = 0; ar < kWN; ++ar) {
          // B fragments of weight tile tl -> its 2 n8 tiles, both k16 steps of the atom.
          const int tl = wn * kWN + ar;  // tile within the CTA
          const int slot = kIq2 ? g : lane;
          const uint8_t* ab = bs + tl * 2 * kAtomBytes;
          // Atom `at` lives in vector (at / kApv), part (at % kApv): with kApv == 2 both atoms
          // share one 16-byte lane vector; with kApv == 1 they are consecutive runs.
          uint4 rv;
          if constexpr (kApv == 2) {
            rv = *reinterpret_cast<const uint4*>(ab + slot * 16);
          } else {
            rv = *reinterpret_cast<const uint4*>(ab + at * kAtomBytes + slot * 16);
          }
          uint32_t bf[2][4];  // [step][a0..a3]
          if constexpr (F == WFmt::kMxfp4) {
            // FP16 MXFP4: v * 2^-7 here, the E8M0 scale in fp32 below.
            const uint32_t w[2] = {at ? rv.z : rv.x, at ? rv.w : rv.y};
            const uint32_t sc[2][2] = {{kFp4Unit2<T>(), kFp4Unit2<T>()},
                                       {kFp4Unit2<T>(), kFp4Unit2<T>()}};
            decode_fp4_atom<T>(w, sc, bf);
          } else if constexpr (F == WFmt::kQ8_0) {
            decode_byte_atom<T, true>(rv, bf);
          } else if constexpr (kIq2) {
            decode_iq2_atom<T>(rv, gtab, stab, t, bf);
          } else {
            decode_byte_atom<T, false>(rv, bf);
          }

          {
            // fp32 weight scales of rows (2t, 2t+1) of each n8 tile ([group][row] words).
#pragma unroll
            for (int sg = 0; sg < 2 / kScaleStep; ++sg) {
              const int gi = (at * 32 + sg * 16) / kGroup;  // group within the stage
              float ws[2][2];
#pragma unroll
              for (int n2 = 0; n2 < 2; ++n2) {
                const float2 v =
                    *reinterpret_cast<const float2*>(wsa + gi * kBN + tl * 16 + n2 * 8 + 2 * t);
                ws[n2][0] = v.x;
                ws[n2][1] = v.y;
              }
#pragma unroll
              for (int mt = 0; mt < 4; ++mt)
#pragma unroll
                for (int n2 = 0; n2 < 2; ++n2) {
                  float tmp[4];
                  mma16816_zero<T>(tmp, af[mt][sg * kScaleStep], bf[sg * kScaleStep][n2],
                                   bf[sg * kScaleStep][2 + n2]);
#pragma unroll
                  for (int st = sg * kScaleStep + 1; st < (sg + 1) * kScaleStep; ++st)
                    mma16816<T>(tmp, af[mt][st], bf[st][n2], bf[st][2 + n2]);
                  float* a = acc[mt][2 * ar + n2];
                  a[0] = fmaf(tmp[0], ws[n2][0], a[0]);
                  a[1] = fmaf(tmp[1], ws[n2][1], a[1]);
                  a[2] = fmaf(tmp[2], ws[n2][0], a[2]);
                  a[3] = fmaf(tmp[3], ws[n2][1], a[3]);
                }
            }
          }
        }
      }
    }  // !kF8
  }
  cp_async_wait<0>();
  griddep_launch_dependents();

  // Split-K over a cluster: ranks > 0 leave their accumulators in shared memory (64 floats per
  // thread at a time); rank 0 adds them over DSMEM, each rank's values as one batch of
  // independent loads. The second cluster barrier of each chunk keeps the ranks from
  // overwriting a chunk rank 0 is still reading.
  if (p.cluster_split > 1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();  // clusters need SM90+; the plan sets cluster_split only where dev.cc_major >= 9
#else
    __syncthreads();  // the pipeline buffers become the reduction buffer
    float* red = reinterpret_cast<float*>(smem);
    cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
    const unsigned rank = cl.block_rank();
#pragma unroll
    for (int c = 0; c < C::kAccPerThread / C::kRedChunk; ++c) {
#pragma unroll
      for (int idx = 0; idx < C::kRedChunk; ++idx) {
        const int a = c * C::kRedChunk + idx;
        red[idx * C::kThreads + tid] = acc[a / (kNT * 4)][(a / 4) % kNT][a % 4];
      }
      cl.sync();
      if (rank == 0) {
        for (unsigned r = 1; r < cl.num_blocks(); ++r) {
          const float* rr = cl.map_shared_rank(red, r);
#pragma unroll
          for (int idx = 0; idx < C::kRedChunk; ++idx) {
            const int a = c * C::kRedChunk + idx;
            acc[a / (kNT * 4)][(a / 4) % kNT][a % 4] += rr[idx * C::kThreads + tid];
          }
        }
      }
      cl.sync();
    }
    if (rank != 0) return;
#endif
  }

  // Epilogue: c0 = (token g, row 2t), c1 = (g, 2t+1), c2/c3 = token g+8. n is even, so a pair
  // is one 4-byte store when the output rows are 4-byte aligned (even ldo, aligned base).
  // MXFP8 weights decode to v * 2^-7 here (the host's out_mult has no 2^7 for FP8 formats).
  // A split over plain grid.z CTAs writes fp32 partials [z][M][NP] instead (NP is even), added
  // in z order by linear_reduce_kernel, which applies the rest; MXFP8's carry the 2^7 (exact).
  const bool partial = p.partial != nullptr;
  float* const part = partial ? p.partial + static_cast<int64_t>(blockIdx.z) * p.M * p.NP : nullptr;
  float mult = F == WFmt::kFp8Mx ? 128.f : 1.f;
  if (!partial) {
    mult *= p.out_mult;
    if (p.alpha != nullptr) mult *= *p.alpha;
  }
  const bool pair_ok = ((p.ldo & 1) == 0) && ((reinterpret_cast<uintptr_t>(p.out) & 3) == 0);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t m = m0 + wm * kWTok + mt * 16 + g + 8 * h;
        const int64_t n = n0 + wn * kWRows + nt * 8 + 2 * t;
        if (m >= p.M) continue;
        if (partial) {
          if (n < p.NP)
            *reinterpret_cast<float2*>(part + m * p.NP + n) =
                make_float2(acc[mt][nt][2 * h] * mult, acc[mt][nt][2 * h + 1] * mult);
          continue;
        }
        float v[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          v[e] = acc[mt][nt][2 * h + e] * mult;
          if (p.bias != nullptr && n + e < p.N) v[e] += load_out_type(p.bias, n + e, p.out_fp16);
        }
        if (pair_ok && n + 1 < p.N) {
          uint32_t bits;
          if (p.out_fp16) {
            bits = static_cast<uint32_t>(__half_as_ushort(__float2half_rn(v[0]))) |
                   (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(v[1]))) << 16);
          } else {
            bits = static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[0]))) |
                   (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v[1]))) << 16);
          }
          *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.out) + m * p.ldo + n) = bits;
        } else {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (n + e >= p.N) continue;
            if (p.out_fp16)
              store_out<true>(p.out, m * p.ldo + n + e, v[e]);
            else
              store_out<false>(p.out, m * p.ldo + n + e, v[e]);
          }
        }
      }
}

/// One CTA per SM (the 128-accumulator warp tiles use up to 255 registers).
template <WFmt F, class T, bool kAlt, int kTok>
__global__ void __launch_bounds__(256) linear_tiled_kernel(const LinearParams p) {
  linear_tiled_body<F, T, kAlt, kTok>(p);
}

/// Two CTAs per SM (<= 128 registers, 2 x the shared memory of one CTA on SM90): the fold configs
/// with 64 x 32 warp tiles (TiledCfg::kTwoCta), so that twice the warps hide the decode and
/// ldmatrix latencies.
template <WFmt F, class T, bool kAlt, int kTok>
__global__ void __launch_bounds__(256, 2) linear_tiled_kernel_2cta(const LinearParams p) {
  linear_tiled_body<F, T, kAlt, kTok>(p);
}

}  // namespace b12x::gemm::lin
