// safetensors: validating parser, memory-mapped reader, writer, checkpoint directories.
//
// Format: 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}}
// then the data section; offsets are relative to the data section, which must be covered
// exactly (no overlaps, no holes, no trailing bytes), as the reference implementation requires.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "b12x/checkpoint.h"
#include "b12x/status.h"
#include "checkpoint/internal.h"
#include "checkpoint/json.h"

namespace b12x::checkpoint {

namespace {

struct StDType {
  const char* name;
  int bits;
  int dtype;  // b12x DType value or -1
};
constexpr StDType kStDTypes[] = {
    {"BOOL", 8, -1},
    {"U8", 8, static_cast<int>(DType::kUInt8)},
    {"I8", 8, static_cast<int>(DType::kInt8)},
    {"F8_E5M2", 8, static_cast<int>(DType::kFP8E5M2)},
    {"F8_E4M3", 8, static_cast<int>(DType::kFP8E4M3)},
    {"F8_E8M0", 8, static_cast<int>(DType::kUE8M0)},
    {"I16", 16, -1},
    {"U16", 16, -1},
    {"F16", 16, static_cast<int>(DType::kFP16)},
    {"BF16", 16, static_cast<int>(DType::kBF16)},
    {"I32", 32, static_cast<int>(DType::kInt32)},
    {"U32", 32, -1},
    {"F32", 32, static_cast<int>(DType::kFP32)},
    {"F64", 64, static_cast<int>(DType::kFP64)},
    {"I64", 64, static_cast<int>(DType::kInt64)},
    {"U64", 64, -1},
    {"C64", 64, -1},
    {"F4", 4, static_cast<int>(DType::kFP4E2M1)},
    {"F6_E2M3", 6, -1},
    {"F6_E3M2", 6, -1},
};

std::string supported_dtypes() {
  std::string s;
  for (const auto& d : kStDTypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

constexpr int64_t kMaxElements = int64_t{1} << 60;  // far beyond any file; keeps bits*numel exact
constexpr size_t kMaxRank = 32;

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (n > kMaxElements / d)
      B12X_FAIL(Status::kIoError, where, ": shape product overflows (more than 2^60 elements)");
    n *= d;
  }
  return n;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool safetensors_dtype_info(const std::string& st_dtype, int* bits, std::optional<DType>* dtype) {
  for (const auto& d : kStDTypes)
    if (st_dtype == d.name) {
      if (bits) *bits = d.bits;
      if (dtype) {
        if (d.dtype >= 0)
          *dtype = static_cast<DType>(d.dtype);
        else
          dtype->reset();
      }
      return true;
    }
  return false;
}

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kStDTypes)
    if (d.dtype == static_cast<int>(t)) return d.name;
  if (t == DType::kUE4M3) return "F8_E4M3";
  B12X_FAIL(Status::kInvalidArgument, "safetensors: dtype ", dtype_name(t),
            " has no safetensors element type (GGML blocks are stored as U8 bytes)");
}

SafetensorsIndex parse_safetensors(const uint8_t* data, size_t size, const std::string& source) {
  if (size < 8 || data == nullptr)
    B12X_FAIL(Status::kIoError, source, ": file is ", size,
              " bytes, too short for the 8-byte safetensors header length");
  const uint64_t n = read_le64(data);
  if (n > kMaxSafetensorsHeaderBytes)
    B12X_FAIL(Status::kIoError, source, ": header length ", n, " exceeds the limit of ",
              kMaxSafetensorsHeaderBytes, " bytes (corrupt or not a safetensors file)");
  if (n > size - 8)
    B12X_FAIL(Status::kIoError, source, ": header length ", n, " runs past the end of the file (",
              size, " bytes; truncated file?)");
  if (n < 2 || data[8] != '{')
    B12X_FAIL(Status::kIoError, source, ": header does not start with a JSON object");

  SafetensorsIndex idx;
  idx.header_bytes = n;
  idx.data_offset = 8 + n;
  const uint64_t data_size = size - idx.data_offset;

  json::Value root;
  try {
    json::Limits lim;
    lim.max_depth = 16;
    lim.max_bytes = kMaxSafetensorsHeaderBytes;
    root = json::parse(std::string_view(reinterpret_cast<const char*>(data + 8), n),
                       source + " (safetensors header)", lim);
  } catch (const Error& e) {
    throw Error(Status::kIoError, e.what());
  }
  if (!root.is_object())
    B12X_FAIL(Status::kIoError, source, ": header is a JSON ", json::Value::type_name(root.type()),
              ", expected an object");

  for (const auto& [name, v] : root.as_object()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        B12X_FAIL(Status::kIoError, source, ": __metadata__ must be an object of strings, got a ",
                  json::Value::type_name(v.type()));
      for (const auto& [k, mv] : v.as_object()) {
        if (!mv.is_string())
          B12X_FAIL(Status::kIoError, source, ": __metadata__[\"", k,
                    "\"] must be a string, got a ", json::Value::type_name(mv.type()));
        idx.metadata[k] = mv.as_string();
      }
      continue;
    }
    const std::string where = source + ": tensor '" + name + "'";
    if (name.empty()) B12X_FAIL(Status::kIoError, source, ": a tensor has an empty name");
    if (!v.is_object())
      B12X_FAIL(Status::kIoError, where, ": entry must be an object, got a ",
                json::Value::type_name(v.type()));
    TensorInfo t;
    t.name = name;
    const json::Value *dt = nullptr, *shape = nullptr, *offs = nullptr;
    for (const auto& [k, fv] : v.as_object()) {
      if (k == "dtype")
        dt = &fv;
      else if (k == "shape")
        shape = &fv;
      else if (k == "data_offsets")
        offs = &fv;
      else
        B12X_FAIL(Status::kIoError, where, ": unknown field \"", k,
                  "\" (expected dtype, shape, data_offsets)");
    }
    if (!dt || !shape || !offs)
      B12X_FAIL(Status::kIoError, where, ": missing ",
                !dt ? "dtype" : (!shape ? "shape" : "data_offsets"));
    if (!dt->is_string()) B12X_FAIL(Status::kIoError, where, ": dtype must be a string");
    t.st_dtype = dt->as_string();
    if (!safetensors_dtype_info(t.st_dtype, &t.bits, &t.dtype))
      B12X_FAIL(Status::kIoError, where, ": unknown dtype \"", t.st_dtype,
                "\" (supported: ", supported_dtypes(), ")");
    if (!shape->is_array())
      B12X_FAIL(Status::kIoError, where, ": shape must be an array of non-negative integers");
    if (shape->as_array().size() > kMaxRank)
      B12X_FAIL(Status::kIoError, where, ": rank ", shape->as_array().size(),
                " exceeds the limit of ", kMaxRank);
    for (const auto& d : shape->as_array()) {
      if (!d.is_integer() || d.as_int() < 0)
        B12X_FAIL(Status::kIoError, where, ": shape entries must be non-negative integers, got ",
                  json::dump(d));
      t.shape.push_back(d.as_int());
    }
    if (!offs->is_array() || offs->as_array().size() != 2)
      B12X_FAIL(Status::kIoError, where, ": data_offsets must be [begin, end]");
    const auto& b = offs->as_array()[0];
    const auto& e = offs->as_array()[1];
    if (!b.is_integer() || !e.is_integer() || b.as_int() < 0 || e.as_int() < 0)
      B12X_FAIL(Status::kIoError, where, ": data_offsets must be non-negative integers, got ",
                json::dump(*offs));
    const uint64_t begin = static_cast<uint64_t>(b.as_int());
    const uint64_t end = static_cast<uint64_t>(e.as_int());
    if (begin > end)
      B12X_FAIL(Status::kIoError, where, ": data_offsets [", begin, ", ", end,
                "] has begin after end");
    if (end > data_size)
      B12X_FAIL(Status::kIoError, where, ": data_offsets [", begin, ", ", end,
                "] run past the data section (", data_size, " bytes; truncated file?)");
    const int64_t numel = checked_numel(t.shape, where);
    const uint64_t bits = static_cast<uint64_t>(numel) * static_cast<uint64_t>(t.bits);
    if (bits % 8 != 0)
      B12X_FAIL(Status::kIoError, where, ": ", numel, " elements of ", t.st_dtype, " (", t.bits,
                " bits) are not a whole number of bytes");
    if (bits / 8 != end - begin)
      B12X_FAIL(
          Status::kIoError, where, ": shape [",
          [&] {
            std::string s;
            for (size_t i = 0; i < t.shape.size(); ++i)
              s += (i ? ", " : "") + std::to_string(t.shape[i]);
            return s;
          }(),
          "] of ", t.st_dtype, " needs ", bits / 8, " bytes but data_offsets [", begin, ", ", end,
          "] span ", end - begin);
    t.offset = idx.data_offset + begin;
    t.nbytes = end - begin;
    idx.tensors.push_back(std::move(t));
  }

  // Ranges must tile the data section exactly.
  std::vector<const TensorInfo*> order;
  for (const auto& t : idx.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
  });
  uint64_t at = idx.data_offset;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : order) {
    if (t->offset < at)
      B12X_FAIL(Status::kIoError, source, ": tensor '", t->name, "' (bytes ",
                t->offset - idx.data_offset, "..", t->offset - idx.data_offset + t->nbytes,
                ") overlaps tensor '", prev ? prev->name : "?", "'");
    if (t->offset > at)
      B12X_FAIL(Status::kIoError, source, ": ", t->offset - at,
                " unreferenced bytes in the data section before tensor '", t->name, "'");
    at = t->offset + t->nbytes;
    prev = t;
  }
  if (at != size)
    B12X_FAIL(Status::kIoError, source, ": ", size - at,
              " trailing bytes after the last tensor in the data section");
  idx.by_name.reserve(idx.tensors.size());
  for (size_t i = 0; i < idx.tensors.size(); ++i) idx.by_name.emplace(idx.tensors[i].name, i);
  return idx;
}

// ---- reader ------------------------------------------------------------------------------------

struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) B12X_FAIL(Status::kIoError, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    B12X_FAIL(Status::kIoError, path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    B12X_FAIL(Status::kIoError, path, ": not a regular file");
  }
  auto m = std::make_shared<Mapping>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size > 0) {
    void* a = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      B12X_FAIL(Status::kIoError, path, ": mmap of ", m->size,
                " bytes failed: ", std::strerror(err));
    }
    m->addr = a;
  }
  ::close(fd);
  SafetensorsFile f;
  f.path_ = path;
  f.index_ = std::make_shared<SafetensorsIndex>(
      parse_safetensors(static_cast<const uint8_t*>(m->addr), m->size, path));
  f.map_ = std::move(m);
  return f;
}

uint64_t SafetensorsFile::file_size() const {
  return map_ ? map_->size : 0;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_->by_name.find(name);
  return it == index_->by_name.end() ? nullptr : &index_->tensors[it->second];
}

const TensorInfo& SafetensorsFile::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) B12X_FAIL(Status::kInvalidArgument, path_, ": no tensor named '", name, "'");
  return *t;
}

const uint8_t* SafetensorsFile::bytes(const TensorInfo& t) const {
  B12X_CHECK_ARG(t.offset + t.nbytes <= map_->size, path_, ": tensor '", t.name,
                 "' is not from this file");
  return static_cast<const uint8_t*>(map_->addr) + t.offset;
}

TensorRef SafetensorsFile::view(const std::string& name) const {
  const TensorInfo& t = get(name);
  if (!t.dtype)
    B12X_FAIL(Status::kUnsupported, path_, ": tensor '", name, "' has dtype ", t.st_dtype,
              " which has no b12x dtype; read its bytes instead");
  B12X_CHECK_ARG(t.shape.size() <= static_cast<size_t>(kMaxDims), path_, ": tensor '", name,
                 "' has rank ", t.shape.size(), " (views support up to ", kMaxDims, ")");
  if (*t.dtype == DType::kFP4E2M1 && !t.shape.empty())
    B12X_CHECK_ARG(t.shape.back() % 2 == 0, path_, ": tensor '", name,
                   "' (F4) has an odd last dimension ", t.shape.back(),
                   " and cannot be viewed as packed fp4 rows");
  return TensorRef::contiguous(const_cast<uint8_t*>(bytes(t)), *t.dtype,
                               static_cast<int>(t.shape.size()), t.shape.data());
}

// ---- writer ------------------------------------------------------------------------------------

void SafetensorsWriter::add(const std::string& name, const std::string& st_dtype,
                            std::vector<int64_t> shape, const void* data, size_t nbytes) {
  int bits = 0;
  B12X_CHECK_ARG(safetensors_dtype_info(st_dtype, &bits, nullptr), "SafetensorsWriter: tensor '",
                 name, "' has unknown dtype ", st_dtype, " (supported: ", supported_dtypes(), ")");
  B12X_CHECK_ARG(!name.empty() && name != "__metadata__", "SafetensorsWriter: invalid name '", name,
                 "'");
  for (const auto& e : entries_)
    B12X_CHECK_ARG(e.name != name, "SafetensorsWriter: duplicate tensor name '", name, "'");
  for (int64_t d : shape)
    B12X_CHECK_ARG(d >= 0, "SafetensorsWriter: tensor '", name, "' has a negative dimension");
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  B12X_CHECK_ARG(static_cast<uint64_t>(numel) * bits % 8 == 0 &&
                     static_cast<uint64_t>(numel) * bits / 8 == nbytes,
                 "SafetensorsWriter: tensor '", name, "' has ", numel, " elements of ", st_dtype,
                 " but ", nbytes, " bytes were given");
  Entry e;
  e.name = name;
  e.st_dtype = st_dtype;
  e.shape = std::move(shape);
  e.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + nbytes);
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data, size_t nbytes) {
  add(name, safetensors_dtype_name(dtype), std::move(shape), data, nbytes);
}

std::vector<uint8_t> SafetensorsWriter::serialize() const {
  json::Value root = json::Value::object();
  if (!metadata_.empty()) {
    json::Value m = json::Value::object();
    for (const auto& [k, v] : metadata_) m.set(k, json::Value::string(v));
    root.set("__metadata__", std::move(m));
  }
  uint64_t at = 0;
  for (const auto& e : entries_) {
    json::Value t = json::Value::object();
    t.set("dtype", json::Value::string(e.st_dtype));
    json::Value shape = json::Value::array();
    for (int64_t d : e.shape) shape.push(json::Value::integer(d));
    t.set("shape", std::move(shape));
    json::Value offs = json::Value::array();
    offs.push(json::Value::integer(static_cast<int64_t>(at)));
    offs.push(json::Value::integer(static_cast<int64_t>(at + e.data.size())));
    t.set("data_offsets", std::move(offs));
    root.set(e.name, std::move(t));
    at += e.data.size();
  }
  std::string header = json::dump(root);
  while (header.size() % 8 != 0) header += ' ';  // keeps the data section 8-byte aligned
  std::vector<uint8_t> out(8 + header.size() + at);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  uint8_t* p = out.data() + 8 + header.size();
  for (const auto& e : entries_) {
    if (!e.data.empty()) std::memcpy(p, e.data.data(), e.data.size());
    p += e.data.size();
  }
  return out;
}

void SafetensorsWriter::write(const std::string& path) const {
  const std::vector<uint8_t> image = serialize();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) B12X_FAIL(Status::kIoError, tmp, ": cannot create: ", std::strerror(errno));
    f.write(reinterpret_cast<const char*>(image.data()),
            static_cast<std::streamsize>(image.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      B12X_FAIL(Status::kIoError, tmp, ": write failed: ", std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    B12X_FAIL(Status::kIoError, path, ": cannot rename from ", tmp, ": ", std::strerror(err));
  }
}

// ---- directories -------------------------------------------------------------------------------

CheckpointDir CheckpointDir::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) B12X_FAIL(Status::kIoError, dir, ": not a directory");
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors" && e.is_regular_file(ec))
      paths.push_back(e.path().string());
  if (ec) B12X_FAIL(Status::kIoError, dir, ": cannot list: ", ec.message());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) B12X_FAIL(Status::kIoError, dir, ": no *.safetensors files");
  // A sharded checkpoint's index names the shards (other *.safetensors, e.g. Mistral's
  // consolidated copy, are not part of the HF layout) and where every tensor lives.
  std::map<std::string, std::string> weight_map;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  if (file_exists(index_path)) {
    json::Value idx;
    try {
      idx = json::parse(read_text_file(index_path), index_path);
    } catch (const Error& e) {
      throw Error(Status::kIoError, e.what());
    }
    const json::Value* wm = idx.find("weight_map");
    if (!wm || !wm->is_object())
      B12X_FAIL(Status::kIoError, index_path, ": needs a \"weight_map\" object");
    std::set<std::string> shards;
    for (const auto& [name, file] : wm->as_object()) {
      if (!file.is_string())
        B12X_FAIL(Status::kIoError, index_path, ": weight_map[\"", name, "\"] is not a string");
      const std::string& f = file.as_string();
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
          f == "." || f == "..")
        B12X_FAIL(Status::kIoError, index_path, ": weight_map[\"", name, "\"] = \"", f,
                  "\" is not a file name in the checkpoint directory");
      shards.insert(f);
      weight_map[name] = f;
    }
    paths.clear();
    for (const auto& f : shards) {
      const std::string p = (fs::path(dir) / f).string();
      if (!file_exists(p))
        B12X_FAIL(Status::kIoError, index_path, ": shard ", f, " does not exist");
      paths.push_back(p);
    }
    if (paths.empty()) B12X_FAIL(Status::kIoError, index_path, ": empty weight_map");
  }
  CheckpointDir c;
  c.dir_ = dir;
  for (const auto& p : paths) c.files_.push_back(SafetensorsFile::open(p));
  for (size_t f = 0; f < c.files_.size(); ++f)
    for (size_t i = 0; i < c.files_[f].tensors().size(); ++i) {
      const std::string& name = c.files_[f].tensors()[i].name;
      auto [it, inserted] = c.by_name_.emplace(name, std::make_pair(f, i));
      if (!inserted)
        B12X_FAIL(Status::kIoError, dir, ": tensor '", name, "' appears in both ",
                  c.files_[it->second.first].path(), " and ", c.files_[f].path());
    }
  for (const auto& [name, file] : weight_map) {
    auto it = c.by_name_.find(name);
    if (it == c.by_name_.end() ||
        fs::path(c.files_[it->second.first].path()).filename().string() != file)
      B12X_FAIL(Status::kIoError, index_path, ": tensor '", name, "' is mapped to ", file,
                it == c.by_name_.end() ? " but no shard holds it"
                                       : " but lives in " + c.files_[it->second.first].path());
  }
  return c;
}

const TensorInfo* CheckpointDir::find(const std::string& name, const SafetensorsFile** file) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return nullptr;
  if (file) *file = &files_[it->second.first];
  return &files_[it->second.first].tensors()[it->second.second];
}

std::vector<std::string> CheckpointDir::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& kv : by_name_) out.push_back(kv.first);
  return out;
}

}  // namespace b12x::checkpoint
