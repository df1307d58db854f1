// Weight preparation of the linear GEMMs: checkpoint layouts -> the packed layout of
// gemm/linear_layout.h, done once on the host, then copied into owned device memory.
#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>

#include "b12x/gemm.h"
#include "b12x/runtime.h"
#include "core/cuda_check.h"
#include "formats/ggml.h"
#include "formats/scalar.h"
#include "formats/swizzle.h"
#include "gemm/linear_internal.h"

namespace b12x::gemm {

using lin::WFmt;

lin::WFmt weight_format(LinearFormat f) {
  switch (f) {
    case LinearFormat::kFp8Tensor:
      return WFmt::kFp8;
    case LinearFormat::kFp8Block:
      return WFmt::kFp8Block;
    case LinearFormat::kMxfp8:
      return WFmt::kFp8Mx;
    case LinearFormat::kNvfp4:
    case LinearFormat::kNvfp4W4A16:
      return WFmt::kNvfp4;
    case LinearFormat::kMxfp4:
    case LinearFormat::kMxfp4W4A8:
    case LinearFormat::kMxfp4W4A16:
      return WFmt::kMxfp4;
    case LinearFormat::kIq2Xxs:
      return WFmt::kIq2Xxs;
    case LinearFormat::kIq2Xs:
      return WFmt::kIq2Xs;
    case LinearFormat::kQ8_0:
      return WFmt::kQ8_0;
  }
  B12X_FAIL(Status::kInvalidArgument, "invalid linear format code ", static_cast<int>(f));
}

bool format_is_w4a4(LinearFormat f) {
  return f == LinearFormat::kNvfp4 || f == LinearFormat::kMxfp4;
}
bool format_quantizes_inside(LinearFormat f) {
  return f == LinearFormat::kFp8Block || f == LinearFormat::kMxfp8 || f == LinearFormat::kMxfp4W4A8;
}
bool format_raw_activations(LinearFormat f) {
  return f == LinearFormat::kNvfp4W4A16 || f == LinearFormat::kMxfp4W4A16 ||
         f == LinearFormat::kIq2Xxs || f == LinearFormat::kIq2Xs || f == LinearFormat::kQ8_0;
}

namespace {

/// Copy `rows` rows of `row_bytes` bytes (row stride from t) to the host.
std::vector<uint8_t> fetch_rows(const TensorRef& t, int64_t rows, int64_t row_bytes,
                                int64_t stride_bytes) {
  std::vector<uint8_t> h(static_cast<size_t>(rows * row_bytes));
  if (rows == 0 || row_bytes == 0) return h;
  if (t.device == kHostDevice) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(h.data() + r * row_bytes, static_cast<const uint8_t*>(t.data) + r * stride_bytes,
                  row_bytes);
  } else {
    B12X_CUDA_CHECK(cudaMemcpy2D(h.data(), row_bytes, t.data, stride_bytes, row_bytes, rows,
                                 cudaMemcpyDeviceToHost));
  }
  return h;
}

/// Contiguous tensor of at least `bytes` bytes -> host copy of the first `bytes`.
std::vector<uint8_t> fetch_flat(const TensorRef& t, int64_t bytes, const char* op,
                                const char* name) {
  B12X_CHECK_ARG(t.is_contiguous(), op, ": ", name, " must be contiguous, got ", t.describe());
  const int64_t have = t.numel() / dtype_block_values(t.dtype) * dtype_block_bytes(t.dtype);
  B12X_CHECK_ARG(have >= bytes, op, ": ", name, " holds ", have, " bytes, expected at least ",
                 bytes, " (", t.describe(), ")");
  return fetch_rows(t, 1, bytes, bytes);
}

float fetch_scalar(const TensorRef& t, const char* op, const char* name) {
  B12X_CHECK_ARG(t.data != nullptr, op, ": ", name, " is required (fp32[1])");
  check_dtype(t, op, name, {DType::kFP32});
  B12X_CHECK_ARG(t.numel() == 1, op, ": ", name, " must hold exactly one value, got ",
                 t.describe());
  float v = 0;
  if (t.device == kHostDevice)
    std::memcpy(&v, t.data, 4);
  else
    B12X_CUDA_CHECK(cudaMemcpy(&v, t.data, 4, cudaMemcpyDeviceToHost));
  return v;
}

struct WeightDims {
  int64_t N = 0, K = 0, row_bytes = 0;
};

WeightDims weight_dims(const WeightSource& src, const char* op) {
  const TensorRef& w = src.weight;
  check_defined(w, op, "weight");
  B12X_CHECK_ARG(w.data != nullptr, op, ": weight is missing");
  check_ndim(w, op, "weight", 2);
  check_inner_contiguous(w, op, "weight");
  WeightDims d;
  d.N = w.shape[0];
  const LinearFormat f = src.format;
  switch (weight_format(f)) {
    case WFmt::kNvfp4:
    case WFmt::kMxfp4:
      check_dtype(w, op, "weight", {DType::kUInt8, DType::kFP4E2M1});
      d.K = w.dtype == DType::kFP4E2M1 ? w.shape[1] : 2 * w.shape[1];
      d.row_bytes = d.K / 2;
      break;
    case WFmt::kFp8:
    case WFmt::kFp8Mx:
    case WFmt::kFp8Block:
      check_dtype(w, op, "weight", {DType::kFP8E4M3, DType::kUInt8});
      d.K = w.shape[1];
      d.row_bytes = d.K;
      break;
    case WFmt::kQ8_0:
    case WFmt::kIq2Xxs:
    case WFmt::kIq2Xs: {
      const DType bt = f == LinearFormat::kQ8_0    ? DType::kQ8_0
                       : f == LinearFormat::kIq2Xs ? DType::kIQ2_XS
                                                   : DType::kIQ2_XXS;
      check_dtype(w, op, "weight", {bt, DType::kUInt8});
      if (w.dtype == DType::kUInt8) {
        B12X_CHECK_ARG(w.shape[1] % dtype_block_bytes(bt) == 0, op, ": weight has ", w.shape[1],
                       " bytes per row, not a whole number of ", dtype_name(bt), " blocks (",
                       dtype_block_bytes(bt), " bytes)");
        d.K = w.shape[1] / dtype_block_bytes(bt) * dtype_block_values(bt);
      } else {
        d.K = w.shape[1];
      }
      d.row_bytes = d.K / dtype_block_values(bt) * dtype_block_bytes(bt);
      break;
    }
  }
  if (src.in_features > 0) {
    B12X_CHECK_ARG(src.in_features == d.K, op, ": in_features=", src.in_features,
                   " does not match the weight's K=", d.K);
  }
  B12X_CHECK_ARG(d.N > 0, op, ": weight has N=", d.N, " rows (must be > 0)");
  B12X_CHECK_ARG(d.K > 0 && d.K % format_k_multiple(f) == 0, op, ": K=", d.K,
                 " is not a positive multiple of ", format_k_multiple(f), " (", format_name(f),
                 " needs K % ", format_k_multiple(f), " == 0)");
  B12X_CHECK_ARG(d.N < (int64_t{1} << 31) && d.K < (int64_t{1} << 31), op, ": N=", d.N, " K=", d.K,
                 " exceed 2^31");
  return d;
}

/// Linear [N][cols] block scales from a linear or swizzled source.
std::vector<uint8_t> fetch_block_scales(const WeightSource& src, int64_t N, int64_t cols,
                                        std::initializer_list<DType> dts, const char* op) {
  const TensorRef& s = src.weight_scale;
  B12X_CHECK_ARG(s.data != nullptr, op, ": weight_scale is required for ", format_name(src.format));
  check_defined(s, op, "weight_scale");
  check_dtype(s, op, "weight_scale", dts);
  std::vector<uint8_t> out(static_cast<size_t>(N * cols));
  if (src.scale_swizzled) {
    const auto sw = fetch_flat(s, fmt::swizzled_scale_bytes(N, cols), op, "weight_scale");
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[r * cols + c] = sw[fmt::swizzled_scale_offset(r, c, cols)];
  } else {
    check_ndim(s, op, "weight_scale", 2);
    check_inner_contiguous(s, op, "weight_scale");
    B12X_CHECK_ARG(s.shape[0] == N && s.shape[1] >= cols, op, ": weight_scale has shape [",
                   s.shape[0], ", ", s.shape[1], "], expected [", N, ", ", cols,
                   "] (linear layout; set scale_swizzled for the 128x4 layout)");
    out = fetch_rows(s, N, cols, s.byte_stride(0));
  }
  return out;
}

}  // namespace

PackedHost pack_host(const WeightSource& src, const char* op) {
  const WeightDims d = weight_dims(src, op);
  PackedHost ph;
  ph.wfmt = weight_format(src.format);
  ph.geo = lin::make_geometry(ph.wfmt, d.N, d.K);
  const lin::Geometry& geo = ph.geo;
  const lin::WTraits tr = lin::wtraits(ph.wfmt);
  const auto w = fetch_rows(src.weight, d.N, d.row_bytes, src.weight.byte_stride(0));
  ph.values.assign(static_cast<size_t>(geo.values_bytes), 0);
  ph.scale.assign(static_cast<size_t>(geo.scale_rows * geo.scale_ld * geo.scale_elem), 0);
  ph.scale2.assign(static_cast<size_t>(geo.NP * geo.scale2_ld), 0);
  const int64_t N = d.N, K = d.K;
  const int64_t atoms = geo.KP / 32;

  switch (ph.wfmt) {
    case WFmt::kNvfp4:
    case WFmt::kMxfp4: {
      auto nib = [&](int64_t n, int64_t k) -> uint32_t {
        if (n >= N || k >= K) return 0;
        const uint8_t b = w[n * d.row_bytes + k / 2];
        return (k & 1) ? (b >> 4) : (b & 0xFu);
      };
      for (int64_t tile = 0; tile < geo.n16; ++tile)
        for (int64_t a = 0; a < atoms; ++a)
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane >> 2, t = lane & 3;
            uint32_t word[2] = {0, 0};
            for (int s = 0; s < 2; ++s)
              for (int j = 0; j < 4; ++j)
                for (int e = 0; e < 2; ++e) {
                  int r, k;
                  lin::frag_coord(g, t, s, j, e, &r, &k);
                  word[s] |= lin::fp4_place(nib(tile * 16 + r, a * 32 + k), j, e);
                }
            uint8_t* dst = ph.values.data() + lin::atom_offset(ph.wfmt, geo.kvec, tile, a, lane);
            std::memcpy(dst, word, 8);
          }
      if (ph.wfmt == WFmt::kNvfp4) {
        const auto sc =
            fetch_block_scales(src, N, K / 16, {DType::kFP8E4M3, DType::kUE4M3, DType::kUInt8}, op);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t c = 0; c < K / 16; ++c) {
            const uint8_t v = sc[n * (K / 16) + c];
            B12X_CHECK_ARG((v & 0x80u) == 0 || v == 0x80u, op, ": weight_scale[", n, ", ", c,
                           "] = 0x", std::hex, int(v), std::dec,
                           " is negative (NVFP4 block scales are unsigned E4M3)");
            ph.scale[n * geo.scale_ld + c] = v & 0x7Fu;
          }
        ph.global_scale = src.format == LinearFormat::kNvfp4W4A16 ? src.global_scale : 1.f;
      } else {
        const auto sc = fetch_block_scales(src, N, K / 32, {DType::kUE8M0, DType::kUInt8}, op);
        for (int64_t n = 0; n < geo.NP; ++n)
          for (int64_t c = 0; c < geo.scale_ld; ++c)
            ph.scale[n * geo.scale_ld + c] = (n < N && c < K / 32) ? sc[n * (K / 32) + c] : 127;
        ph.mx_fold_free = true;
        for (const uint8_t e : sc) ph.mx_fold_free = ph.mx_fold_free && (e <= 135 || e == 255);
      }
      break;
    }
    case WFmt::kFp8:
    case WFmt::kFp8Mx:
    case WFmt::kFp8Block:
    case WFmt::kQ8_0: {
      const bool q8 = ph.wfmt == WFmt::kQ8_0;
      auto byte = [&](int64_t n, int64_t k) -> uint32_t {
        if (n >= N || k >= K) return 0;
        if (q8) return w[n * d.row_bytes + (k / 32) * 34 + 2 + (k % 32)];
        return w[n * d.row_bytes + k];
      };
      for (int64_t tile = 0; tile < geo.n16; ++tile)
        for (int64_t a = 0; a < atoms; ++a)
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane >> 2, t = lane & 3;
            uint32_t word[4] = {0, 0, 0, 0};
            if (q8) {
              for (int s = 0; s < 2; ++s)
                for (int h = 0; h < 2; ++h) {
                  const int64_t k0 = a * 32 + 16 * s + 8 * h + 2 * t;
                  const int64_t r0 = tile * 16 + g;
                  word[2 * s + h] = byte(r0, k0) | (byte(r0, k0 + 1) << 8) |
                                    (byte(r0 + 8, k0) << 16) | (byte(r0 + 8, k0 + 1) << 24);
                }
            } else {
              for (int j = 0; j < 4; ++j)
                for (int e = 0; e < 4; ++e) {
                  int r, k;
                  lin::frag_coord_k32(g, t, j, e, &r, &k);
                  word[j] |= byte(tile * 16 + r, a * 32 + k) << (8 * e);
                }
            }
            std::memcpy(ph.values.data() + lin::atom_offset(ph.wfmt, geo.kvec, tile, a, lane), word,
                        16);
          }
      if (ph.wfmt == WFmt::kFp8Mx) {
        const auto sc = fetch_block_scales(src, N, K / 32, {DType::kUE8M0, DType::kUInt8}, op);
        for (int64_t n = 0; n < geo.NP; ++n)
          for (int64_t c = 0; c < geo.scale_ld; ++c)
            ph.scale[n * geo.scale_ld + c] = (n < N && c < K / 32) ? sc[n * (K / 32) + c] : 127;
      } else if (ph.wfmt == WFmt::kFp8Block) {
        const TensorRef& s = src.weight_scale;
        B12X_CHECK_ARG(s.data != nullptr, op,
                       ": weight_scale (fp32 [ceil(N/128), ceil(K/128)]) "
                       "is required for fp8_block");
        check_defined(s, op, "weight_scale");
        check_dtype(s, op, "weight_scale", {DType::kFP32});
        check_ndim(s, op, "weight_scale", 2);
        check_inner_contiguous(s, op, "weight_scale");
        const int64_t br = (N + 127) / 128, bc = K / 128;
        B12X_CHECK_ARG(s.shape[0] == br && s.shape[1] == bc, op, ": weight_scale has shape [",
                       s.shape[0], ", ", s.shape[1], "], expected [", br, ", ", bc,
                       "] (ceil(N/128), K/128)");
        const auto sc = fetch_rows(s, br, bc * 4, s.byte_stride(0));
        float* dst = reinterpret_cast<float*>(ph.scale.data());
        for (int64_t r = 0; r < geo.scale_rows; ++r)
          for (int64_t c = 0; c < geo.scale_ld; ++c) {
            float v = 0.f;
            if (r < br && c < bc) std::memcpy(&v, sc.data() + (r * bc + c) * 4, 4);
            dst[r * geo.scale_ld + c] = v;
          }
      } else if (q8) {
        uint16_t* dst = reinterpret_cast<uint16_t*>(ph.scale.data());
        for (int64_t n = 0; n < N; ++n)
          for (int64_t c = 0; c < K / 32; ++c)
            dst[n * geo.scale_ld + c] = fmt::ggml::load_u16(&w[n * d.row_bytes + c * 34]);
      } else {
        ph.output_scale = fetch_scalar(src.output_scale, op, "output_scale");
      }
      break;
    }
    case WFmt::kIq2Xxs:
    case WFmt::kIq2Xs: {
      const bool xs = ph.wfmt == WFmt::kIq2Xs;
      const int bb = xs ? 74 : 66;
      // entry of 8-value group q8 (= k / 8) of row n: grid index | sign7 << 9
      auto entry = [&](int64_t n, int64_t q8) -> uint32_t {
        if (n >= N || q8 * 8 >= K) return 0;
        const uint8_t* blk = &w[n * d.row_bytes + (q8 / 32) * bb];
        const int ib = static_cast<int>((q8 % 32) / 4), l = static_cast<int>(q8 % 4);
        if (xs) return fmt::ggml::load_u16(blk + 2 + 2 * (4 * ib + l));
        const uint32_t w0 = fmt::ggml::load_u32(blk + 2 + 8 * ib);
        const uint32_t w1 = fmt::ggml::load_u32(blk + 2 + 8 * ib + 4);
        return ((w0 >> (8 * l)) & 0xFFu) | (((w1 >> (7 * l)) & 0x7Fu) << 9);
      };
      for (int64_t tile = 0; tile < geo.n16; ++tile)
        for (int64_t a = 0; a < atoms; ++a)
          for (int g = 0; g < 8; ++g) {
            uint16_t e[8];
            for (int half = 0; half < 2; ++half)
              for (int q = 0; q < 4; ++q)
                e[half * 4 + q] = static_cast<uint16_t>(entry(tile * 16 + g + 8 * half, a * 4 + q));
            std::memcpy(ph.values.data() + lin::atom_offset(ph.wfmt, geo.kvec, tile, a, g), e, 16);
          }
      uint16_t* dd = reinterpret_cast<uint16_t*>(ph.scale.data());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t b = 0; b < K / 256; ++b) {
          const uint8_t* blk = &w[n * d.row_bytes + b * bb];
          dd[n * geo.scale_ld + b] = fmt::ggml::load_u16(blk);
          if (xs) {
            for (int ib = 0; ib < 8; ++ib) ph.scale2[n * geo.scale2_ld + b * 8 + ib] = blk[66 + ib];
          } else {
            for (int ib = 0; ib < 8; ++ib) {
              const uint32_t s = fmt::ggml::load_u32(blk + 2 + 8 * ib + 4) >> 28;
              uint8_t& dst = ph.scale2[n * geo.scale2_ld + b * 4 + ib / 2];
              dst = static_cast<uint8_t>(dst | (s << (4 * (ib & 1))));
            }
          }
        }
      break;
    }
  }
  (void)tr;
  return ph;
}

namespace {

void upload(uint8_t* dst, const std::vector<uint8_t>& src, Stream stream) {
  if (src.empty()) return;
  B12X_CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size(), cudaMemcpyHostToDevice, stream));
}

struct DeviceGuard {
  int prev = -1;
  explicit DeviceGuard(int dev) {
    B12X_CUDA_CHECK(cudaGetDevice(&prev));
    if (prev != dev) B12X_CUDA_CHECK(cudaSetDevice(dev));
  }
  ~DeviceGuard() {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev) cudaSetDevice(prev);
  }
};

/// The host image into the packed weight's device arrays (pack and refresh; pack_host ran once).
void upload_packed(const PackedHost& ph, int device, uint8_t* values, PackedWeight::Impl& im,
                   Stream stream) {
  DeviceGuard guard(device);
  upload(values, ph.values, stream);
  upload(im.scale, ph.scale, stream);
  upload(im.scale2, ph.scale2, stream);
  B12X_CUDA_CHECK(
      cudaMemcpyAsync(im.output_scale, &ph.output_scale, 4, cudaMemcpyHostToDevice, stream));
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
  im.mx_fold_free = ph.mx_fold_free;
}

}  // namespace

std::shared_ptr<PackedWeight> PackedWeight::pack(const WeightSource& src, int device,
                                                 Stream stream) {
  const char* op = "gemm::PackedWeight::pack";
  refuse_during_capture(stream, op);
  PackedHost ph = pack_host(src, op);
  require_compiled_arch(device, op);
  DeviceGuard guard(device);
  std::shared_ptr<PackedWeight> pw(new PackedWeight());
  pw->impl_ = std::make_unique<Impl>();
  Impl& im = *pw->impl_;
  pw->format_ = src.format;
  pw->device_ = device;
  pw->N_ = ph.geo.N;
  pw->K_ = ph.geo.K;
  pw->KP_ = ph.geo.KP;
  im.wfmt = ph.wfmt;
  im.geo = ph.geo;
  im.scale_bytes = static_cast<int64_t>(ph.scale.size());
  im.scale2_bytes = static_cast<int64_t>(ph.scale2.size());
  im.mx_fold_free = ph.mx_fold_free;
  B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&pw->values_), ph.values.size()));
  if (im.scale_bytes)
    B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&im.scale), im.scale_bytes));
  if (im.scale2_bytes)
    B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&im.scale2), im.scale2_bytes));
  B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&im.output_scale), sizeof(float)));
  pw->bytes_ = static_cast<int64_t>(ph.values.size()) + im.scale_bytes + im.scale2_bytes + 4;
  pw->stream_bytes_ = static_cast<int64_t>(ph.values.size()) + im.scale_bytes + im.scale2_bytes;
  upload_packed(ph, pw->device_, pw->values_, im, stream);
  pw->global_scale_ = ph.global_scale;
  return pw;
}

void PackedWeight::refresh(const WeightSource& src, Stream stream) {
  const char* op = "gemm::PackedWeight::refresh";
  refuse_during_capture(stream, op);
  B12X_CHECK_ARG(src.format == format_, op, ": format ", format_name(src.format),
                 " differs from the packed weight's ", format_name(format_));
  PackedHost ph = pack_host(src, op);
  B12X_CHECK_ARG(ph.geo.N == N_ && ph.geo.K == K_, op, ": new weight is [", ph.geo.N, ", ",
                 ph.geo.K, "], the packed weight is [", N_, ", ", K_, "]");
  B12X_CHECK_ARG(!(impl_->bound_mx_free && impl_->mx_fold_free) || ph.mx_fold_free, op,
                 ": weight_scale has an E8M0 code above 135 (a scale above 2^8); the packed "
                 "weight's were all <= 135 and a plan with its fold-free decode bound it (captured "
                 "graphs keep that decode; supported: codes <= 135 here, or pack a new weight)");
  upload_packed(ph, device_, values_, *impl_, stream);
  global_scale_ = ph.global_scale;
}

std::shared_ptr<PackedWeight> PackedWeight::clone(Stream stream) const {
  const char* op = "gemm::PackedWeight::clone";
  refuse_during_capture(stream, op);
  DeviceGuard guard(device_);
  std::shared_ptr<PackedWeight> pw(new PackedWeight());
  pw->impl_ = std::make_unique<Impl>(*impl_);
  Impl& im = *pw->impl_;
  im.scale = im.scale2 = nullptr;
  im.output_scale = nullptr;
  im.bound_mx_free = false;
  pw->format_ = format_;
  pw->device_ = device_;
  pw->N_ = N_;
  pw->K_ = K_;
  pw->KP_ = KP_;
  pw->bytes_ = bytes_;
  pw->stream_bytes_ = stream_bytes_;
  pw->global_scale_ = global_scale_;
  B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&pw->values_), im.geo.values_bytes));
  B12X_CUDA_CHECK(
      cudaMemcpyAsync(pw->values_, values_, im.geo.values_bytes, cudaMemcpyDeviceToDevice, stream));
  if (im.scale_bytes) {
    B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&im.scale), im.scale_bytes));
    B12X_CUDA_CHECK(
        cudaMemcpyAsync(im.scale, impl_->scale, im.scale_bytes, cudaMemcpyDeviceToDevice, stream));
  }
  if (im.scale2_bytes) {
    B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&im.scale2), im.scale2_bytes));
    B12X_CUDA_CHECK(cudaMemcpyAsync(im.scale2, impl_->scale2, im.scale2_bytes,
                                    cudaMemcpyDeviceToDevice, stream));
  }
  B12X_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&im.output_scale), sizeof(float)));
  B12X_CUDA_CHECK(
      cudaMemcpyAsync(im.output_scale, impl_->output_scale, 4, cudaMemcpyDeviceToDevice, stream));
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
  return pw;
}

PackedWeight::~PackedWeight() {
  if (values_) cudaFree(values_);
  if (impl_) {
    if (impl_->scale) cudaFree(impl_->scale);
    if (impl_->scale2) cudaFree(impl_->scale2);
    if (impl_->output_scale) cudaFree(impl_->output_scale);
  }
}

}  // namespace b12x::gemm
