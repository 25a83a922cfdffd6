#include "model/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace tessera {

const char* KvTypeName(KvType type) { return type == KvType::kBF16 ? "bf16" : "f32"; }

KvType ParseKvType(const std::string& name) {
  if (name == "bf16") return KvType::kBF16;
  if (name == "f32") return KvType::kF32;
  Fail("unknown KV cache type '", name, "' (expected bf16 or f32)");
}

KvCache::KvCache(const ModelConfig& config, int64_t context, KvType type, int64_t rollback)
    : type_(type), context_(context), rollback_(rollback) {
  if (context <= 0) Fail("context size must be positive (got ", context, ")");
  if (rollback < 0) Fail("rollback must be non-negative (got ", rollback, ")");
  row_elems_ = static_cast<size_t>(config.num_key_value_heads * config.head_dim);
  elem_size_ = type == KvType::kBF16 ? 2 : 4;
  layers_.resize(config.num_hidden_layers);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    Layer& layer = layers_[l];
    layer.sliding = config.layer_types[l] == LayerType::kSlidingAttention;
    layer.window = layer.sliding ? config.sliding_window.value_or(context) : context;
    layer.capacity = layer.sliding ? std::min(context, layer.window + rollback) : context;
    layer.keys.resize(layer.capacity * RowBytes());
    layer.values.resize(layer.capacity * RowBytes());
  }
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const Layer& l : layers_) total += l.keys.size() + l.values.size();
  return total;
}

uint8_t* KvCache::KeyRow(int layer, int64_t position) {
  const Layer& l = layers_[layer];
  return const_cast<uint8_t*>(l.keys.data()) + (position % l.capacity) * RowBytes();
}

uint8_t* KvCache::ValueRow(int layer, int64_t position) {
  const Layer& l = layers_[layer];
  return const_cast<uint8_t*>(l.values.data()) + (position % l.capacity) * RowBytes();
}

int64_t KvCache::OldestStored(int layer) const {
  const Layer& l = layers_[layer];
  return std::max<int64_t>(0, max_written_ - l.capacity + 1);
}

void KvCache::Truncate(int64_t n) {
  if (n < 0 || n > length_) Fail("cannot truncate the KV cache to ", n, " positions (it holds ", length_, ")");
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (!l.sliding || n == 0) continue;
    // The next token (position n) sees positions >= n - window + 1; they must still be stored.
    const int64_t needed = std::max<int64_t>(0, n - l.window + 1);
    if (needed < OldestStored(static_cast<int>(i))) {
      Fail("cannot roll the KV cache back from ", length_, " to ", n, " positions: sliding layer ", i,
           " keeps only ", l.capacity, " (window ", l.window, " + rollback ", rollback_, ")");
    }
  }
  length_ = n;
}

}  // namespace tessera
