// GGUF tensors as Hugging Face tensors (gguf_tensors.h).
#include "io/gguf_tensors.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <unordered_map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/ggml_quants.h"
#include "io/json_util.h"
#include "io/model_limits.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

// Per-layer tensors renamed as they are ("blk.N." + gguf -> "model.layers.N." + hf).
struct LayerRule {
  std::string_view gguf;
  std::string_view hf;
};
constexpr LayerRule kLayerRules[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_sinks.weight", "self_attn.sinks"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_up.bias", "mlp.up_proj.bias"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_down.bias", "mlp.down_proj.bias"},
    // deepseek2 (MLA, DeepSeekMoE); attn_k_b / attn_v_b are merged back into kv_b_proj below.
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
};

// Where an architecture names a norm otherwise (Gemma's four norms per layer: ffn_norm is the
// pre-feed-forward norm there, not Llama's post-attention one).
struct ArchLayerRule {
  std::string_view arch;
  std::string_view gguf;
  std::string_view hf;
};
constexpr ArchLayerRule kArchLayerRules[] = {
    {"gemma3", "ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"gemma3", "post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    // Phi-3: the fused projections (ffn_up holds gate | up).
    {"phi3", "attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"phi3", "ffn_up.weight", "mlp.gate_up_proj.weight"},
};

constexpr std::pair<std::string_view, std::string_view> kGlobalRules[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// The router's Hugging Face module per architecture (model/architecture.cpp's router_name).
std::string_view RouterOf(std::string_view arch) { return arch == "gpt-oss" ? "mlp.router" : "mlp.gate"; }

std::optional<DType> FloatDType(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 30: return DType::kBF16;
    case 24: return DType::kI8;
    case 25: return DType::kI16;
    case 26: return DType::kI32;
    case 27: return DType::kI64;
    case 28: return DType::kF64;
    default: return std::nullopt;
  }
}

constexpr uint32_t kGgmlMxfp4 = 39;

class Mapper {
 public:
  explicit Mapper(GgufHfTensors& out) : out_(out), first_(*out.files.front()) {
    arch_ = first_.GetString("general.architecture");
    const std::string heads = arch_ + ".attention.head_count", kv = arch_ + ".attention.head_count_kv";
    if (first_.Find(heads) != nullptr) n_head_ = static_cast<int64_t>(first_.GetUint(heads));
    n_kv_ = first_.Find(kv) != nullptr ? static_cast<int64_t>(first_.GetUint(kv)) : n_head_;
    // GLM-4.5's MTP layers follow the trunk's in block_count; a text engine leaves them out.
    const std::string blocks = arch_ + ".block_count", nextn = arch_ + ".nextn_predict_layers";
    if (first_.Find(blocks) != nullptr && first_.Find(nextn) != nullptr && first_.GetUint(nextn) < first_.GetUint(blocks)) {
      trunk_layers_ = static_cast<int64_t>(first_.GetUint(blocks) - first_.GetUint(nextn));
    }
    for (const auto& file : out.files) {
      for (const GgufTensorInfo& t : file->tensors()) {
        if (!by_name_.emplace(t.name, std::make_pair(file.get(), &t)).second) {
          Fail(file->path(), ": tensor ", Quote(t.name), " appears twice in the split set");
        }
      }
    }
  }

  void Run() {
    for (const auto& file : out_.files) {
      for (const GgufTensorInfo& t : file->tensors()) Map(*file, t);
    }
  }

 private:
  void Map(const GgufFile& file, const GgufTensorInfo& t) {
    for (const auto& [gguf, hf] : kGlobalRules) {
      if (t.name == gguf) return Add(file, t, std::string(hf));
    }
    // Rope factors (Llama 3's divisors, Phi-3's longrope lists): read by the config (gguf_config.h).
    if (t.name == "rope_freqs.weight" || t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight") return;
    int64_t layer = -1;
    std::string_view rest;
    if (!ParseLayer(t.name, layer, rest)) Unmapped(file, t);
    if (trunk_layers_ >= 0 && layer >= trunk_layers_) return;  // an MTP layer
    const std::string prefix = StrCat("model.layers.", layer, ".");
    for (const ArchLayerRule& rule : kArchLayerRules) {
      if (rule.arch == arch_ && rest == rule.gguf) return Add(file, t, prefix + std::string(rule.hf));
    }
    for (const LayerRule& rule : kLayerRules) {
      if (rest != rule.gguf) continue;
      std::vector<int64_t> order;
      // LlamaModel.permute (and its subclasses' files: SmolLM3) undone.
      if ((arch_ == "llama" || arch_ == "smollm3") && (rest.starts_with("attn_q.") || rest.starts_with("attn_k."))) {
        order = UnpermutedRows(file, t, rest.starts_with("attn_q.") ? n_head_ : n_kv_);
      }
      return Add(file, t, prefix + std::string(rule.hf), std::move(order));
    }
    if (rest == "attn_k_b.weight") return KvBFromSplit(file, t, layer);
    if (rest == "attn_v_b.weight") return;  // with attn_k_b
    if (rest == "ffn_gate_inp.weight" || rest == "ffn_gate_inp.bias") {
      return Add(file, t, StrCat(prefix, RouterOf(arch_), rest.substr(rest.find('.'))));
    }
    for (const char* proj : {"gate", "up", "down"}) {
      if (rest == StrCat("ffn_", proj, "_exps.weight")) {
        if (arch_ == "gpt-oss") return GptOssExperts(file, t, layer, proj);
        return SplitExperts(file, t, prefix, proj);
      }
      if (rest == StrCat("ffn_", proj, "_exps.bias") && arch_ == "gpt-oss") return GptOssBias(file, t, layer, proj);
    }
    Unmapped(file, t);
  }

  [[noreturn]] void Unmapped(const GgufFile& file, const GgufTensorInfo& t) const {
    Fail(file.path(), ": tensor ", Quote(t.name), " has no Hugging Face counterpart for architecture ", Quote(arch_));
  }

  static bool ParseLayer(std::string_view name, int64_t& layer, std::string_view& rest) {
    if (!name.starts_with("blk.")) return false;
    name.remove_prefix(4);
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
    if (ec != std::errc() || end == name.data() || *end != '.' || layer < 0) return false;
    rest = name.substr(static_cast<size_t>(end - name.data()) + 1);
    return true;
  }

  TensorInfo& NewInfo(const GgufTensorInfo& t, std::string name, std::vector<int64_t> shape, uint64_t nbytes) {
    TensorInfo& info = out_.infos.emplace_back();
    info.name = std::move(name);
    info.shape = std::move(shape);
    info.end = nbytes;
    if (const std::optional<DType> dtype = FloatDType(t.type->id)) {
      info.dtype = *dtype;
    } else {
      info.dtype = DType::kU8;
      info.ggml_type = static_cast<int32_t>(t.type->id);
    }
    return info;
  }

  void Add(const GgufFile& file, const GgufTensorInfo& t, std::string name, std::vector<int64_t> order = {}) {
    if (!order.empty() && t.ne.size() == 1) {
      // A permuted bias: copied back into HF order.
      ByteBuffer& copy = out_.owned.emplace_back(t.nbytes);
      const size_t elem = t.nbytes / t.ne[0];
      for (size_t r = 0; r < order.size(); ++r) {
        std::memcpy(copy.data() + r * elem, file.Data(t) + static_cast<size_t>(order[r]) * elem, elem);
      }
      TensorInfo& info = NewInfo(t, std::move(name), t.shape(), t.nbytes);
      out_.tensors.push_back({&info, copy.data(), &file.path()});
      return;
    }
    TensorInfo& info = NewInfo(t, std::move(name), t.shape(), t.nbytes);
    info.row_order = std::move(order);
    out_.tensors.push_back({&info, file.Data(t), &file.path()});
  }

  // LlamaModel.permute undone: HF row h D + j D/2 + i is stored at h D + 2 i + j.
  std::vector<int64_t> UnpermutedRows(const GgufFile& file, const GgufTensorInfo& t, int64_t heads) const {
    const int64_t rows = static_cast<int64_t>(t.ne.size() == 1 ? t.ne[0] : t.ne[1]);
    if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0) {
      Fail(file.path(), ": tensor ", Quote(t.name), ": ", rows, " rows do not split into ", heads,
           " heads of an even size (llama.cpp's rope permutation)");
    }
    const int64_t D = rows / heads, half = D / 2;
    std::vector<int64_t> order(static_cast<size_t>(rows));
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < 2; ++j) {
        for (int64_t i = 0; i < half; ++i) order[static_cast<size_t>(h * D + j * half + i)] = h * D + 2 * i + j;
      }
    }
    return order;
  }

  void SplitExperts(const GgufFile& file, const GgufTensorInfo& t, const std::string& prefix, const char* proj) {
    if (t.ne.size() != 3) Fail(file.path(), ": tensor ", Quote(t.name), " must have 3 dimensions [experts, out, in]");
    // One tensor entry per expert: the count is held to the budget before the entries are made.
    if (t.ne[2] > static_cast<uint64_t>(kMaxConfigExperts)) {
      Fail(file.path(), ": tensor ", Quote(t.name), " holds ", t.ne[2], " experts, more than the limit of ", kMaxConfigExperts);
    }
    const std::vector<int64_t> shape = t.shape();
    const uint64_t per_expert = t.nbytes / t.ne[2];
    for (int64_t e = 0; e < shape[0]; ++e) {
      TensorInfo& info = NewInfo(t, StrCat(prefix, "mlp.experts.", e, ".", proj, "_proj.weight"), {shape[1], shape[2]},
                                 per_expert);
      out_.tensors.push_back({&info, file.Data(t) + e * per_expert, &file.path()});
    }
  }

  std::pair<const GgufFile*, const GgufTensorInfo*> Partner(const GgufFile& file, const GgufTensorInfo& t,
                                                            const std::string& name) const {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) Fail(file.path(), ": tensor ", Quote(t.name), " has no partner ", Quote(name));
    return it->second;
  }

  // gpt-oss experts back to the checkpoint's MXFP4 tensors (header). gate (with up) and down
  // each make a _blocks and a _scales tensor; up is handled with gate.
  void GptOssExperts(const GgufFile& file, const GgufTensorInfo& t, int64_t layer, const std::string& proj) {
    if (proj == "up") return;
    if (t.type->id != kGgmlMxfp4) {
      Fail(file.path(), ": tensor ", Quote(t.name), " is ", t.type->name,
           ": gpt-oss experts are read as MXFP4 only (as llama.cpp's converter writes them)");
    }
    std::vector<std::pair<const GgufFile*, const GgufTensorInfo*>> parts = {{&file, &t}};
    if (proj == "gate") {
      parts.push_back(Partner(file, t, StrCat("blk.", layer, ".ffn_up_exps.weight")));
      const GgufTensorInfo& up = *parts[1].second;
      if (up.type->id != kGgmlMxfp4 || up.ne != t.ne) {
        Fail(parts[1].first->path(), ": tensor ", Quote(up.name), " must be MXFP4 of the shape of ", Quote(t.name));
      }
    }
    if (t.ne.size() != 3) Fail(file.path(), ": tensor ", Quote(t.name), " must have 3 dimensions [experts, out, in]");
    const int64_t E = static_cast<int64_t>(t.ne[2]), out = static_cast<int64_t>(t.ne[1]), in = static_cast<int64_t>(t.ne[0]);
    const int64_t rows = out * static_cast<int64_t>(parts.size()), blocks = in / 32;
    const std::string name = StrCat("model.layers.", layer, ".mlp.experts.", proj == "gate" ? "gate_up" : "down", "_proj");
    ByteBuffer& codes = out_.owned.emplace_back(static_cast<size_t>(E * rows * blocks * 16));
    ByteBuffer& scales = out_.owned.emplace_back(static_cast<size_t>(E * rows * blocks));
    // Row r of expert e: part r % parts (gate, up alternating), its row r / parts.
    GlobalPool().ParallelFor(static_cast<size_t>(E * rows), 64, [&](size_t begin, size_t end) {
      for (size_t g = begin; g < end; ++g) {
        const int64_t e = static_cast<int64_t>(g) / rows, r = static_cast<int64_t>(g) % rows;
        const auto& [part_file, part] = parts[static_cast<size_t>(r) % parts.size()];
        const int64_t src_row = r / static_cast<int64_t>(parts.size());
        const uint8_t* src = part_file->Data(*part) + ((e * out + src_row) * blocks) * 17;
        uint8_t* dst_codes = codes.data() + g * blocks * 16;
        uint8_t* dst_scales = scales.data() + g * blocks;
        for (int64_t b = 0; b < blocks; ++b, src += 17) {
          dst_scales[b] = src[0];
          // ggml: byte j = element j (low) | element j + 16 (high); HF: byte i = 2i | 2i + 1.
          uint8_t elems[32];
          for (int j = 0; j < 16; ++j) {
            elems[j] = src[1 + j] & 0x0f;
            elems[j + 16] = src[1 + j] >> 4;
          }
          for (int i = 0; i < 16; ++i) dst_codes[b * 16 + i] = static_cast<uint8_t>(elems[2 * i] | (elems[2 * i + 1] << 4));
        }
      }
    });
    // The file's pages of these experts are not read again: dropped from this process's memory
    // (the copy is what the loader reads), so a GGUF holds one resident copy as a checkpoint does.
    for (const auto& [part_file, part] : parts) ReleaseMappedRange(part_file->Data(*part), part->nbytes);
    TensorInfo& blocks_info = out_.infos.emplace_back();
    blocks_info.name = name + "_blocks";
    blocks_info.dtype = DType::kU8;
    blocks_info.shape = {E, rows, blocks, 16};
    blocks_info.end = codes.size();
    out_.tensors.push_back({&blocks_info, codes.data(), &file.path()});
    TensorInfo& scales_info = out_.infos.emplace_back();
    scales_info.name = name + "_scales";
    scales_info.dtype = DType::kU8;
    scales_info.shape = {E, rows, blocks};
    scales_info.end = scales.size();
    out_.tensors.push_back({&scales_info, scales.data(), &file.path()});
  }

  // DeepSeek's kv_b_proj [H (nope + v), kv_lora] from the two halves llama.cpp's converter splits
  // it into for its absorbed MLA: attn_k_b [H, kv_lora, nope] (each head's key rows transposed)
  // and attn_v_b [H, v, kv_lora]. Head h's rows are its nope key rows, then its v value rows.
  // Two float tensors of one type are copied in that type; anything else is decoded to float32
  // exactly as ggml defines the blocks (the rows of a quantized k_b run along nope, so they
  // cannot be transposed as blocks).
  void KvBFromSplit(const GgufFile& file, const GgufTensorInfo& k_b, int64_t layer) {
    const auto [v_file, v_b] = Partner(file, k_b, StrCat("blk.", layer, ".attn_v_b.weight"));
    if (k_b.ne.size() != 3 || v_b->ne.size() != 3 || k_b.ne[2] != v_b->ne[2] || k_b.ne[1] != v_b->ne[0] ||
        static_cast<int64_t>(k_b.ne[2]) != n_head_) {
      Fail(file.path(), ": tensors ", Quote(k_b.name), " and ", Quote(v_b->name),
           " must be [heads, kv_lora, nope] and [heads, v, kv_lora] with heads = ", n_head_);
    }
    const int64_t heads = n_head_, latent = static_cast<int64_t>(k_b.ne[1]), nope = static_cast<int64_t>(k_b.ne[0]),
                  value = static_cast<int64_t>(v_b->ne[1]), per_head = nope + value;
    const std::optional<DType> k_dtype = FloatDType(k_b.type->id), v_dtype = FloatDType(v_b->type->id);
    const bool same_float = k_dtype && k_dtype == v_dtype && (*k_dtype == DType::kF32 || *k_dtype == DType::kF16 ||
                                                              *k_dtype == DType::kBF16);
    const DType dtype = same_float ? *k_dtype : DType::kF32;
    const size_t elem = DTypeSize(dtype);
    ByteBuffer& merged = out_.owned.emplace_back(static_cast<size_t>(heads * per_head * latent) * elem);
    uint8_t* dst = merged.data();
    const size_t k_row_bytes = k_b.nbytes / (k_b.ne[1] * k_b.ne[2]), v_row_bytes = v_b->nbytes / (v_b->ne[1] * v_b->ne[2]);
    std::vector<uint8_t> k_rows(static_cast<size_t>(latent * nope) * elem);
    for (int64_t h = 0; h < heads; ++h) {
      // This head's [kv_lora, nope] block in `dtype`, then transposed into its key rows.
      const uint8_t* k_src = file.Data(k_b) + static_cast<size_t>(h * latent) * k_row_bytes;
      if (same_float) {
        std::memcpy(k_rows.data(), k_src, k_rows.size());
      } else {
        for (int64_t c = 0; c < latent; ++c) {
          DecodeRow(file, k_b, k_src + c * k_row_bytes, reinterpret_cast<float*>(k_rows.data()) + c * nope, nope);
        }
      }
      for (int64_t i = 0; i < nope; ++i) {
        for (int64_t c = 0; c < latent; ++c) {
          std::memcpy(dst + static_cast<size_t>((h * per_head + i) * latent + c) * elem,
                      k_rows.data() + static_cast<size_t>(c * nope + i) * elem, elem);
        }
      }
      for (int64_t j = 0; j < value; ++j) {
        const uint8_t* v_src = v_file->Data(*v_b) + static_cast<size_t>(h * value + j) * v_row_bytes;
        uint8_t* row = dst + static_cast<size_t>((h * per_head + nope + j) * latent) * elem;
        if (same_float) std::memcpy(row, v_src, v_row_bytes);
        else DecodeRow(*v_file, *v_b, v_src, reinterpret_cast<float*>(row), latent);
      }
    }
    TensorInfo& info = out_.infos.emplace_back();
    info.name = StrCat("model.layers.", layer, ".self_attn.kv_b_proj.weight");
    info.dtype = dtype;
    info.shape = {heads * per_head, latent};
    info.end = merged.size();
    out_.tensors.push_back({&info, merged.data(), &file.path()});
  }

  static void DecodeRow(const GgufFile& file, const GgufTensorInfo& t, const uint8_t* src, float* dst, int64_t n) {
    if (!DequantizeGgmlRow(t.type->id, src, dst, static_cast<size_t>(n))) {
      Fail(file.path(), ": tensor ", Quote(t.name), " is ", t.type->name, ", which cannot be decoded here");
    }
  }

  // gpt-oss expert biases: gate and up interleaved into gate_up_proj_bias [E, 2I]; down as is.
  void GptOssBias(const GgufFile& file, const GgufTensorInfo& t, int64_t layer, const std::string& proj) {
    const std::string prefix = StrCat("model.layers.", layer, ".mlp.experts.");
    if (proj == "down") return Add(file, t, prefix + "down_proj_bias");
    if (proj == "up") return;
    const auto [up_file, up] = Partner(file, t, StrCat("blk.", layer, ".ffn_up_exps.bias"));
    if (t.ne.size() != 2 || up->ne != t.ne || up->type != t.type || FloatDType(t.type->id) != DType::kF32) {
      Fail(file.path(), ": tensors ", Quote(t.name), " and ", Quote(up->name), " must be F32 [experts, out] alike");
    }
    const int64_t E = static_cast<int64_t>(t.ne[1]), out = static_cast<int64_t>(t.ne[0]);
    ByteBuffer& both = out_.owned.emplace_back(2 * t.nbytes);
    auto* dst = both.as<float>();
    const auto* gate = reinterpret_cast<const float*>(file.Data(t));
    const auto* upv = reinterpret_cast<const float*>(up_file->Data(*up));
    for (int64_t i = 0; i < E * out; ++i) {
      dst[2 * i] = gate[i];
      dst[2 * i + 1] = upv[i];
    }
    TensorInfo& info = out_.infos.emplace_back();
    info.name = prefix + "gate_up_proj_bias";
    info.dtype = DType::kF32;
    info.shape = {E, 2 * out};
    info.end = both.size();
    out_.tensors.push_back({&info, both.data(), &file.path()});
  }

  GgufHfTensors& out_;
  const GgufFile& first_;
  std::string arch_;
  int64_t n_head_ = 0, n_kv_ = 0;
  int64_t trunk_layers_ = -1;  // layers from this index on are MTP layers (-1: none)
  std::unordered_map<std::string, std::pair<const GgufFile*, const GgufTensorInfo*>> by_name_;
};

}  // namespace

std::vector<std::unique_ptr<GgufFile>> OpenGgufSet(const std::string& path) {
  std::vector<std::unique_ptr<GgufFile>> files;
  static const std::regex kSplit(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch match;
  const std::string file_name = fs::path(path).filename().string();
  if (!std::regex_match(file_name, match, kSplit)) {
    files.push_back(GgufFile::Open(path));
    return files;
  }
  const int count = std::stoi(match[3].str());
  if (count < 1) Fail(path, ": a split set of ", count, " files");
  const fs::path dir = fs::path(path).parent_path();
  for (int k = 1; k <= count; ++k) {
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d.gguf", k, count);
    const std::string split = (dir / (match[1].str() + suffix)).string();
    std::error_code ec;
    if (!fs::exists(split, ec)) Fail(path, ": split ", k, " of ", count, " is missing (", split, ")");
    files.push_back(GgufFile::Open(split));
    const GgufFile& f = *files.back();
    if (f.Find("split.no") != nullptr && f.GetUint("split.no") != static_cast<uint64_t>(k - 1)) {
      Fail(split, ": split.no is ", f.GetUint("split.no"), ", expected ", k - 1);
    }
    if (f.Find("split.count") != nullptr && f.GetUint("split.count") != static_cast<uint64_t>(count)) {
      Fail(split, ": split.count is ", f.GetUint("split.count"), ", expected ", count);
    }
  }
  return files;
}

GgufHfTensors MapGgufTensors(std::vector<std::unique_ptr<GgufFile>> files) {
  GgufHfTensors out;
  out.files = std::move(files);
  TESSERA_CHECK(!out.files.empty());
  Mapper mapper(out);
  mapper.Run();
  return out;
}

}  // namespace tessera
