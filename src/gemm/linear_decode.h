// Host-side queries of the decode kernel's instances (defined in linear_decode.cu), beside
// linear_launch.h's launcher.
#pragma once

#include "gemm/linear_layout.h"

namespace b12x::gemm::lin {

/// True when the decode kernel of exactly this configuration exists (the pick that
/// launch_linear_decode runs for these LinearParams::decode_* fields; mma 0 / 1): host only, for
/// the plans and their tests.
bool decode_available(WFmt f, bool fp16, int nt, int ws, bool pipe, bool half, int deep, bool lean,
                      int mma = 0);
/// The one-buffer kernel with `ws` warps per tile at one token tile exists (kLean or not).
bool decode_ws_available(WFmt f, bool fp16, int ws);
/// The 4-warp grid's shared-staging kernel (kXsh; per-tensor FP8, `nt` token tiles) exists.
bool decode_xshare_available(WFmt f, bool fp16, int deep, int mma, int nt = 1);
/// The session-28 M = 1 variants (linear_decode_kernel's kVar: 1 MXFP8's groups on the MMA's
/// columns, 2 the weight scales in the ring, 3 both).
bool decode_var_available(WFmt f, bool fp16, int ws, int deep, int mma, int var);
/// Clusters of `xshare` such CTAs (`smem` bytes of dynamic shared memory each) resident at once
/// on `device` (cudaOccupancyMaxActiveClusters; 0 where none or no kernel). Host, plan time.
int decode_xshare_max_clusters(int device, WFmt f, int deep, int mma, int xshare, int64_t smem,
                               int nt = 1);

}  // namespace b12x::gemm::lin
