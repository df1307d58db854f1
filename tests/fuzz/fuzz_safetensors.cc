// libFuzzer entry point: the safetensors header parser (JSON, dtype/shape/range validation).
//   cmake -DB12X_BUILD_FUZZ=ON ... && cmake --build . --target b12x_fuzz_safetensors
//   ./tests/fuzz/fuzz_safetensors tests/fuzz/corpus -max_total_time=60
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  b12x::fuzz::safetensors_one(data, size);
  return 0;
}
