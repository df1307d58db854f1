// Launcher of the Q8_0 embedding gather.
#include "embedding/embedding_launch.h"

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "embedding/kernels/embedding.cuh"

namespace b12x::embedding {

void launch_q8_0_embedding(const uint8_t* weight, int64_t row_stride_bytes, int64_t vocab,
                           int64_t dim, const void* ids, DType id_dtype, int64_t num_tokens,
                           void* out, DType out_dtype, int64_t out_row_stride, uint8_t* flags,
                           Stream stream) {
  auto s = reinterpret_cast<cudaStream_t>(stream);
  if (num_tokens <= 0) return;
  kernels::Params p{};
  p.weight = weight;
  p.row_stride_bytes = row_stride_bytes;
  p.vocab = vocab;
  p.nblocks = dim / kernels::kBlockValues;
  p.ids = ids;
  p.num_tokens = num_tokens;
  p.out = out;
  p.out_row_stride = out_row_stride;
  p.flags = flags;
  p.out_vec = reinterpret_cast<uintptr_t>(out) % 16 == 0 && out_row_stride % 8 == 0;
  const dim3 grid(
      static_cast<unsigned>(num_tokens),
      static_cast<unsigned>((p.nblocks + kernels::kSliceBlocks - 1) / kernels::kSliceBlocks));
  const bool bf16 = out_dtype == DType::kBF16;
  if (id_dtype == DType::kInt64) {
    if (bf16)
      kernels::q8_0_embedding_kernel<int64_t, true><<<grid, kernels::kThreads, 0, s>>>(p);
    else
      kernels::q8_0_embedding_kernel<int64_t, false><<<grid, kernels::kThreads, 0, s>>>(p);
  } else {
    if (bf16)
      kernels::q8_0_embedding_kernel<int32_t, true><<<grid, kernels::kThreads, 0, s>>>(p);
    else
      kernels::q8_0_embedding_kernel<int32_t, false><<<grid, kernels::kThreads, 0, s>>>(p);
  }
  B12X_CUDA_CHECK_LAUNCH();
}

}  // namespace b12x::embedding
