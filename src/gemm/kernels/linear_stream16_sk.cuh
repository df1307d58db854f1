// M <= 16 stream-K block kernel (session 20, Plan::stream16_sk): NVFP4 / MXFP4 weights, BF16
// activations, the staged-once block kernel's per-vector work (s16_step: 2 tiles per warp, a
// register ring of kStreamDepth vectors) on an even share of the whole GEMM per CTA.
//
// Why: the staged-once kernel's grid is 8 x 2 tiles x one K range of a multiple of 4 vectors per
// CTA, one wave of at most 2 x SMs CTAs, so its per-CTA work comes in steps of 4 vectors x the
// row groups: 4096x4096 / 2048x7168 / 6144x4096 run 128 / 112 / 192 CTAs of 8 vectors (one CTA
// on most SMs), 14336x4096 / 4096x14336 224 of 16 (ideal 13.6). Here the work is the row groups
// (16 tiles) x kvec vectors laid out row group by row group, and CTA i takes vectors
// [i per, (i + 1) per) of it (per = p.stream_vp, the plan's ceil(work / slots)): every CTA the
// same share at any shape. A CTA's range crosses at most a few row-group boundaries; each piece
// (a segment: one row group, a K range) stages its activations (16 token rows x its vectors)
// once and builds its splats as the staged-once kernel does, its partial sums go to fp32 slot
// (CTA - the row group's first CTA), and the slots past a row group's last segment are written
// as zeros by that segment's CTA, so linear_reduce_kernel sums p.split slots for every row. The
// next segment's weights are requested before the current segment's partials are stored and its
// activations staged, so the ring stays fed across the boundary.
#pragma once

#include "gemm/kernels/linear_stream.cuh"

namespace b12x::gemm::lin {

/// Scale tasks per lane: (tile, row pair g, block of 4 vectors) over the at most per / 4 + 1
/// (unaligned) blocks a segment of per <= 16 vectors touches, 2 tiles per warp.
inline constexpr int kS16SkTasks = (2 * 8 * 5 + 31) / 32;
/// kCont: each warp's raw scale bytes of the next segment (per task: rows g and g + 8, 16 bytes
/// each).
inline constexpr int kS16SkRawWarp = kS16SkTasks * 32 * 32;

/// Dynamic shared memory of the stream-K kernel for at most `per` vectors per segment: the
/// staged-once kernel's layout (16 activation rows, then per warp 2 x per x 128 B of splats),
/// with kCont the raw scale bytes after it.
__host__ __device__ constexpr int s16_sk_smem(int per, bool cont = false) {
  return s16_once_smem(2, per) + (cont ? kStreamWarps * kS16SkRawWarp : 0);
}

/// One segment of a CTA's range: row group r (tiles 16 r ..), vectors [v0, v0 + len).
struct S16SkSeg {
  int64_t r, v0;
  int len;
};
__device__ __forceinline__ S16SkSeg s16_sk_seg(int64_t pos, int64_t end, int64_t kvec) {
  S16SkSeg s;
  s.r = pos / kvec;
  s.v0 = pos - s.r * kvec;
  const int64_t stop = end < (s.r + 1) * kvec ? end : (s.r + 1) * kvec;
  s.len = static_cast<int>(stop - pos);
  return s;
}

/// kCont (probe, var 8): the ring runs on across segments: the last 2 steps of a segment request
/// the next segment's first vectors into the slots they free (the slot of vector v is (2 (v + par)
/// % 2 + j) % 4, par the parity of the vectors before the segment in the CTA, so the next
/// segment's vectors land where its steps read them), and the next segment's scale bytes are
/// copied (cp.async) into shared memory at the current one's start, so a boundary costs the
/// activations' L2 round trip and the splats, not a DRAM round trip.
template <int kNt, bool kMx = false, bool kMxFree = false, bool kCont = false>
__global__ void __launch_bounds__(kStreamWarps * 32, 2)
    linear_stream16_sk_kernel(const LinearParams p) {
  static_assert(!kMxFree || kMx, "fold-free splats: MXFP4 only");
  constexpr int kTw = 2;
  constexpr int kDepth = kStreamDepth;
  constexpr int kAhead = kDepth / kTw;
  constexpr int kTasks = kS16SkTasks;
  extern __shared__ __align__(16) uint8_t dsm[];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int per = p.stream_vp, pitch = s16_once_pitch(per);
  const int64_t kvec = p.kvec;
  const int64_t work = (p.n16 + 15) / 16 * kvec;
  int64_t pos = static_cast<int64_t>(blockIdx.x) * per;
  const int64_t end = pos + per < work ? pos + per : work;
  uint8_t* const spw = dsm + 16 * pitch + warp * (kTw * per * 128);
  uint8_t* const rw = dsm + 16 * pitch + kStreamWarps * kTw * per * 128 + warp * kS16SkRawWarp;
  const uint16_t* const x = static_cast<const uint16_t*>(p.x);

  // A segment's per-warp range (the staged-once kernel's S16Range: its tiles' first vector
  // addresses and vector counts).
  auto seg_range = [&](const S16SkSeg& s, S16Range<kTw>& r) {
    r.vbase = s.v0;
    r.tpc = 16;
    r.row0 = s.r * 256;
    r.tile0 = s.r * 16 + warp * kTw;
    r.nch = 0;
#pragma unroll
    for (int j = 0; j < kTw; ++j) {
      const int64_t tile = r.tile0 + j;
      r.lim[j] = tile < p.n16 ? s.len : 0;
      r.wp[j] = p.wvals + (tile * kvec + s.v0) * 512 + lane * 16;
    }
  };
  // Scale task u of this lane for segment s: its global source (row g; row g + 8 is 8 rows on),
  // or nullptr where the tile does not exist or past the tasks (zero splats).
  auto task_src = [&](const S16SkSeg& s, const S16Range<kTw>& r, int u) -> const uint8_t* {
    const int b0 = static_cast<int>(s.v0 / 4);
    const int nb = static_cast<int>((s.v0 + s.len - 1) / 4) - b0 + 1;
    const int task = lane + 32 * u;
    const int b = task % nb, gg = (task / nb) % 8, j = task / (8 * nb);
    if (task >= kTw * 8 * nb || r.tile0 + j >= p.n16) return nullptr;
    return p.wscale + ((r.tile0 + j) * 16 + gg) * p.scale_ld + int64_t{b0 + b} * (kMx ? 8 : 16);
  };
  uint4 sw0[kCont ? 1 : kTasks], sw8[kCont ? 1 : kTasks];
  auto load_scales = [&](const S16SkSeg& s, const S16Range<kTw>& r) {
#pragma unroll
    for (int u = 0; u < kTasks; ++u) {
      const uint8_t* const sr = task_src(s, r, u);
      if constexpr (kCont) {
        uint8_t* const d = rw + (lane + 32 * u) * 32;
        if (sr == nullptr) {
          *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(d + 16) = make_uint4(0, 0, 0, 0);
        } else if constexpr (kMx) {
          const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(d));
          asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(sa), "l"(sr));
          asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(sa + 16),
                       "l"(sr + 8 * p.scale_ld));
        } else {
          s16_cp_async16(d, sr);
          s16_cp_async16(d + 16, sr + 8 * p.scale_ld);
        }
      } else {
        sw0[u] = sw8[u] = make_uint4(0, 0, 0, 0);
        if (sr == nullptr) continue;
        if constexpr (kMx) {
          const uint2 a = __ldg(reinterpret_cast<const uint2*>(sr));
          const uint2 c = __ldg(reinterpret_cast<const uint2*>(sr + 8 * p.scale_ld));
          sw0[u] = make_uint4(a.x, a.y, 0, 0);
          sw8[u] = make_uint4(c.x, c.y, 0, 0);
        } else {
          sw0[u] = __ldg(reinterpret_cast<const uint4*>(sr));
          sw8[u] = __ldg(reinterpret_cast<const uint4*>(sr + 8 * p.scale_ld));
        }
      }
    }
    if constexpr (kCont) asm volatile("cp.async.commit_group;");
  };
  // The segment's activations (16 token rows x len vectors; rows past M, K values past K zero)
  // and this warp's splat pairs ([tile][vector][g][step]) while they land (kCont: from the
  // scale bytes this lane copied, so no warp barrier).
  auto stage = [&](const S16SkSeg& s) {
    const int cpr = s.len * 8;
    const int64_t k0 = s.v0 * 64;
    for (int i = threadIdx.x; i < 16 * cpr; i += kStreamWarps * 32) {
      const int tok = i / cpr, kk = (i - tok * cpr) * 8;
      s16_stage_x8(p, x, tok, k0 + kk, dsm + tok * pitch + kk * 2);
    }
    asm volatile("cp.async.commit_group;");
    if constexpr (kCont) asm volatile("cp.async.wait_group 1;" ::: "memory");  // the scales
    const int b0 = static_cast<int>(s.v0 / 4);
    const int nb = static_cast<int>((s.v0 + s.len - 1) / 4) - b0 + 1;
#pragma unroll
    for (int u = 0; u < kTasks; ++u) {
      const int task = lane + 32 * u;
      if (task >= kTw * 8 * nb) break;
      const int b = task % nb, gg = (task / nb) % 8, j = task / (8 * nb);
      uint4 a0, a8;
      if constexpr (kCont) {
        a0 = *reinterpret_cast<const uint4*>(rw + task * 32);
        a8 = *reinterpret_cast<const uint4*>(rw + task * 32 + 16);
      } else {
        a0 = sw0[u];
        a8 = sw8[u];
      }
      const uint32_t r0[4] = {a0.x, a0.y, a0.z, a0.w};
      const uint32_t r8[4] = {a8.x, a8.y, a8.z, a8.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int lv = (b0 + b) * 4 + q - static_cast<int>(s.v0);
        if (lv < 0 || lv >= s.len) continue;
        uint4 o;
        if constexpr (kMx) {
          const int sh = 16 * (q & 1);
          const uint32_t wg = r0[q >> 1] >> sh, wg8 = r8[q >> 1] >> sh;
          auto splat = [](uint32_t e) {
            return kMxFree ? e8m0_bf16_splat_free(e) : e8m0_bf16_splat(e);
          };
          const uint32_t c0 = (splat(wg & 0xFFu) & 0xFFFFu) | (splat(wg8 & 0xFFu) << 16);
          const uint32_t c1 =
              (splat((wg >> 8) & 0xFFu) & 0xFFFFu) | (splat((wg8 >> 8) & 0xFFu) << 16);
          o = make_uint4(c0, c0, c1, c1);
        } else {
          o = make_uint4(s16_splat(r0[q], r8[q], 0), s16_splat(r0[q], r8[q], 1),
                         s16_splat(r0[q], r8[q], 2), s16_splat(r0[q], r8[q], 3));
        }
        *reinterpret_cast<uint4*>(spw + (j * per + lv) * 128 + gg * 16) = o;
      }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
  };

  S16SkSeg sg = s16_sk_seg(pos, end, kvec), nx = sg;
  S16Range<kTw> cr, nr;
  uint4 ring[kDepth];
  seg_range(sg, cr);
  load_scales(sg, cr);
  s16_ring_fill(ring, cr);
  griddep_wait();  // the activations (and alpha) belong to earlier kernels
  stage(sg);

  float mult = p.out_mult;
  if (p.alpha != nullptr) mult *= *p.alpha;
  const uint8_t* const xa =
      dsm + (((lane >> 4) & 1) * 8 + (lane & 7)) * pitch + ((lane >> 3) & 1) * 16;
  const uint8_t* const spl = spw + g * 16;
  int par = 0;  // kCont: the parity of the CTA's vectors before the segment
  while (true) {
    const bool more = pos + sg.len < end;
    if (kCont && more) {
      nx = s16_sk_seg(pos + sg.len, end, kvec);
      seg_range(nx, nr);
      load_scales(nx, nr);
    }
    float acc[kTw][kNt][4] = {};
    // Vector v of the segment on ring slots (2 jj + j) % 4, jj = (par + v) % 2 (a compile-time
    // constant per call); a refill past the segment takes the next segment's vector (kCont).
    auto step = [&]<int kJj>(int v) {
      s16_step<kTw, kNt, kMx && !kMxFree>(acc, ring, kJj, xa + v * 128, spl + v * 128, per * 128,
                                          cr, v + kAhead);
      if constexpr (kCont) {
        const int nv = v + kAhead - sg.len;
        if (more && nv >= 0) {
#pragma unroll
          for (int j = 0; j < kTw; ++j)
            if (nv < nr.lim[j])
              ring[(kJj * kTw + j) % kDepth] =
                  ldg_stream(nr.wp[j] + static_cast<int64_t>(nv) * 512);
        }
      }
    };
    // Blocks of 4 steps (straight-line code as in the staged-once kernel's loop; round 75 ran the
    // first version's pairs with a length check, whose kernel alone was slower at 14336x4096
    // than the default's kernel + reduce), then the tail.
    int v = 0;
    if (kCont && par) step.template operator()<1>(v++);
    for (; v + 4 <= sg.len; v += 4) {
      step.template operator()<0>(v);
      step.template operator()<1>(v + 1);
      step.template operator()<0>(v + 2);
      step.template operator()<1>(v + 3);
    }
    if (v + 2 <= sg.len) {
      step.template operator()<0>(v);
      step.template operator()<1>(v + 1);
      v += 2;
    }
    if (v < sg.len) step.template operator()<0>(v);
    if (kCont && more && sg.len == 1) {
      // The steps requested the next segment's vector 1 only: its vector 0 goes to the slots of
      // parity par + 1, which held the missing vector 1 of this one.
      auto first = [&]<int kJj>() {
#pragma unroll
        for (int j = 0; j < kTw; ++j)
          if (nr.lim[j] > 0) ring[(kJj * kTw + j) % kDepth] = ldg_stream(nr.wp[j]);
      };
      if (par)
        first.template operator()<0>();
      else
        first.template operator()<1>();
    }
    if (!kCont && more) {
      nx = s16_sk_seg(pos + sg.len, end, kvec);
      seg_range(nx, nr);
      load_scales(nx, nr);
      s16_ring_fill(ring, nr);  // in flight during the stores below
    }
    // Slot: this CTA's position among the row group's CTAs; the group's last segment zeroes the
    // slots after its own.
    const int64_t slot = static_cast<int64_t>(blockIdx.x) - sg.r * kvec / per;
    const bool last = sg.v0 + sg.len == kvec;
    const float zero[kNt][4] = {};
#pragma unroll
    for (int j = 0; j < kTw; ++j) {
      const int64_t tile = cr.tile0 + j;
      if (tile >= p.n16) continue;
      stream_store_tile<kNt>(p, acc[j], tile, slot, mult, g, t);
      if (last && p.partial != nullptr)
        for (int64_t z = slot + 1; z < p.split; ++z)
          stream_store_tile<kNt>(p, zero, tile, z, mult, g, t);
    }
    if (!more) break;
    pos += sg.len;
    par = (par + sg.len) & 1;
    sg = nx;
    cr = nr;
    __syncthreads();  // every warp is done with the staged activations
    stage(sg);
  }
  griddep_launch_dependents();
}

}  // namespace b12x::gemm::lin
