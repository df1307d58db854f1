// Uses the public C++ and C APIs of an installed b12x without any CUDA header.
#include <b12x/c_api.h>
#include <b12x/runtime.h>
#include <b12x/status.h>
#include <b12x/types.h>

#include <cstdio>

int main() {
  std::printf("b12x %s, compiled for %s, %d device(s)\n", b12x::version(),
              b12x::compiled_arch_string(), b12x::device_count());
  try {
    b12x::dtype_from_name("not-a-dtype");
    return 1;
  } catch (const b12x::Error& e) {
    std::printf("error path ok: %s\n", e.what());
  }
  return b12x_dtype_name(B12X_DTYPE_IQ2_XS)[0] == 'i' ? 0 : 1;
}
