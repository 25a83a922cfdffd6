#include "model/quantize.h"



#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <system_error>

#include "model/architecture.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/json_util.h"
#include "io/model_dir.h"
#include "io/output_dir.h"
#include "kernels/mxfp4.h"
#include "model/tensor_specs.h"

namespace tessera {

QuantizationConfig GptOssMxfp4QuantizationConfig() {
  QuantizationConfig q;
  q.quant_method = "mxfp4";
  q.modules_to_not_convert = {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                              "lm_head"};
  return q;
}

namespace {

namespace fs = std::filesystem;

// n elements of `dtype` (BF16, F16 or F32, little-endian, any alignment) -> floats, exactly.
void ToF32(DType dtype, const uint8_t* src, size_t n, float* dst) {
  switch (dtype) {
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = Bf16ToF32(h);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = F16ToF32(h);
      }
      return;
    case DType::kF32: std::memcpy(dst, src, 4 * n); return;
    default: TESSERA_CHECK(false);
  }
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Weight files are written, never copied: the output gets its own shards and index.
bool IsWeightFile(const std::string& name) {
  return EndsWith(name, ".safetensors") || EndsWith(name, ".safetensors.index.json");
}

// The files of the output directory a conversion of `dir` owns (replaces with overwrite): the
// weights, config.json, and the names of the input's other regular files, which it copies.
std::function<bool(const std::string&)> OwnedOutputFiles(const std::vector<std::string>& copied) {
  return [&copied](const std::string& name) {
    return IsWeightFile(name) || name == "config.json" || std::find(copied.begin(), copied.end(), name) != copied.end();
  };
}

// The regular files of `dir` a conversion copies (all but config.json and the weights), sorted.
std::vector<std::string> CopiedNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code entry_ec;  // a dangling symlink is neither a file nor a directory: skipped
    if (!entry.is_directory(entry_ec) && entry.is_regular_file(entry_ec) && name != "config.json" && !IsWeightFile(name)) {
      names.push_back(name);
    }
  }
  if (ec) Fail(dir, ": cannot list directory: ", ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

void RequireDistinct(const std::string& in_dir, const std::string& out_dir) {
  std::error_code ec_in, ec_out, ec;
  const fs::path a = fs::weakly_canonical(in_dir, ec_in), b = fs::weakly_canonical(out_dir, ec_out);
  bool same = !ec_in && !ec_out && a == b;
  // equivalent() also catches hard links and bind mounts; it needs both paths to exist.
  if (!same && fs::exists(in_dir, ec) && fs::exists(out_dir, ec)) same = fs::equivalent(in_dir, out_dir, ec) && !ec;
  if (same) Fail(out_dir, ": the output directory must differ from the input directory");
}

}  // namespace

void RequireDistinctDirs(const std::string& in_dir, const std::string& out_dir) { RequireDistinct(in_dir, out_dir); }

void CheckConvertedOutputDir(const std::string& in_dir, const std::string& out_dir, bool overwrite) {
  RequireDistinct(in_dir, out_dir);
  // A missing input is the input loader's to report (it names what is missing).
  std::error_code ec;
  const std::vector<std::string> copied = fs::is_directory(in_dir, ec) ? CopiedNames(in_dir) : std::vector<std::string>();
  PlanOutputDir(out_dir, overwrite, OwnedOutputFiles(copied));  // throws; changes nothing
}

void RefuseGguf(const std::string& in_dir, const std::string& what) {
  if (IsGgufPath(in_dir)) {
    Fail(in_dir, ": a GGUF file; ", what, " reads Hugging Face checkpoint directories (a GGUF file's own tensor types run as they are)");
  }
}

DenseFamilyInput OpenDenseFamilyInput(const std::string& in_dir, const std::string& out_dir, bool overwrite,
                                      const std::string& what, bool gpt_oss_mxfp4) {
  DenseFamilyInput in;
  RefuseGguf(in_dir, what);
  in.dir = ResolveModelDir(in_dir);
  CheckConvertedOutputDir(in.dir, out_dir, overwrite);
  in.config_path = in.dir + "/config.json";
  in.config = LoadModelConfig(in.dir);
  ValidateModelConfig(in.config, in.config_path);
  const bool gpt_oss = in.config.model_type == "gpt_oss";
  if (gpt_oss && !gpt_oss_mxfp4) {
    Fail(in.config_path, ": ", what, " applies to the dense families (gpt-oss ships MXFP4 experts)");
  }
  if (ArchitectureOf(in.config, in.config_path).attention == AttentionKind::kMla) {
    Fail(in.config_path, ": ", what, " is not supported for ", in.config.model_type,
         " yet (its int4 and sparse formats would not load: MLA checkpoints run as BF16 or FP8)");
  }
  if (!in.config.quantization.quant_method.empty() && !(gpt_oss && in.config.quantization.quant_method == "mxfp4")) {
    Fail(in.config_path, ": the checkpoint is already quantized (quantization_config.quant_method '",
         in.config.quantization.quant_method, "')");
  }
  return in;
}

void QuantizeDenseExperts(const TensorView& dense, uint8_t* blocks, uint8_t* scales) {
  const std::string& name = dense.name();
  const std::vector<int64_t>& shape = dense.shape();
  if (shape.size() != 3 || shape[1] % kMxfp4BlockSize != 0) {
    Fail(*dense.file, ": tensor ", Quote(name), ": shape ", ShapeToString(shape),
         " is not [experts, in, out] with in a multiple of the MXFP4 block size 32");
  }
  const DType dtype = dense.dtype();
  if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32) {
    Fail(*dense.file, ": tensor ", Quote(name), ": dtype ", DTypeName(dtype), " cannot be quantized (BF16, F16 or F32)");
  }
  const size_t experts = static_cast<size_t>(shape[0]), in = static_cast<size_t>(shape[1]);
  const size_t out = static_cast<size_t>(shape[2]);
  const size_t groups = in / kMxfp4BlockSize, esize = DTypeSize(dtype);
  // A task is one block row of inputs (32 consecutive `in` rows, each contiguous along `out`)
  // times a chunk of output columns: the 32 rows are read once, converted into a [32, kChunk]
  // float tile that stays in L1, and each column of the tile is one block of W[o, :].
  constexpr size_t kChunk = 128;
  const size_t chunks = (out + kChunk - 1) / kChunk;
  const size_t tasks = experts * groups * chunks;
  ThreadPool& pool = GlobalPool();
  std::vector<std::vector<float>> tiles(static_cast<size_t>(pool.num_threads()),
                                        std::vector<float>(kMxfp4BlockSize * kChunk));
  // Workers never throw: the smallest flat index of a non-finite element is reported afterwards.
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  std::atomic<uint64_t> first_bad{kNone};
  pool.Run(tasks, [&](size_t task, int thread) {
    const size_t c = task % chunks, g = (task / chunks) % groups, e = task / (chunks * groups);
    const size_t o0 = c * kChunk, n = std::min(kChunk, out - o0);
    float* tile = tiles[static_cast<size_t>(thread)].data();
    for (size_t j = 0; j < kMxfp4BlockSize; ++j) {
      const size_t row = e * in + g * kMxfp4BlockSize + j;
      ToF32(dtype, dense.data + (row * out + o0) * esize, n, tile + j * kChunk);
    }
    float block[kMxfp4BlockSize];
    uint8_t discard[kMxfp4BlockBytes];
    for (size_t k = 0; k < n; ++k) {
      for (size_t j = 0; j < kMxfp4BlockSize; ++j) block[j] = tile[j * kChunk + k];
      const size_t b = (e * out + o0 + k) * groups + g;  // block index in [E, out, in/32]
      uint8_t* codes = blocks != nullptr ? blocks + b * kMxfp4BlockBytes : discard;
      if (QuantizeMxfp4Block(block, codes, scales + b)) continue;
      for (size_t j = 0; j < kMxfp4BlockSize; ++j) {
        if (std::isfinite(block[j])) continue;
        const uint64_t flat = (e * in + g * kMxfp4BlockSize + j) * out + o0 + k;
        uint64_t seen = first_bad.load();
        while (flat < seen && !first_bad.compare_exchange_weak(seen, flat)) {
        }
        break;
      }
    }
  });
  const uint64_t bad = first_bad.load();
  if (bad != kNone) {
    float value;
    ToF32(dtype, dense.data + bad * esize, 1, &value);
    Fail(*dense.file, ": tensor ", Quote(name), ": element [", bad / (in * out), ", ", bad / out % in, ", ", bad % out,
         "] is ", value, "; MXFP4 cannot represent NaN or infinity");
  }
}

ConvertedModel WriteConvertedModel(const std::string& dir, const std::string& out_dir, std::vector<TensorToWrite> tensors,
                                   const nlohmann::json& out_json, bool overwrite, uint64_t max_shard_bytes,
                                   const std::function<void(uint64_t, uint64_t)>& progress) {
  ConvertedModel result;
  std::vector<std::pair<fs::path, uint64_t>> to_copy;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code entry_ec;  // a dangling symlink is neither a file nor a directory: skipped
    if (entry.is_directory(entry_ec)) {
      result.skipped.push_back(name + "/");
    } else if (!entry.is_regular_file(entry_ec)) {
      result.skipped.push_back(name);
    } else if (name != "config.json" && !IsWeightFile(name)) {
      result.copied_files.push_back(name);
      to_copy.emplace_back(entry.path(), entry.file_size(entry_ec));
    }
  }
  if (ec) Fail(dir, ": cannot list directory: ", ec.message());
  std::sort(result.copied_files.begin(), result.copied_files.end());
  std::sort(result.skipped.begin(), result.skipped.end());

  std::atomic<uint64_t> done{0};
  for (const TensorToWrite& t : tensors) {
    uint64_t n = DTypeSize(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    result.output_bytes += n;
  }
  for (TensorToWrite& t : tensors) {
    t.fill = [fill = std::move(t.fill), &done, &progress, total = result.output_bytes](uint8_t* dst, size_t nbytes) {
      fill(dst, nbytes);
      const uint64_t now = done += nbytes;
      if (progress) progress(now, total);
    };
  }

  // ---- the output directory
  uint64_t copy_bytes = 0;
  for (const auto& [path, size] : to_copy) copy_bytes += size;
  constexpr uint64_t kMarginBytes = uint64_t{64} << 20;  // headers, index and config are far smaller
  // The output may never be the input; with overwrite, the files this conversion writes
  // (weights, index, config.json and the copied names) are removed first, so no stale shard
  // survives next to a new index.
  RequireDistinct(dir, out_dir);
  const OutputDirPlan plan = PlanOutputDir(out_dir, overwrite, OwnedOutputFiles(result.copied_files));
  RequireDiskSpace(out_dir, result.output_bytes + copy_bytes + kMarginBytes, plan.stale_bytes, "the quantized model");
  plan.Apply();

  for (std::string& name : WriteShardedSafetensors(out_dir, tensors, max_shard_bytes)) {
    if (name != "model.safetensors.index.json") result.weight_files.push_back(std::move(name));
  }
  for (const auto& [path, size] : to_copy) {
    const fs::path target = fs::path(out_dir) / path.filename();
    fs::copy_file(path, target, fs::copy_options::overwrite_existing, ec);
    if (ec) Fail(target.string(), ": cannot copy from ", path.string(), ": ", ec.message());
  }
  WriteFile(out_dir + "/config.json", out_json.dump(2) + "\n");  // last: marks the directory complete
  return result;
}

QuantizeResult QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                  const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.to != "mxfp4") Fail("unsupported target format ", Quote(options.to), " (supported: mxfp4)");
  if (options.max_shard_bytes == 0) Fail(out_dir, ": the maximum shard size must be positive");

  // ---- the input, checked completely before anything is written
  RefuseGguf(in_dir, "quantize");
  const std::string dir = ResolveModelDir(in_dir);
  // Before anything else: --force must never touch the input, and a directory the output may not
  // go to is refused before any tensor is read.
  CheckConvertedOutputDir(dir, out_dir, options.overwrite);
  const std::string config_path = dir + "/config.json";
  const ModelConfig config = LoadModelConfig(dir);
  ValidateModelConfig(config, config_path);
  if (GptOssExpertFormat(config, config_path) == ExpertFormat::kMxfp4) {
    Fail(config_path, ": the experts are already MXFP4 (quantization_config.quant_method is mxfp4)");
  }
  const WeightStore store = WeightStore::Open(dir);
  RequireTensorsForCounts(config, store, config_path);
  RequireNoProblems(CheckTensors(ModelTensorSpecs(config, config_path), store), dir);

  ModelConfig out_config = config;
  out_config.raw.erase("quantization_config");  // absent or null in a dense config
  out_config.quantization = GptOssMxfp4QuantizationConfig();
  const nlohmann::json out_json = ModelConfigToJson(out_config);
  // Also checks that hidden_size and intermediate_size are multiples of the block size.
  const std::vector<TensorSpec> specs = CheckpointOrder(out_config, ModelTensorSpecs(out_config, config_path));

  QuantizeResult result;

  // ---- the output tensors: experts encoded, everything else copied with its stored dtype
  const std::string scales_suffix = "_scales", blocks_suffix = "_blocks";
  // Scales computed by a blocks filler, waiting for the scales tensor that follows it.
  auto pending = std::make_shared<std::map<std::string, std::vector<uint8_t>>>();
  std::vector<TensorToWrite> tensors;
  tensors.reserve(specs.size());
  for (const TensorSpec& spec : specs) {
    TensorToWrite t{spec.name, spec.dtype, spec.shape, nullptr};
    if (spec.kind == TensorKind::kExpertBlocks) {
      const TensorView view = store.Get(spec.name.substr(0, spec.name.size() - blocks_suffix.size()));
      const std::string scales_name = view.name() + scales_suffix;
      const size_t num_scales = spec.nbytes() / kMxfp4BlockBytes;
      t.fill = [view, scales_name, num_scales, pending](uint8_t* dst, size_t) {
        std::vector<uint8_t>& scales = (*pending)[scales_name];
        scales.resize(num_scales);
        QuantizeDenseExperts(view, dst, scales.data());
      };
      ++result.quantized_matrices;
    } else if (spec.kind == TensorKind::kExpertScales) {
      const TensorView view = store.Get(spec.name.substr(0, spec.name.size() - scales_suffix.size()));
      t.fill = [view, name = spec.name, pending](uint8_t* dst, size_t nbytes) {
        const auto it = pending->find(name);
        if (it == pending->end()) {
          QuantizeDenseExperts(view, nullptr, dst);
          return;
        }
        TESSERA_CHECK(it->second.size() == nbytes);
        std::memcpy(dst, it->second.data(), nbytes);
        pending->erase(it);
      };
    } else {
      const TensorView view = store.Get(spec.name);
      t.dtype = view.dtype();
      t.shape = view.shape();
      t.fill = [view](uint8_t* dst, size_t nbytes) { std::memcpy(dst, view.data, nbytes); };
    }
    tensors.push_back(std::move(t));
  }
  result.num_tensors = tensors.size();
  for (const std::string& name : store.names()) result.input_bytes += store.Get(name).nbytes();
  ConvertedModel written = WriteConvertedModel(dir, out_dir, std::move(tensors), out_json, options.overwrite,
                                               options.max_shard_bytes, options.progress);
  result.weight_files = std::move(written.weight_files);
  result.copied_files = std::move(written.copied_files);
  result.skipped = std::move(written.skipped);
  result.output_bytes = written.output_bytes;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessera
