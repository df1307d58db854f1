// b12x: checkpoints — a validating, memory-mapped safetensors reader and a writer, the
// quantization config of a checkpoint directory (config.json `quantization_config`, legacy
// hf_quant_config.json), vLLM-style layer-name resolution, and `inspect`.
//
// Every malformed or hostile file gets a b12x::Error (kIoError for I/O and malformed files,
// kInvalidArgument for bad caller input) naming the file, the tensor and the problem; nothing
// is read outside the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "b12x/gemm.h"
#include "b12x/moe.h"
#include "b12x/runtime.h"
#include "b12x/selection.h"
#include "b12x/status.h"
#include "b12x/types.h"

namespace b12x::checkpoint {

// ---- safetensors -------------------------------------------------------------------------------

/// Largest accepted JSON header (bytes after the 8-byte length prefix).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

/// One tensor of a safetensors file. Offsets are relative to the file start.
struct TensorInfo {
  std::string name;
  std::string st_dtype;        ///< safetensors spelling: "BF16", "F8_E4M3", "U8", ...
  int bits = 0;                ///< bits per element (4 for F4, 6 for F6_*)
  std::optional<DType> dtype;  ///< the b12x DType when one exists (F4 -> kFP4E2M1 in values)
  std::vector<int64_t> shape;
  uint64_t offset = 0;  ///< absolute byte offset in the file
  uint64_t nbytes = 0;
  int64_t numel() const;
};

/// Safetensors element type table: bits per element and b12x DType (nullopt = none).
/// Returns false for an unknown name.
bool safetensors_dtype_info(const std::string& st_dtype, int* bits, std::optional<DType>* dtype);
/// The safetensors name of a b12x DType ("BF16", ...); throws for packed GGML types (stored as U8).
const char* safetensors_dtype_name(DType t);

/// The parsed and validated header of a safetensors byte image (no data is touched).
struct SafetensorsIndex {
  std::vector<TensorInfo> tensors;                  ///< in header order
  std::map<std::string, std::string> metadata;      ///< "__metadata__" (string values only)
  uint64_t header_bytes = 0;                        ///< N of the 8-byte prefix
  uint64_t data_offset = 0;                         ///< 8 + N
  std::unordered_map<std::string, size_t> by_name;  ///< name -> index in `tensors`
};

/// Validates a whole safetensors image (`size` bytes at `data`); `source` names it in errors.
/// This is the parser the reader and the fuzz target use.
SafetensorsIndex parse_safetensors(const uint8_t* data, size_t size, const std::string& source);

/// A read-only, memory-mapped safetensors file. Views stay valid while any copy is alive.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return index_->tensors; }
  const std::map<std::string, std::string>& metadata() const { return index_->metadata; }
  uint64_t file_size() const;
  /// nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  /// Throws kInvalidArgument naming the file when absent.
  const TensorInfo& get(const std::string& name) const;
  /// Pointer to the tensor's bytes inside the mapping (nbytes long).
  const uint8_t* bytes(const TensorInfo& t) const;
  /// Zero-copy host view (device -1, contiguous). Throws kUnsupported for safetensors dtypes
  /// with no b12x DType (use bytes() for those).
  TensorRef view(const std::string& name) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> map_;
  std::shared_ptr<SafetensorsIndex> index_;
};

/// Builds a safetensors file in memory and writes it atomically (temp file + rename).
class SafetensorsWriter {
 public:
  /// Copies `nbytes` from `data`; nbytes must equal shape × element size.
  void add(const std::string& name, const std::string& st_dtype, std::vector<int64_t> shape,
           const void* data, size_t nbytes);
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
           size_t nbytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  /// The serialized file image.
  std::vector<uint8_t> serialize() const;
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name, st_dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// All tensors of a checkpoint directory (every *.safetensors file; names must be unique).
class CheckpointDir {
 public:
  static CheckpointDir open(const std::string& dir);
  const std::string& dir() const { return dir_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  /// (file index, tensor) for a name; nullptr when absent.
  const TensorInfo* find(const std::string& name, const SafetensorsFile** file = nullptr) const;
  std::vector<std::string> tensor_names() const;  ///< sorted

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::pair<size_t, size_t>> by_name_;
};

// ---- quantization config ----------------------------------------------------------------------

/// Quantization algorithm of one layer.
enum class QuantAlgo : int32_t {
  kNone = 0,        ///< unquantized (BF16/FP16 weights)
  kFP8 = 1,         ///< per-tensor FP8 E4M3, static activation scale (ModelOpt FP8)
  kFP8Block = 2,    ///< DeepSeek 128x128 block FP8, dynamic per-token-group activations
  kMXFP8 = 3,       ///< E4M3 + UE8M0/32
  kNVFP4 = 4,       ///< W4A4 NVFP4 (E2M1 + E4M3/16 + fp32 global)
  kW4A16NVFP4 = 5,  ///< NVFP4 weights, BF16 activations
  kMXFP4 = 6,       ///< E2M1 + UE8M0/32 (gpt-oss experts: BF16 activations; OCP-MX dense: W4A4)
  kQ8_0 = 7,        ///< GGML Q8_0, 32 values / 34 bytes
  kIQ2_XS = 8,      ///< GGML IQ2_XS, 256 values / 74 bytes
  kIQ2_XXS = 9,     ///< GGML IQ2_XXS, 256 values / 66 bytes
};
const char* quant_algo_name(QuantAlgo a) noexcept;  ///< "NVFP4", "W4A16_NVFP4", "FP8_BLOCK", ...
/// Parses a config spelling (case-insensitive: "NVFP4", "fp8", "W4A16_NVFP4", "Q8_0", ...);
/// throws kInvalidArgument naming `where` and the supported set for anything else.
QuantAlgo quant_algo_from_name(const std::string& name, const std::string& where);

struct LayerQuant {
  QuantAlgo algo = QuantAlgo::kNone;
  int group_size = 0;  ///< values per scale block (16 NVFP4, 32 MX/Q8_0, 256 IQ2, 128 block FP8)
  int block_payload_bytes = 0;   ///< GGML only (34 / 74 / 66)
  bool ggml_packing = false;     ///< `packing: "ggml"`
  int weight_block[2] = {0, 0};  ///< block FP8 [rows, cols]
  bool dynamic_activation = false;
  std::string matched;  ///< the config key that matched ("" for the global algo)
  bool quantized() const { return algo != QuantAlgo::kNone; }
};

/// Fused modules: {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": [...]} —
/// vLLM's packed_modules_mapping.
using PackedModules = std::map<std::string, std::vector<std::string>>;
/// The mapping most HF decoder models use.
const PackedModules& default_packed_modules();

/// The quantization configuration of a checkpoint.
class QuantConfig {
 public:
  /// Parses a config.json (`quantization_config`) or hf_quant_config.json (`quantization`) text.
  /// A config without quantization yields method "none". `source` names the text in errors.
  static QuantConfig from_json(const std::string& text, const std::string& source);
  /// Reads DIR/config.json, and DIR/hf_quant_config.json when config.json has no
  /// quantization_config (or does not exist).
  static QuantConfig from_dir(const std::string& dir);

  /// "none", "modelopt", "modelopt_mixed", "fp8", "fp8_block", "mxfp4".
  const std::string& method() const { return method_; }
  const LayerQuant& global() const { return global_; }
  const std::map<std::string, LayerQuant>& quantized_layers() const { return layers_; }
  const std::vector<std::string>& excluded() const { return exclude_; }
  const std::string& kv_cache_algo() const { return kv_cache_; }
  const std::string& source() const { return source_; }

  /// How the layer with module prefix `prefix` ("model.layers.0.self_attn.qkv_proj",
  /// "model.layers.3.mlp.experts") is quantized, resolved as vLLM does: exclusions, exact key,
  /// fused shards via `packed` (all shards must agree), the experts parent prefix, the
  /// qkv_proj/gate_up_proj shard fallback and `model.language_model.` <-> `language_model.model.`
  /// aliasing. `is_moe` selects the experts rule of the gpt-oss MXFP4 method. Throws
  /// kInvalidArgument for disagreeing shards and for quantized norm layers.
  LayerQuant resolve(const std::string& prefix, bool is_moe = false,
                     const PackedModules& packed = default_packed_modules()) const;

  /// A normalized JSON description (for the C ABI, Python and `inspect`).
  std::string to_json() const;

 private:
  std::string method_ = "none";
  std::string source_;
  LayerQuant global_;
  std::map<std::string, LayerQuant> layers_;
  std::vector<std::string> exclude_;
  std::string kv_cache_;
};

/// True for module names of normalization layers (…norm, …layernorm, ln_f, …).
bool is_norm_module(const std::string& prefix);
/// fnmatch-style match ('*' any run, '?' one char) used by exclude lists.
bool glob_match(const std::string& pattern, const std::string& text);

// ---- layers ------------------------------------------------------------------------------------

/// The tensors of one dense linear layer, validated against its LayerQuant (ModelOpt names:
/// weight, weight_scale, weight_scale_2, input_scale, bias; DeepSeek weight_scale_inv).
/// Views point into the mapped files (zero-copy) and stay valid while the CheckpointDir lives.
struct LinearWeights {
  std::string prefix;
  LayerQuant quant;
  int64_t n = 0, k = 0;        ///< logical weight shape [n, k] in values
  TensorRef weight;            ///< as stored: BF16/FP16/FP32, E4M3 [n,k], U8 packed FP4 [n,k/2],
                               ///< U8 GGML blocks [n, k/group, payload]
  TensorRef weight_scale;      ///< E4M3 [n,k/16] (NVFP4), U8/E8M0 [n,k/32] (MX), FP32 grid (block
                               ///< FP8); data == nullptr when none
  float weight_scale_2 = 0.f;  ///< NVFP4 global dequant scale (ModelOpt amax/2688) or the FP8
                               ///< per-tensor weight scale; 0 when absent
  float input_scale = 0.f;     ///< static activation scale; 0 when absent
  /// Per-tensor FP8: input_scale * weight_scale (the GEMM's fp32 output scale);
  /// W4A4 NVFP4: input_scale * weight_scale_2 (the per-call alpha). 0 otherwise.
  float output_scale = 0.f;
  TensorRef bias;
  std::vector<std::string> tensors;  ///< every tensor name used
  uint64_t bytes = 0;
};

/// Loads and validates a dense layer; kInvalidArgument names the tensor and the mismatch.
LinearWeights load_linear(const CheckpointDir& ckpt, const QuantConfig& config,
                          const std::string& prefix);
/// Same with the quantization given (e.g. one expert of a resolved MoE stack).
LinearWeights load_linear(const CheckpointDir& ckpt, const LayerQuant& quant,
                          const std::string& prefix);
/// Host fp32 [n, k] reconstruction of the weight (uses the b12x host codecs).
std::vector<float> dequantize_linear(const LinearWeights& w);

/// The selection policy's description of a loaded dense layer (kind linear, or embedding when
/// `embedding`), for `compute_capability` (0: answer for SM120).
selection::LayerDesc linear_layer_desc(const LinearWeights& w, DType io_dtype = DType::kBF16,
                                       int compute_capability = 0, bool embedding = false);

// ---- loading into the GEMM ---------------------------------------------------------------------

/// The gemm::LinearFormat of a selection path ("gemm.nvfp4_w4a4" -> kNvfp4, ...); throws
/// kInvalidArgument for paths that are not GEMMs.
gemm::LinearFormat gemm_format_for_path(const std::string& path);
/// The checkpoint tensors of `w` as a gemm::WeightSource for `format` (zero-copy host views; for
/// kFp8Tensor output_scale points at w.output_scale). `w` and its CheckpointDir must outlive the
/// source. Throws kInvalidArgument when the layer's quantization does not fit the format.
gemm::WeightSource gemm_weight_source(const LinearWeights& w, gemm::LinearFormat format);

/// A GGML layer (Q8_0 / IQ2_XS / IQ2_XXS) as a block-dtype [n, k] view over its stored
/// [n, k/group, payload] bytes: the weight of embedding_q8_0 and of the GGML GEMMs.
TensorRef ggml_weight_view(const LinearWeights& w);

/// Checkpoint layer -> packed GEMM weight on `device` (selects the path with the policy first;
/// throws kUnsupported with every reason when b12x cannot run the layer). Inline so the
/// checkpoint module does not link the GEMM unless this is used. For W4A4 NVFP4 pass
/// w.output_scale as the per-call alpha.
inline std::shared_ptr<gemm::PackedWeight> pack_linear(const LinearWeights& w, int device,
                                                       Stream stream,
                                                       DType io_dtype = DType::kBF16) {
  const DeviceInfo& di = device_info(device);
  selection::LayerDesc d = linear_layer_desc(w, io_dtype, di.cc_major * 10 + di.cc_minor);
  d.check_compiled_archs = true;
  const selection::Selection s = selection::select(d);
  if (!s.supported) throw Error(Status::kUnsupported, w.prefix + ": " + s.summary());
  return gemm::PackedWeight::pack(gemm_weight_source(w, gemm_format_for_path(s.path)), device,
                                  stream);
}

// ---- loading a stack of experts into the fused MoE ---------------------------------------------

struct MoeLoadOptions {
  selection::Activation activation = selection::Activation::kSiLU;
  DType params_dtype = DType::kBF16;  ///< activations (bf16 / fp16)
  int compute_capability = 0;         ///< 0: answer for SM120
  int64_t topk = 1;
  /// Activation format; kAuto = the checkpoint's (NVFP4 -> NVFP4, W4A16_NVFP4 -> BF16, MXFP4 ->
  /// the policy's preference).
  selection::ActFormat act = selection::ActFormat::kAuto;
  selection::EnvOverrides env = selection::EnvOverrides::from_process();
};

/// The experts of one MoE layer stacked into the fused MoE's source layout (host memory owned
/// here; `source` points into it): FC1 = [gate; up] per expert (vLLM's order, w13_layout w31) or
/// up only for non-gated layers; NVFP4 block scales in the 128x4 swizzle, per-expert globals and
/// reciprocal activation scales; MXFP4 plain E8M0 grids; GGML blocks as q8_0/iq2 views.
struct MoeExpertsSource {
  std::string prefix;
  LayerQuant quant;
  selection::Selection selection;  ///< the policy's answer (quant mode, source format, layout)
  int64_t num_experts = 0, hidden = 0, intermediate = 0;
  bool gated = true;
  moe::WeightsPlanArgs plan_args;  ///< ready for moe::plan_weights
  moe::SourceWeights source;       ///< views into the buffers below
  std::vector<uint8_t> w1, w1_scale, w2, w2_scale;
  std::vector<float> w1_global, a1_gscale, w2_global, a2_gscale;
};

/// Loads `prefix` ("model.layers.3.mlp.experts", per-expert <e>.{gate,up,down}_proj or
/// w1/w3/w2 tensors), validates every expert and asks the policy for the path; throws
/// kUnsupported with every reason when b12x cannot run the layer.
std::unique_ptr<MoeExpertsSource> load_moe_experts(const CheckpointDir& ckpt,
                                                   const QuantConfig& config,
                                                   const std::string& prefix,
                                                   const MoeLoadOptions& options = {});

/// moe::plan_weights + moe::prepare_weights on the current device: the host-side stack is staged
/// in temporary device memory first (prepare_weights reads its sources on the device), and freed
/// once prepared (synchronises `stream`; refused during capture). Defined in src/integration.
moe::WeightsPlan prepare_moe(const MoeExpertsSource& src, moe::PreparedExperts& out, Stream stream);

/// Maps a layer's quantization to the selection policy's weight / activation formats.
selection::WeightFormat weight_format_of(const LayerQuant& q, DType unquantized_dtype);
selection::ActFormat act_format_of(const LayerQuant& q, bool is_moe);

// ---- inspect -----------------------------------------------------------------------------------

struct InspectOptions {
  int compute_capability = 0;  ///< 0: answer for SM120
  int tp_size = 1;
  selection::EnvOverrides env = selection::EnvOverrides::from_process();
};

struct LayerReport {
  std::string name;            ///< module prefix ("model.layers.0.mlp.experts" for a MoE stack)
  std::string kind;            ///< linear, moe, embedding, norm, attention, other
  std::string format;          ///< "NVFP4", "BF16", "Q8_0", ... (quant algo or storage dtype)
  std::vector<int64_t> shape;  ///< logical [n, k]; MoE [E, hidden, intermediate]
  std::vector<std::string> tensors;
  uint64_t bytes = 0;
  bool has_selection = false;
  selection::Selection selection;
  std::string error;  ///< a checkpoint problem for this layer ("" when consistent)
};

struct InspectReport {
  std::string dir;
  std::string quant_method;
  std::vector<LayerReport> layers;
  uint64_t total_bytes = 0;
  int served = 0, not_served = 0, errors = 0;
  std::string to_json() const;
};

/// Every layer of a checkpoint directory, its format, bytes and b12x path (or why not).
/// Throws for unreadable/malformed files and configs; per-layer problems land in `error`.
InspectReport inspect(const std::string& dir, const InspectOptions& options = {});

// ---- quantize ----------------------------------------------------------------------------------

struct QuantizeOptions {
  QuantAlgo algo = QuantAlgo::kNVFP4;  ///< NVFP4, MXFP4, MXFP8, FP8, Q8_0, IQ2_XS, IQ2_XXS
  /// ECMAScript regexes searched in module prefixes; empty = every linear layer except
  /// embeddings, lm_head and routers.
  std::vector<std::string> layer_patterns;
  /// Calibrated activation amax: required for FP8 (static input scale); for NVFP4 it makes a
  /// W4A4 checkpoint, without it NVFP4 weights are written as W4A16_NVFP4.
  float input_amax = 0.f;
  /// Called after each tensor: (done, total, name).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct QuantizedLayer {
  std::string name;
  QuantAlgo algo = QuantAlgo::kNone;
  int64_t n = 0, k = 0;
  double rel_rms_error = 0;  ///< ||w - deq(q(w))|| / ||w||
  double max_abs_error = 0;
  double bound = 0;  ///< expected rel_rms bound of the format (quantize_error_bound)
  uint64_t bytes_in = 0, bytes_out = 0;
};

struct QuantizeReport {
  std::vector<QuantizedLayer> layers;
  std::vector<std::pair<std::string, std::string>> skipped;  ///< (tensor, why kept as is)
  uint64_t bytes_in = 0, bytes_out = 0;
};

/// Relative RMS error bound used in the summary for weights of roughly Gaussian rows.
double quantize_error_bound(QuantAlgo algo);

/// BF16/FP16/F32 safetensors in `in_dir` -> a ModelOpt MIXED_PRECISION checkpoint in `out_dir`
/// (quantized weights + scales + config.json with quantization_config; other files copied).
QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                   const QuantizeOptions& options);

}  // namespace b12x::checkpoint
