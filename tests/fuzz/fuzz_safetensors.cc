// libFuzzer entry point: the safetensors header parser (JSON, dtype/shape/range validation).
//   cmake -DB12X_BUILD_FUZZ=ON ... && cmake --build . --target b12x_fuzz_safetensors
//   mkdir work && ./tests/fuzz/fuzz_safetensors work ../tests/fuzz/corpus -max_total_time=60
// (libFuzzer adds new inputs to its first directory: keep the seed corpus second.)
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  b12x::fuzz::safetensors_one(data, size);
  return 0;
}
