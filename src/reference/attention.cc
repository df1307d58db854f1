// CPU reference of paged attention and KV append (the oracle the GPU kernels are tested against).
//
// For each request b (q_len Lq = cu[b+1]-cu[b], kv length Lk = cache_seqlens[b]), query row i,
// head h (KV head h / (Hq/Hkv)): logits s_j = scale * k_descale * q·k_j over the visible keys
// j (j <= i + Lk - Lq, and j >= i + Lk - Lq - window_left when window_left >= 0), then
// out = v_descale * sum_j exp(s_j - m) v_j / (sum_j exp(s_j - m) + exp(sink - m)) and
// lse = log2(sum_j exp(s_j) + exp(sink)). Everything in fp64.
#include "b12x/reference/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "attention/paged_validate.h"
#include "b12x/status.h"
#include "formats/scalar.h"

namespace b12x::reference {
namespace {

double load_value(const TensorRef& t, int64_t offset) {
  switch (t.dtype) {
    case DType::kBF16:
      return fmt::bf16_bits_to_float(static_cast<const uint16_t*>(t.data)[offset]);
    case DType::kFP16:
      return fmt::fp16_bits_to_float(static_cast<const uint16_t*>(t.data)[offset]);
    case DType::kFP8E4M3:
      return fmt::e4m3_to_float(static_cast<const uint8_t*>(t.data)[offset]);
    case DType::kFP32:
      return static_cast<const float*>(t.data)[offset];
    case DType::kFP64:
      return static_cast<const double*>(t.data)[offset];
    default:
      B12X_FAIL(Status::kInternal, "reference attention: unexpected dtype ", dtype_name(t.dtype));
  }
}

void store_value(const TensorRef& t, int64_t offset, double v) {
  switch (t.dtype) {
    case DType::kBF16:
      static_cast<uint16_t*>(t.data)[offset] = fmt::float_to_bf16_bits(static_cast<float>(v));
      break;
    case DType::kFP16:
      static_cast<uint16_t*>(t.data)[offset] = fmt::float_to_fp16_bits(static_cast<float>(v));
      break;
    case DType::kFP32:
      static_cast<float*>(t.data)[offset] = static_cast<float>(v);
      break;
    case DType::kFP64:
      static_cast<double*>(t.data)[offset] = v;
      break;
    default:
      B12X_FAIL(Status::kInternal, "reference attention: unexpected dtype ", dtype_name(t.dtype));
  }
}

double scale_at(const TensorRef& t, int64_t b, int64_t h) {
  if (t.data == nullptr) return 1.0;
  int64_t sb = 0, sh = 0;
  attention::detail::scale_strides(t, &sb, &sh);
  return static_cast<const float*>(t.data)[b * sb + h * sh];
}

void check_host(const TensorRef& t, const char* op, const char* name) {
  if (t.data != nullptr) check_device(t, op, name, kHostDevice);
}

}  // namespace

void paged_attention(const attention::PagedArgs& args) {
  const char* op = "reference::paged_attention";
  // The reference accepts wider output types than the kernels; validate the rest as bind does.
  attention::PagedArgs v = args;
  if (v.out.data) {
    check_dtype(args.out, op, "out", {DType::kFP64, DType::kFP32, DType::kBF16, DType::kFP16});
    v.out.dtype = args.q.dtype;
  }
  if (v.lse.data) {
    check_dtype(args.lse, op, "lse", {DType::kFP64, DType::kFP32});
    v.lse.dtype = DType::kFP32;
  }
  const attention::detail::PagedShape s = attention::detail::validate_paged_args(v, op);
  for (const TensorRef* t :
       {&args.q, &args.k_cache, &args.v_cache, &args.out, &args.page_table, &args.cache_seqlens,
        &args.cu_seqlens_q, &args.k_descale, &args.v_descale, &args.sinks, &args.lse})
    check_host(*t, op, "tensor");

  const int32_t* cu = static_cast<const int32_t*>(args.cu_seqlens_q.data);
  const int32_t* lens = static_cast<const int32_t*>(args.cache_seqlens.data);
  const int32_t* table = static_cast<const int32_t*>(args.page_table.data);
  const int64_t group = s.num_q_heads / s.num_kv_heads;
  const double scale =
      args.softmax_scale > 0 ? args.softmax_scale : 1.0 / std::sqrt(double(s.head_dim_qk));
  const double kNegInf = -std::numeric_limits<double>::infinity();

  B12X_CHECK_ARG(cu[0] == 0, op, ": cu_seqlens_q[0]=", cu[0], " (supported: 0)");
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t lq = int64_t(cu[b + 1]) - cu[b];
    const int64_t lk = lens[b];
    B12X_CHECK_ARG(lq >= 0 && cu[b + 1] <= s.total_q, op, ": cu_seqlens_q[", b + 1, "]=", cu[b + 1],
                   " is below cu_seqlens_q[", b, "]=", cu[b], " or above T=", s.total_q);
    B12X_CHECK_ARG(lk >= lq && lk <= s.table_width * s.page_size, op, ": cache_seqlens[", b,
                   "]=", lk, " (supported: q_len=", lq,
                   " <= cache_seqlens <= W*page_size=", s.table_width * s.page_size, ")");
    for (int64_t p = 0; p < (lk + s.page_size - 1) / s.page_size; ++p) {
      const int32_t id = table[b * args.page_table.stride[0] + p];
      B12X_CHECK_ARG(id >= 0 && id < s.num_pages, op, ": page_table[", b, ", ", p, "]=", id,
                     " is not a page id (supported: 0..", s.num_pages - 1, ")");
    }
  }

  // The q heads of one KV head are computed together, so each K / V element is converted once
  // per (token, KV head) rather than once per q head (the tests' long contexts); every (token,
  // head) still accumulates its dot products, weights and output in the same order as one head
  // alone would.
  const int64_t dqk = s.head_dim_qk, dv = s.head_dim_vo;
  std::vector<double> logits, qv(group * dqk), kr(dqk), vr(dv), acc(group * dv), m(group),
      denom(group), sink(group);
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t lq = int64_t(cu[b + 1]) - cu[b];
    const int64_t lk = lens[b];
    logits.assign(group * lk, 0.0);
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t t = cu[b] + i;
      const int64_t diag = i + lk - lq;  // last visible key
      const int64_t first =
          args.window_left >= 0 ? std::max<int64_t>(0, diag - args.window_left) : 0;
      for (int64_t kvh = 0; kvh < s.num_kv_heads; ++kvh) {
        const double kd = scale_at(args.k_descale, b, kvh);
        const double vd = scale_at(args.v_descale, b, kvh);
        for (int64_t g = 0; g < group; ++g) {
          const int64_t h = kvh * group + g;
          for (int64_t d = 0; d < dqk; ++d)
            qv[g * dqk + d] = load_value(args.q, t * args.q.stride[0] + h * args.q.stride[1] + d);
          m[g] = kNegInf;
        }
        for (int64_t j = first; j <= diag; ++j) {
          const int64_t page = table[b * args.page_table.stride[0] + j / s.page_size];
          const int64_t koff = page * args.k_cache.stride[0] +
                               (j % s.page_size) * args.k_cache.stride[1] +
                               kvh * args.k_cache.stride[2];
          for (int64_t d = 0; d < dqk; ++d) kr[d] = load_value(args.k_cache, koff + d);
          for (int64_t g = 0; g < group; ++g) {
            double dot = 0;
            for (int64_t d = 0; d < dqk; ++d) dot += qv[g * dqk + d] * kr[d];
            logits[g * lk + j] = dot * kd * scale;
            m[g] = std::max(m[g], logits[g * lk + j]);
          }
        }
        const bool has_sink = args.sinks.data != nullptr;
        for (int64_t g = 0; g < group; ++g) {
          const int64_t h = kvh * group + g;
          sink[g] =
              has_sink ? static_cast<const float*>(args.sinks.data)[h * args.sinks.stride[0]] : 0.0;
          if (has_sink) m[g] = std::max(m[g], sink[g]);
          denom[g] = has_sink ? std::exp(sink[g] - m[g]) : 0.0;
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = first; j <= diag; ++j) {
          const int64_t page = table[b * args.page_table.stride[0] + j / s.page_size];
          const int64_t voff = page * args.v_cache.stride[0] +
                               (j % s.page_size) * args.v_cache.stride[1] +
                               kvh * args.v_cache.stride[2];
          for (int64_t d = 0; d < dv; ++d) vr[d] = load_value(args.v_cache, voff + d);
          for (int64_t g = 0; g < group; ++g) {
            const double p = std::exp(logits[g * lk + j] - m[g]);
            denom[g] += p;
            for (int64_t d = 0; d < dv; ++d) acc[g * dv + d] += p * vr[d];
          }
        }
        for (int64_t g = 0; g < group; ++g) {
          const int64_t h = kvh * group + g;
          const bool empty = !(denom[g] > 0);
          for (int64_t d = 0; d < dv; ++d)
            store_value(args.out,
                        t * args.out.stride[0] + h * args.out.stride[1] + d * args.out.stride[2],
                        empty ? 0.0 : acc[g * dv + d] * vd / denom[g]);
          if (args.lse.data) {
            const double lse = empty ? kNegInf : (m[g] + std::log(denom[g])) / std::log(2.0);
            store_value(args.lse, t * args.lse.stride[0] + h * args.lse.stride[1], lse);
          }
        }
      }
    }
  }
}

void append_kv(const TensorRef& k, const TensorRef& v, const TensorRef& k_cache,
               const TensorRef& v_cache, const TensorRef& slot_mapping, const TensorRef& k_scale,
               const TensorRef& v_scale) {
  const char* op = "reference::append_kv";
  for (const TensorRef* t : {&k, &v, &k_cache, &v_cache, &slot_mapping})
    check_defined(*t, op, "tensor");
  check_ndim(k, op, "k", 3);
  check_ndim(v, op, "v", 3);
  check_ndim(k_cache, op, "k_cache", 4);
  check_ndim(v_cache, op, "v_cache", 4);
  check_dtype(k, op, "k", {DType::kBF16, DType::kFP16});
  check_dtype(v, op, "v", {k.dtype});
  check_dtype(k_cache, op, "k_cache", {DType::kBF16, DType::kFP16, DType::kFP8E4M3});
  check_dtype(v_cache, op, "v_cache", {k_cache.dtype});
  check_dtype(slot_mapping, op, "slot_mapping", {DType::kInt64});
  const int64_t T = k.shape[0];
  check_shape(slot_mapping, op, "slot_mapping", {T});
  check_shape(k, op, "k", {T, k_cache.shape[2], k_cache.shape[3]});
  check_shape(v, op, "v", {T, v_cache.shape[2], v_cache.shape[3]});
  const bool fp8 = k_cache.dtype == DType::kFP8E4M3;
  if (fp8) {
    check_defined(k_scale, op, "k_scale");
    check_defined(v_scale, op, "v_scale");
    check_dtype(k_scale, op, "k_scale", {DType::kFP32});
    check_dtype(v_scale, op, "v_scale", {DType::kFP32});
  } else {
    check_dtype(k_cache, op, "k_cache", {k.dtype});
  }
  const int64_t ps = k_cache.shape[1];
  const int64_t cap = k_cache.shape[0] * ps;
  const float ks = fp8 ? *static_cast<const float*>(k_scale.data) : 1.f;
  const float vs = fp8 ? *static_cast<const float*>(v_scale.data) : 1.f;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = static_cast<const int64_t*>(slot_mapping.data)[t * slot_mapping.stride[0]];
    if (slot < 0) continue;
    B12X_CHECK_ARG(slot < cap, op, ": slot_mapping[", t, "]=", slot, " beyond the cache (", cap,
                   " slots)");
    const int64_t page = slot / ps, off = slot % ps;
    for (int pass = 0; pass < 2; ++pass) {
      const TensorRef& src = pass ? v : k;
      const TensorRef& dst = pass ? v_cache : k_cache;
      const float sc = pass ? vs : ks;
      for (int64_t h = 0; h < src.shape[1]; ++h)
        for (int64_t d = 0; d < src.shape[2]; ++d) {
          const float x = static_cast<float>(
              load_value(src, t * src.stride[0] + h * src.stride[1] + d * src.stride[2]));
          const int64_t o =
              page * dst.stride[0] + off * dst.stride[1] + h * dst.stride[2] + d * dst.stride[3];
          if (fp8)
            static_cast<uint8_t*>(dst.data)[o] = fmt::float_to_e4m3_satfinite(x / sc);
          else
            static_cast<uint16_t*>(dst.data)[o] = static_cast<const uint16_t*>(
                src.data)[t * src.stride[0] + h * src.stride[1] + d * src.stride[2]];
        }
    }
  }
}

}  // namespace b12x::reference
