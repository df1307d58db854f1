// Placeholder entry for the CLI; replaced by the full tool.
#include <cstdio>
#include "b12x/runtime.h"
int main() { std::printf("b12x %s\n", b12x::version()); return 0; }
