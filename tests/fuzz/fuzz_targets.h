// Bodies of the checkpoint fuzz targets, shared by the libFuzzer entry points (tests/fuzz/*.cc,
// built with -DB12X_BUILD_FUZZ=ON and clang) and the deterministic mutation test that runs in
// ctest without libFuzzer (tests/cpp/test_checkpoint_fuzz.cc).
//
// Contract checked: any byte string either parses, with every tensor range inside the input, or
// throws b12x::Error with kIoError / kInvalidArgument. Anything else (another exception, an
// out-of-bounds read under ASan, a crash) is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "b12x/checkpoint.h"
#include "b12x/status.h"

namespace b12x::fuzz {

inline bool allowed(const Error& e) {
  return e.code() == Status::kIoError || e.code() == Status::kInvalidArgument;
}

/// Returns 1 when the input parsed, 0 when it was rejected with an allowed error; aborts on a
/// broken invariant. Other exceptions propagate (the caller treats them as failures).
inline int safetensors_one(const uint8_t* data, size_t size) {
  try {
    const checkpoint::SafetensorsIndex idx =
        checkpoint::parse_safetensors(data, size, "fuzz.safetensors");
    uint64_t covered = 0;
    unsigned acc = 0;
    for (const auto& t : idx.tensors) {
      if (t.offset < idx.data_offset || t.offset > size || t.nbytes > size - t.offset) std::abort();
      covered += t.nbytes;
      // Touch the first and last byte of every range: ASan flags any escape.
      if (t.nbytes) acc += data[t.offset] + data[t.offset + t.nbytes - 1];
    }
    if (covered != size - idx.data_offset) std::abort();  // exact tiling was promised
    return 1 + static_cast<int>(acc & 0);
  } catch (const Error& e) {
    if (!allowed(e)) std::abort();
    return 0;
  }
}

/// Quantization configs: parse, then resolve a few typical module names.
inline int quant_config_one(const uint8_t* data, size_t size) {
  try {
    const checkpoint::QuantConfig c = checkpoint::QuantConfig::from_json(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz_config.json");
    for (const char* p :
         {"model.layers.0.self_attn.qkv_proj", "model.layers.0.mlp.experts",
          "language_model.model.layers.0.mlp.gate_up_proj", "lm_head", "model.norm"})
      try {
        c.resolve(p, std::string(p).find("experts") != std::string::npos);
      } catch (const Error& e) {
        if (!allowed(e)) std::abort();
      }
    (void)c.to_json();
    return 1;
  } catch (const Error& e) {
    if (!allowed(e) && e.code() != Status::kUnsupported) std::abort();
    return 0;
  }
}

}  // namespace b12x::fuzz
