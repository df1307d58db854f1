// Private helpers shared by the checkpoint sources, the C ABI and the CLI.
#pragma once

#include <string>

#include "b12x/checkpoint.h"
#include "checkpoint/json.h"

namespace b12x::checkpoint {

json::Value layer_quant_json(const LayerQuant& q);
/// Reads a whole (small) text file; kIoError naming the path on failure; `max_bytes` caps it.
std::string read_text_file(const std::string& path, size_t max_bytes = size_t{64} << 20);
/// True when `path` exists as a regular file.
bool file_exists(const std::string& path);

}  // namespace b12x::checkpoint
