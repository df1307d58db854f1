// M = 1 streaming kernel instantiations and launcher (kernels/linear_stream.cuh).
#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_stream.cuh"
#include "gemm/linear_launch.h"

namespace b12x::gemm::lin {

namespace {

using StreamFn = void (*)(const LinearParams);

thread_local StreamLaunch t_last;  // last_stream_launch()

template <WFmt F, int kDepth, int kOcc>
StreamFn stream_fn_d(int parts) {
  switch (parts) {
    case 1:
      return &linear_stream_kernel<F, 1, kDepth, kOcc>;
    case 2:
      return &linear_stream_kernel<F, 2, kDepth, kOcc>;
    case 4:
      return &linear_stream_kernel<F, 4, kDepth, kOcc>;
    case 8:
      return &linear_stream_kernel<F, 8, kDepth, kOcc>;
    default:
      return nullptr;
  }
}

/// Instances: depth 4 with registers for 2 or 3 CTAs per SM, depth 8 for 2 (it spills at 3).
template <WFmt F>
StreamFn stream_fn(int parts, int depth, int occ) {
  if (depth == 4) return occ == 3 ? stream_fn_d<F, 4, 3>(parts) : stream_fn_d<F, 4, 2>(parts);
  if (depth == 8 && occ == 2) return stream_fn_d<F, 8, 2>(parts);
  return nullptr;
}

StreamFn pick_stream(WFmt f, bool fp16, int parts, int depth, int occ) {
  if (fp16) return nullptr;
  // occ 12 (probe): the no-math kernel (kMode 1, wrong output) of NVFP4, depth 4, 2 CTAs per SM.
  if (occ == 12 && depth == 4 && f == WFmt::kNvfp4)
    return parts == 2   ? &linear_stream_kernel<WFmt::kNvfp4, 2, 4, 2, 1>
           : parts == 8 ? &linear_stream_kernel<WFmt::kNvfp4, 8, 4, 2, 1>
                        : nullptr;
  // occ 22 / 23 (probe): NVFP4's arithmetic splats from block scale loads (kMode 2), depth 4,
  // registers for 2 / 3 CTAs per SM.
  if ((occ == 22 || occ == 23) && depth == 4 && f == WFmt::kNvfp4) {
    if (occ == 22)
      return parts == 1   ? &linear_stream_kernel<WFmt::kNvfp4, 1, 4, 2, 2>
             : parts == 2 ? &linear_stream_kernel<WFmt::kNvfp4, 2, 4, 2, 2>
             : parts == 4 ? &linear_stream_kernel<WFmt::kNvfp4, 4, 4, 2, 2>
             : parts == 8 ? &linear_stream_kernel<WFmt::kNvfp4, 8, 4, 2, 2>
                          : nullptr;
    return parts == 1   ? &linear_stream_kernel<WFmt::kNvfp4, 1, 4, 3, 2>
           : parts == 2 ? &linear_stream_kernel<WFmt::kNvfp4, 2, 4, 3, 2>
           : parts == 4 ? &linear_stream_kernel<WFmt::kNvfp4, 4, 4, 3, 2>
           : parts == 8 ? &linear_stream_kernel<WFmt::kNvfp4, 8, 4, 3, 2>
                        : nullptr;
  }
  if (f == WFmt::kNvfp4) return stream_fn<WFmt::kNvfp4>(parts, depth, occ);
  if (f == WFmt::kMxfp4) return stream_fn<WFmt::kMxfp4>(parts, depth, occ);
  // occ 32 (probe): per-tensor FP8 through FP16 MMAs (kMode 3), registers for 2 CTAs per SM.
  if (occ == 32 && f == WFmt::kFp8) {
    if (depth == 4)
      return parts == 1   ? &linear_stream_kernel<WFmt::kFp8, 1, 4, 2, 3>
             : parts == 2 ? &linear_stream_kernel<WFmt::kFp8, 2, 4, 2, 3>
             : parts == 4 ? &linear_stream_kernel<WFmt::kFp8, 4, 4, 2, 3>
             : parts == 8 ? &linear_stream_kernel<WFmt::kFp8, 8, 4, 2, 3>
                          : nullptr;
    if (depth == 8)
      return parts == 1   ? &linear_stream_kernel<WFmt::kFp8, 1, 8, 2, 3>
             : parts == 2 ? &linear_stream_kernel<WFmt::kFp8, 2, 8, 2, 3>
             : parts == 4 ? &linear_stream_kernel<WFmt::kFp8, 4, 8, 2, 3>
             : parts == 8 ? &linear_stream_kernel<WFmt::kFp8, 8, 8, 2, 3>
                          : nullptr;
    return nullptr;
  }
  if (f == WFmt::kFp8) return stream_fn<WFmt::kFp8>(parts, depth, occ);
  return nullptr;
}

}  // namespace

StreamLaunch last_stream_launch() {
  return t_last;
}

bool stream_kernel_available(WFmt f, bool fp16, int parts, int depth, int occ) {
  return pick_stream(f, fp16, parts, depth, occ) != nullptr;
}

int stream_vectors_per_part(int64_t kvec, int parts, int depth) {
  const int64_t per = (kvec + parts - 1) / parts;
  return static_cast<int>((per + depth - 1) / depth * depth);
}

int64_t stream_smem_bytes(WFmt f, int64_t kvec, int parts, int depth, int occ) {
  // Staged BF16 activations, 64 K per vector (FP4), or e4m3 bytes, 32 K per vector (FP8; FP16
  // with occ 32).
  return int64_t{parts} * stream_vectors_per_part(kvec, parts, depth) *
         (f == WFmt::kFp8 ? (occ == 32 ? 64 : 32) : 64 * 2);
}

int prepare_linear_stream(int device, WFmt f, int parts, int depth, int occ, int64_t smem) {
  const StreamFn k = pick_stream(f, false, parts, depth, occ);
  B12X_ASSERT(k != nullptr, "no stream kernel for format ", static_cast<int>(f), " parts=", parts,
              " depth=", depth, " occ=", occ);
  const void* fn = reinterpret_cast<const void*>(k);
  const ::b12x::detail::DeviceScope scope(device);
  if (smem > 48 * 1024) B12X_CUDA_CHECK(::b12x::detail::opt_in_smem(fn, static_cast<int>(smem)));
  int blocks = 0;
  B12X_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, kStreamWarps * 32,
                                                                static_cast<size_t>(smem)));
  return blocks;
}

void launch_linear_stream(WFmt f, int parts, int depth, int occ, int ctas, const LinearParams& p,
                          Stream stream) {
  const StreamFn k = pick_stream(f, false, parts, depth, occ);
  B12X_ASSERT(k != nullptr, "no stream kernel for format ", static_cast<int>(f), " parts=", parts,
              " depth=", depth, " occ=", occ);
  B12X_ASSERT(p.M == 1 && p.act_kind == (f == WFmt::kFp8 ? kActFp8 : kActRaw16) &&
                  p.xs_kind == kXsNone &&
                  p.stream_vp == stream_vectors_per_part(p.kvec, parts, depth),
              "stream kernel: M=", p.M, " act=", p.act_kind, " vp=", p.stream_vp);
  const int64_t smem = stream_smem_bytes(f, p.kvec, parts, depth, occ);
  if (smem > 48 * 1024)
    B12X_CUDA_CHECK(
        ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), static_cast<int>(smem)));
  const int64_t groups = (p.n16 + kStreamWarps / parts - 1) / (kStreamWarps / parts);
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>(ctas, groups));
  t_last = StreamLaunch{parts, depth, occ, static_cast<int>(gx), t_last.serial + 1};
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx)),
                                          dim3(kStreamWarps * 32), static_cast<size_t>(smem),
                                          stream, p.pdl != 0, dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
