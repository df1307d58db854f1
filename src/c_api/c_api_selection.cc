// C ABI: the backend selection policy.
#include <cstring>
#include <string>

#include "b12x/c_api.h"
#include "b12x/selection.h"
#include "c_api/c_api_util.h"

using namespace b12x;
using namespace b12x::selection;

namespace {

void copy_str(const std::string& s, char* buf, size_t len, size_t* needed) {
  if (needed) *needed = s.size() + 1;
  if (buf && len > 0) {
    const size_t n = std::min(s.size(), len - 1);
    std::memcpy(buf, s.data(), n);
    buf[n] = 0;
  }
}

template <typename E>
E enum_arg(int32_t v, int32_t max, const char* what) {
  B12X_CHECK_ARG(v >= 0 && v <= max, "b12x_select: ", what, "=", v, " outside [0, ", max, "]");
  return static_cast<E>(v);
}

}  // namespace

extern "C" {

void b12x_layer_desc_init(b12x_layer_desc* d) {
  if (!d) return;
  std::memset(d, 0, sizeof(*d));
  const LayerDesc def;
  d->struct_size = sizeof(b12x_layer_desc);
  d->kind = static_cast<int32_t>(def.kind);
  d->weight_format = static_cast<int32_t>(def.weight);
  d->act_format = static_cast<int32_t>(def.act);
  d->io_dtype = static_cast<int32_t>(def.io_dtype);
  d->situ_beta = def.situ_beta;
  d->situ_linear_beta = def.situ_linear_beta;
  d->decoder_self_attention = 1;
  d->tp_size = 1;
  d->ep_size = 1;
  d->weight_block_128 = 1;
  d->static_input_scale = 1;
  d->moe_fp4_force_a16 = d->use_fp8_gemm = d->use_fp4_gemm = -1;
}

b12x_status b12x_select(const b12x_layer_desc* c, int32_t* supported, char* buf, size_t len,
                        size_t* needed) {
  return capi::guard([&] {
    B12X_CHECK_ARG(c != nullptr, "b12x_select: desc is NULL");
    B12X_CHECK_ARG(c->struct_size == static_cast<int32_t>(sizeof(b12x_layer_desc)),
                   "b12x_select: desc.struct_size=", c->struct_size,
                   " but this library's "
                   "b12x_layer_desc is ",
                   sizeof(b12x_layer_desc),
                   " bytes (call b12x_layer_desc_init; header/library mismatch?)");
    LayerDesc d;
    d.kind = enum_arg<LayerKind>(c->kind, 3, "kind");
    d.weight = enum_arg<WeightFormat>(c->weight_format, 13, "weight_format");
    d.act = enum_arg<ActFormat>(c->act_format, 6, "act_format");
    B12X_CHECK_ARG(c->io_dtype >= 0 && c->io_dtype < kNumDTypes,
                   "b12x_select: io_dtype=", c->io_dtype);
    d.io_dtype = static_cast<DType>(c->io_dtype);
    if (c->name) d.name = c->name;
    d.n = c->n;
    d.k = c->k;
    d.hidden = c->hidden;
    d.intermediate_per_rank = c->intermediate_per_rank;
    d.num_experts = c->num_experts;
    d.topk = c->topk;
    d.activation = enum_arg<Activation>(c->activation, 7, "activation");
    d.situ_beta = c->situ_beta;
    d.situ_linear_beta = c->situ_linear_beta;
    d.apply_router_weight_on_input = c->apply_router_weight_on_input != 0;
    d.has_expert_map = c->has_expert_map != 0;
    d.use_all2all = c->use_all2all != 0;
    d.use_eplb = c->use_eplb != 0;
    d.num_q_heads = c->num_q_heads;
    d.num_kv_heads = c->num_kv_heads;
    d.head_dim = c->head_dim;
    d.page_size = c->page_size;
    d.softmax_scale = c->softmax_scale;
    d.alibi = c->alibi != 0;
    d.softcap = c->softcap != 0;
    d.fused_output_quant = c->fused_output_quant != 0;
    d.decoder_self_attention = c->decoder_self_attention != 0;
    d.context_parallel = c->context_parallel != 0;
    d.tp_size = c->tp_size;
    d.ep_size = c->ep_size;
    d.has_bias = c->has_bias != 0;
    d.has_lora = c->has_lora != 0;
    d.weight_block_128 = c->weight_block_128 != 0;
    d.static_input_scale = c->static_input_scale != 0;
    d.compute_capability = c->compute_capability;
    d.check_compiled_archs = c->check_compiled_archs != 0;
    EnvOverrides env = EnvOverrides::from_process();
    if (c->moe_fp4_force_a16 >= 0) env.moe_fp4_force_a16 = c->moe_fp4_force_a16 != 0;
    if (c->use_fp8_gemm >= 0) env.use_fp8_gemm = c->use_fp8_gemm != 0;
    if (c->use_fp4_gemm >= 0) env.use_fp4_gemm = c->use_fp4_gemm != 0;
    const Selection s = select(d, env);
    if (supported) *supported = s.supported ? 1 : 0;
    copy_str(s.to_json(), buf, len, needed);
  });
}

}  // extern "C"
