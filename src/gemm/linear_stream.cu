// M = 1 streaming kernel instantiations and launcher (kernels/linear_stream.cuh).
#include <algorithm>

#include "core/cuda_check.h"
#include "core/launch.h"
#include "gemm/kernels/linear_stream.cuh"
#include "gemm/linear_launch.h"

namespace b12x::gemm::lin {

// The plan's staging budget plus the kernel's static reduction buffer (red[2][warps][16] fp32)
// fit one SM12x block (99 KB).
static_assert(kStreamSmemBudget + sizeof(float) * 2 * kStreamWarps * 16 <= 101376,
              "stream kernel: staging budget + static shared memory exceed 99 KB");

namespace {

using StreamFn = void (*)(const LinearParams);

thread_local StreamLaunch t_last;  // last_stream_launch()

template <int kOcc>
StreamFn stream_fn(int parts) {
  switch (parts) {
    case 1:
      return &linear_stream_kernel<1, kOcc>;
    case 2:
      return &linear_stream_kernel<2, kOcc>;
    case 4:
      return &linear_stream_kernel<4, kOcc>;
    case 8:
      return &linear_stream_kernel<8, kOcc>;
    default:
      return nullptr;
  }
}

StreamFn pick_stream(WFmt f, bool fp16, int parts, int occ) {
  if (fp16 || f != WFmt::kNvfp4) return nullptr;
  return occ == 3 ? stream_fn<3>(parts) : occ == 2 ? stream_fn<2>(parts) : nullptr;
}

}  // namespace

StreamLaunch last_stream_launch() {
  return t_last;
}

bool stream_kernel_available(WFmt f, bool fp16, int parts, int occ) {
  return pick_stream(f, fp16, parts, occ) != nullptr;
}

int stream_vectors_per_part(int64_t kvec, int parts) {
  const int64_t per = (kvec + parts - 1) / parts;
  return static_cast<int>((per + kStreamDepth - 1) / kStreamDepth * kStreamDepth);
}

int64_t stream_smem_bytes(int64_t kvec, int parts) {
  return int64_t{parts} * stream_vectors_per_part(kvec, parts) * 64 * 2;  // staged BF16
}

int prepare_linear_stream(int device, WFmt f, int parts, int occ, int64_t smem) {
  const StreamFn k = pick_stream(f, false, parts, occ);
  B12X_ASSERT(k != nullptr, "no stream kernel for format ", static_cast<int>(f), " parts=", parts,
              " occ=", occ);
  const void* fn = reinterpret_cast<const void*>(k);
  const ::b12x::detail::DeviceScope scope(device);
  int blocks = 0;  // the opt-in and the occupancy query, memoized with the launches' opt-in
  B12X_CUDA_CHECK(
      ::b12x::detail::resident_ctas(fn, kStreamWarps * 32, static_cast<int>(smem), &blocks));
  return blocks;
}

void launch_linear_stream(WFmt f, int parts, int occ, int ctas, const LinearParams& p,
                          Stream stream) {
  const StreamFn k = pick_stream(f, false, parts, occ);
  B12X_ASSERT(k != nullptr, "no stream kernel for format ", static_cast<int>(f), " parts=", parts,
              " occ=", occ);
  B12X_ASSERT(p.M == 1 && p.act_kind == kActRaw16 && p.xs_kind == kXsNone &&
                  p.stream_vp == stream_vectors_per_part(p.kvec, parts),
              "stream kernel: M=", p.M, " act=", p.act_kind, " vp=", p.stream_vp);
  const int64_t smem = stream_smem_bytes(p.kvec, parts);
  if (smem > 48 * 1024)
    B12X_CUDA_CHECK(
        ::b12x::detail::opt_in_smem(reinterpret_cast<const void*>(k), static_cast<int>(smem)));
  const int64_t groups = (p.n16 + kStreamWarps / parts - 1) / (kStreamWarps / parts);
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>(ctas, groups));
  t_last = StreamLaunch{parts, occ, static_cast<int>(gx), t_last.serial + 1};
  B12X_CUDA_CHECK(b12x::detail::launch_ex(k, dim3(static_cast<unsigned>(gx)),
                                          dim3(kStreamWarps * 32), static_cast<size_t>(smem),
                                          stream, p.pdl != 0, dim3(1, 1, 1), p));
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::gemm::lin
