#include "model/sparsify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/json_util.h"
#include "io/model_dir.h"
#include "kernels/mxfp4.h"
#include "model/calibration.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/sparse_scheme.h"
#include "model/tensor_specs.h"

namespace tessera {
namespace {

// The linear module a tensor name is the weight of, with the input its forward records.
struct Prunable {
  bool linear = false;
  bool expert = false;  // Qwen3-MoE expert: its inputs are not recorded
  LinearInput site = LinearInput::kQkv;
};
Prunable Classify(const std::string& name) {
  auto ends = [&](const char* s) {
    const size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  Prunable p;
  if (name.rfind("model.layers.", 0) != 0) return p;
  p.expert = name.find(".experts.") != std::string::npos;
  if (ends("self_attn.q_proj.weight") || ends("self_attn.k_proj.weight") || ends("self_attn.v_proj.weight")) {
    p.linear = true, p.site = LinearInput::kQkv;
  } else if (ends("self_attn.o_proj.weight")) {
    p.linear = true, p.site = LinearInput::kO;
  } else if (ends("gate_proj.weight") || ends("up_proj.weight")) {
    p.linear = true, p.site = LinearInput::kGateUp;
  } else if (ends("down_proj.weight")) {
    p.linear = true, p.site = LinearInput::kDown;
  }
  return p;
}

}  // namespace

void SelectNm(const float* scores, size_t n, int kept, int group, uint8_t* keep) {
  const size_t M = static_cast<size_t>(group);
  size_t order[16];
  size_t g = 0;
  for (; g + M <= n; g += M) {
    std::iota(order, order + M, size_t{0});
    std::stable_sort(order, order + M, [&](size_t a, size_t b) { return scores[g + a] > scores[g + b]; });
    for (size_t j = 0; j < M; ++j) keep[g + j] = 0;
    for (int j = 0; j < kept; ++j) keep[g + order[j]] = 1;
  }
  for (; g < n; ++g) keep[g] = 1;
}

SparsifyResult SparsifyCheckpoint(const std::string& in_dir, const std::string& out_dir, const SparsifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (!(options.group >= 2 && options.group <= 16 && options.kept >= 1 && options.kept < options.group)) {
    Fail("--pattern ", options.kept, ":", options.group, ": needs 1 <= N < M <= 16 (N kept of every M)");
  }
  if (options.bitmask24 && (options.kept != 2 || options.group != 4)) {
    Fail("--format sparse-24-bitmask stores 2:4 only, not ", options.kept, ":", options.group);
  }
  const DenseFamilyInput input = OpenDenseFamilyInput(in_dir, out_dir, options.overwrite, "sparsify", /*gpt_oss_mxfp4=*/true);
  const bool selected_all = options.layers.empty() && options.attention && options.mlp;
  auto chosen = [&](const TensorSpec& spec, bool attention) {
    if (attention ? !options.attention : !options.mlp) return false;
    return options.layers.empty() ||
           std::find(options.layers.begin(), options.layers.end(), static_cast<int64_t>(spec.layer)) != options.layers.end();
  };
  const std::string& dir = input.dir;
  const std::string& config_path = input.config_path;
  const ModelConfig& config = input.config;
  const WeightStore store = WeightStore::Open(dir);
  RequireTensorsForCounts(config, store, config_path);
  const std::vector<TensorSpec> specs = ModelTensorSpecs(config, config_path);
  RequireNoProblems(CheckTensors(specs, store), dir);

  SparsifyResult result;
  // ---- wanda: squared input norms per (layer, site) over the calibration tokens
  std::map<std::pair<int, LinearInput>, std::vector<double>> norms;
  if (options.wanda) {
    if (options.calib_file.empty()) Fail("--method wanda needs calibration text (--calib FILE)");
    const CalibrationText text = LoadCalibrationText(dir, options.calib_file, options.samples, options.window);
    RunCalibration(
        dir, text,
        [&](int layer, LinearInput site, const float* x, int64_t rows, int64_t cols) {
          std::vector<double>& n = norms[{layer, site}];
          n.resize(static_cast<size_t>(cols), 0.0);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) n[static_cast<size_t>(c)] += static_cast<double>(x[r * cols + c]) * x[r * cols + c];
          }
        },
        options.progress);
    result.calibration_tokens = text.rows();
  }

  // ---- the output tensors: pruned copies of the linear weights, the rest as stored
  std::vector<TensorToWrite> tensors;
  std::vector<std::string> modules;
  for (const TensorSpec& spec : specs) {
    const TensorView v = store.Get(spec.name);
    TensorToWrite t{spec.name, v.dtype(), v.shape(), nullptr};
    const Prunable p = Classify(spec.name);
    if (spec.kind == TensorKind::kExpertBlocks && chosen(spec, false)) {
      // gpt-oss MXFP4 experts [E, out, in/32, 16]: per row, groups of M codes by |E2M1| (code & 7
      // orders the magnitudes), the pruned nibbles set to 0 (+0).
      if (kMxfp4BlockSize % static_cast<size_t>(options.group) != 0) {
        Fail(spec.name, ": MXFP4 experts need M dividing the block size 32 (", options.kept, ":", options.group, ")");
      }
      const size_t row_codes = static_cast<size_t>(v.shape()[2]) * kMxfp4BlockSize;
      const size_t rows = static_cast<size_t>(v.shape()[0] * v.shape()[1]);
      modules.push_back(spec.name.substr(0, spec.name.size() - std::string("_blocks").size()));
      ++result.pruned_modules;
      result.weights_in_pruned += rows * row_codes;
      result.zeros_after += rows * row_codes / static_cast<size_t>(options.group) * static_cast<size_t>(options.group - options.kept);
      t.fill = [v, rows, row_codes, kept = options.kept, group = options.group](uint8_t* dst, size_t n) {
        std::memcpy(dst, v.data, n);
        GlobalPool().ParallelFor(rows, 64, [&](size_t b, size_t e) {
          std::vector<float> scores(row_codes);
          std::vector<uint8_t> keep(row_codes);
          for (size_t r = b; r < e; ++r) {
            uint8_t* codes = dst + r * row_codes / 2;
            for (size_t c = 0; c < row_codes; ++c) scores[c] = static_cast<float>((codes[c / 2] >> (4 * (c % 2))) & 0x7);
            SelectNm(scores.data(), row_codes, kept, group, keep.data());
            for (size_t c = 0; c < row_codes; ++c) {
              if (!keep[c]) codes[c / 2] &= static_cast<uint8_t>(c % 2 ? 0x0F : 0xF0);
            }
          }
        });
      };
      tensors.push_back(std::move(t));
      continue;
    }
    if (!p.linear || v.shape().size() != 2 || !chosen(spec, p.site == LinearInput::kQkv || p.site == LinearInput::kO)) {
      t.fill = [v](uint8_t* dst, size_t n) { std::memcpy(dst, v.data, n); };
      tensors.push_back(std::move(t));
      continue;
    }
    const std::vector<double>* norm = nullptr;
    if (options.wanda && !p.expert && spec.layer >= 0) {
      const auto it = norms.find({static_cast<int>(spec.layer), p.site});
      if (it != norms.end() && static_cast<int64_t>(it->second.size()) == v.shape()[1]) norm = &it->second;
    }
    modules.push_back(spec.name.substr(0, spec.name.rfind('.')));
    ++result.pruned_modules;
    result.weights_in_pruned += static_cast<uint64_t>(v.numel());
    const int64_t rows = v.shape()[0], cols = v.shape()[1];
    result.zeros_after += static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols / options.group) *
                          static_cast<uint64_t>(options.group - options.kept);
    std::shared_ptr<std::vector<float>> scale;
    if (norm) {
      scale = std::make_shared<std::vector<float>>(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) (*scale)[static_cast<size_t>(c)] = static_cast<float>(std::sqrt((*norm)[static_cast<size_t>(c)]));
    }
    const size_t elem = DTypeSize(v.dtype());
    // Row r's selection (one byte per column), per output row; each tensor's fill recomputes it.
    auto select = [v, cols, scale, kept = options.kept, group = options.group, elem](size_t r, std::vector<float>& scores,
                                                                                      uint8_t* keep) {
      const uint8_t* row = v.data + r * static_cast<size_t>(cols) * elem;
      for (int64_t c = 0; c < cols; ++c) {
        const float w = std::fabs(ElementToF32(v.dtype(), row + static_cast<size_t>(c) * elem));
        scores[static_cast<size_t>(c)] = scale ? w * (*scale)[static_cast<size_t>(c)] : w;
      }
      SelectNm(scores.data(), scores.size(), kept, group, keep);
    };
    // fill_row(r, keep, dst_row) for every row, in parallel; dst rows of `row_bytes`.
    auto rows_of = [rows, cols, select](size_t row_bytes, auto fill_row) {
      return [rows, cols, select, row_bytes, fill_row](uint8_t* dst, size_t) {
        GlobalPool().ParallelFor(static_cast<size_t>(rows), 16, [&](size_t b, size_t e) {
          std::vector<float> scores(static_cast<size_t>(cols));
          std::vector<uint8_t> keep(static_cast<size_t>(cols));
          for (size_t r = b; r < e; ++r) {
            select(r, scores, keep.data());
            fill_row(r, keep.data(), dst + r * row_bytes);
          }
        });
      };
    };
    const uint8_t* data = v.data;
    const size_t row_bytes = static_cast<size_t>(cols) * elem;
    if (!options.bitmask24) {
      t.fill = rows_of(row_bytes, [data, cols, elem, row_bytes](size_t r, const uint8_t* keep, uint8_t* out) {
        std::memcpy(out, data + r * row_bytes, row_bytes);
        for (int64_t c = 0; c < cols; ++c) {
          if (!keep[static_cast<size_t>(c)]) std::memset(out + static_cast<size_t>(c) * elem, 0, elem);
        }
      });
      tensors.push_back(std::move(t));
      continue;
    }
    // compressed-tensors sparse-24-bitmask: kept values in column order, LSB-first bits, shape.
    if (cols % 4 != 0) Fail(spec.name, ": ", cols, " input features are not a multiple of 4; sparse-24-bitmask needs whole groups");
    const std::string module = spec.name.substr(0, spec.name.rfind('.'));
    const Bitmask24Names names = Bitmask24NamesOf(module);
    TensorToWrite values{names.values, v.dtype(), {rows, cols / 2}, nullptr};
    values.fill = rows_of(row_bytes / 2, [data, cols, elem, row_bytes](size_t r, const uint8_t* keep, uint8_t* out) {
      for (int64_t c = 0; c < cols; ++c) {
        if (keep[static_cast<size_t>(c)]) std::memcpy(out, data + r * row_bytes + static_cast<size_t>(c) * elem, elem), out += elem;
      }
    });
    const size_t mask_bytes = static_cast<size_t>((cols + 7) / 8);
    TensorToWrite bitmask{names.bitmask, DType::kU8, {rows, static_cast<int64_t>(mask_bytes)}, nullptr};
    bitmask.fill = rows_of(mask_bytes, [cols, mask_bytes](size_t, const uint8_t* keep, uint8_t* out) {
      std::memset(out, 0, mask_bytes);
      for (int64_t c = 0; c < cols; ++c) out[c / 8] |= static_cast<uint8_t>(keep[static_cast<size_t>(c)] << (c % 8));
    });
    TensorToWrite shape{names.shape, DType::kI64, {2, 1}, [rows, cols](uint8_t* dst, size_t) {
                          const int64_t dims[2] = {rows, cols};
                          std::memcpy(dst, dims, sizeof(dims));
                        }};
    tensors.push_back(std::move(values));
    tensors.push_back(std::move(bitmask));
    tensors.push_back(std::move(shape));
  }
  if (modules.empty()) Fail(dir, ": no linear weights of decoder layers to prune");
  nlohmann::json out_json = ParseJsonText(ReadFile(config_path), config_path);
  out_json["tessera_sparsity"] = {{"kept", options.kept},
                                  {"group", options.group},
                                  {"method", options.wanda ? "wanda" : "magnitude"},
                                  {"format", options.bitmask24 ? "sparse-24-bitmask" : "dense"},
                                  {"modules", modules.size()}};
  if (!selected_all) out_json["tessera_sparsity"]["module_names"] = modules;
  if (options.bitmask24) {
    // What llm-compressor writes for a sparse-only model; the targets are the modules pruned here.
    const double sparsity = static_cast<double>(result.zeros_after) / static_cast<double>(result.weights_in_pruned);
    out_json["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "sparse-24-bitmask"},
        {"quantization_status", "compressed"},
        {"config_groups", nlohmann::json::object()},
        {"sparsity_config",
         {{"format", "sparse-24-bitmask"},
          {"sparsity_structure", "2:4"},
          {"global_sparsity", sparsity},
          {"registry_requires_subclass", false},
          {"targets", selected_all ? nlohmann::json{"re:.*self_attn\\.(q|k|v|o)_proj$",
                                                    "re:.*mlp\\.(experts\\.[0-9]+\\.)?(gate|up|down)_proj$"}
                                   : nlohmann::json(modules)},
          {"ignore", {"lm_head"}}}}};
  }
  if (options.progress) options.progress(StrCat("sparsify: writing ", tensors.size(), " tensors"));
  result.num_tensors = tensors.size();
  ConvertedModel written =
      WriteConvertedModel(dir, out_dir, std::move(tensors), out_json, options.overwrite, kGptOssMaxShardBytes, nullptr);
  result.weight_files = std::move(written.weight_files);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessera
