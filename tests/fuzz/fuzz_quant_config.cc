// libFuzzer entry point: config.json quantization parsing and layer-name resolution.
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  b12x::fuzz::quant_config_one(data, size);
  return 0;
}
