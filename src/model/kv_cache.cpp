#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "core/buffer.h"
#include "core/error.h"
#include "kernels/kv_int8.h"

namespace tessera {

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kBF16: return "bf16";
    case KvType::kF32: return "f32";
    case KvType::kInt8: return "int8";
  }
  return "?";
}

KvType ParseKvType(const std::string& name) {
  if (name == "bf16") return KvType::kBF16;
  if (name == "f32") return KvType::kF32;
  if (name == "int8") return KvType::kInt8;
  Fail("unknown KV cache type '", name, "' (expected bf16, f32 or int8)");
}

size_t KvHeadBytes(int64_t head_dim, KvType type) {
  const size_t d = static_cast<size_t>(head_dim);
  switch (type) {
    case KvType::kBF16: return 2 * d;
    case KvType::kF32: return 4 * d;
    case KvType::kInt8: return KvInt8HeadBytes(d);
  }
  return 0;
}

KvCache::KvCache(const ModelConfig& config, int64_t context, KvType type, int64_t rollback)
    : type_(type), context_(context), rollback_(rollback) {
  if (context <= 0) Fail("context size must be positive (got ", context, ")");
  // Dynamic NTK scaling exists to run past max_position_embeddings (HF rescales the base then,
  // rope.md §4); every other rope stops there.
  const bool dynamic = config.rope_scaling && config.rope_scaling->rope_type == "dynamic";
  if (!dynamic && config.max_position_embeddings > 0 && context > config.max_position_embeddings) {
    Fail("context of ", context, " positions exceeds the model's max_position_embeddings ",
         config.max_position_embeddings);
  }
  if (rollback < 0) Fail("rollback must be non-negative (got ", rollback, ")");
  values_are_keys_ = config.latent_dim() > 0;
  kv_heads_ = values_are_keys_ ? 1 : config.num_key_value_heads;
  head_bytes_ = KvHeadBytes(values_are_keys_ ? config.latent_dim() : config.head_dim, type);
  row_bytes_ = static_cast<size_t>(kv_heads_) * head_bytes_;
  layers_.resize(config.num_hidden_layers);
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    Layer& layer = layers_[l];
    layer.sliding = config.layer_types[l] == LayerType::kSlidingAttention;
    layer.window = layer.sliding ? config.sliding_window.value_or(context) : context;
    layer.capacity = layer.sliding ? std::min(context, layer.window + rollback) : context;
  }
}

uint64_t KvCache::BytesFor(const ModelConfig& config, int64_t positions, KvType type, int64_t rollback) {
  const bool latent = config.latent_dim() > 0;
  const uint64_t row = latent ? KvHeadBytes(config.latent_dim(), type)
                              : static_cast<uint64_t>(config.num_key_value_heads) * KvHeadBytes(config.head_dim, type);
  uint64_t slots = 0;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const bool sliding = config.layer_types[l] == LayerType::kSlidingAttention;
    const int64_t ring = sliding ? config.sliding_window.value_or(positions) + rollback : positions;
    slots += static_cast<uint64_t>(std::min(positions, ring));
  }
  return (latent ? 1 : 2) * slots * row;  // keys and values (the latent rows are both)
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const Layer& l : layers_) total += l.keys.size() + l.values.size();
  return total;
}

void KvCache::Reserve(int64_t positions) {
  if (positions > context_) {
    Fail("KV cache: ", positions, " positions exceed the context size ", context_);
  }
  // Slots per layer after growing, and the bytes that adds: exactly what `positions` needs, or
  // with slack (full layers grow geometrically for amortised copies, rings whole at first use).
  std::vector<int64_t> target(layers_.size());
  const auto plan = [&](bool exact) {
    uint64_t added = 0;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      const int64_t needed = std::min(positions, l.capacity);
      target[i] = l.allocated;
      if (needed > l.allocated) {
        target[i] = exact ? needed : l.sliding ? l.capacity : std::min(l.capacity, std::max(needed, 2 * l.allocated));
      }
      added += (values_are_keys_ ? 1 : 2) * static_cast<uint64_t>(target[i] - l.allocated) * RowBytes();
    }
    return added;
  };
  uint64_t more = plan(/*exact=*/false);
  if (more == 0) return;
  const uint64_t available = AvailableMemoryBytes();
  if (more > available) more = plan(/*exact=*/true);  // without the geometric slack before refusing
  const auto refuse = [&] {
    Fail("the KV cache for ", positions, " positions needs ", FormatMemorySize(bytes() + more), " (", KvTypeName(type_),
         ", ", layers_.size(), " layers); only ", FormatMemorySize(available),
         " of memory is available (lower -c or the prompt", type_ == KvType::kF32 ? ", or use --kv-type bf16 or int8)" : type_ == KvType::kBF16 ? ", or use --kv-type int8)" : ")");
  };
  if (more > available) refuse();
  // Layer by layer into new storage, each head's slots copied to its new segment (the old
  // storage freed before the next layer grows). A failed allocation leaves that layer and the
  // ones after it as they were; the layers already grown stay grown (their slots still correct).
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    if (target[i] == l.allocated) continue;
    std::vector<uint8_t> keys, values;
    try {
      keys.resize(static_cast<size_t>(target[i]) * RowBytes());
      if (!values_are_keys_) values.resize(static_cast<size_t>(target[i]) * RowBytes());
    } catch (const std::bad_alloc&) {
      refuse();
    }
    const size_t old_stride = static_cast<size_t>(l.allocated) * head_bytes_;
    const size_t new_stride = static_cast<size_t>(target[i]) * head_bytes_;
    for (int64_t h = 0; h < kv_heads_ && old_stride > 0; ++h) {
      std::memcpy(keys.data() + h * new_stride, l.keys.data() + h * old_stride, old_stride);
      if (!values_are_keys_) std::memcpy(values.data() + h * new_stride, l.values.data() + h * old_stride, old_stride);
    }
    l.keys = std::move(keys);
    l.values = std::move(values);
    l.allocated = target[i];
  }
}

uint8_t* KvCache::KeySlot(int layer, int64_t position) {
  Layer& l = layers_[layer];
  const int64_t slot = position % l.capacity;
  TESSERA_CHECK(slot < l.allocated);
  return l.keys.data() + slot * head_bytes_;
}

uint8_t* KvCache::ValueSlot(int layer, int64_t position) {
  if (values_are_keys_) return KeySlot(layer, position);
  Layer& l = layers_[layer];
  const int64_t slot = position % l.capacity;
  TESSERA_CHECK(slot < l.allocated);
  return l.values.data() + slot * head_bytes_;
}

void KvCache::BeginAppend(int64_t start, int64_t end) {
  TESSERA_CHECK(start == length_ && end >= start);
  Reserve(end);
}

void KvCache::AbortAppend(int64_t start, int64_t end) {
  TESSERA_CHECK(start <= end);
  // Any row of [start, end) may have been written: their ring slots no longer hold older data.
  if (end - 1 > max_written_) max_written_ = end - 1;
  length_ = std::min(length_, start);
  if (LayerLosing(length_) >= 0) {
    length_ = 0;
    max_written_ = -1;
  }
}

int64_t KvCache::OldestStored(int layer) const {
  const Layer& l = layers_[layer];
  return std::max<int64_t>(0, max_written_ - l.capacity + 1);
}

int KvCache::LayerLosing(int64_t n) const {
  if (n == 0) return -1;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (!l.sliding) continue;
    // The next token (position n) sees positions >= n - window + 1; they must still be stored.
    const int64_t needed = std::max<int64_t>(0, n - l.window + 1);
    if (needed < OldestStored(static_cast<int>(i))) return static_cast<int>(i);
  }
  return -1;
}

void KvCache::Truncate(int64_t n) {
  if (n < 0 || n > length_) Fail("cannot truncate the KV cache to ", n, " positions (it holds ", length_, ")");
  if (const int layer = LayerLosing(n); layer >= 0) {
    const Layer& l = layers_[layer];
    Fail("cannot roll the KV cache back from ", length_, " to ", n, " positions: sliding layer ", layer,
         " keeps only ", l.capacity, " (window ", l.window, " + rollback ", rollback_, ")");
  }
  length_ = n;
  if (n == 0) max_written_ = -1;  // nothing is kept: the rings start afresh
}

void KvCache::CopyPrefixFrom(const KvCache& source, int64_t n) {
  if (&source == this) Fail("KV cache: cannot copy a prefix from the cache itself");
  if (n < length_ || n > source.length_) {
    Fail("KV cache: cannot copy ", n, " positions (this cache holds ", length_, ", the source ", source.length_, ")");
  }
  if (type_ != source.type_ || context_ != source.context_ || rollback_ != source.rollback_ ||
      row_bytes_ != source.row_bytes_ || layers_.size() != source.layers_.size()) {
    Fail("KV cache: cannot copy a prefix between caches of different layouts");
  }
  if (rope_tracker_ || source.rope_tracker_) Fail("KV cache: a length-dependent rope's cache cannot share a prefix");
  // Per layer the rows to copy: [max(length, n - capacity), n), which must all be stored in the
  // source (a ring slot holds position q iff q > max_written - capacity).
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (l.capacity != source.layers_[i].capacity) Fail("KV cache: cannot copy a prefix between caches of different layouts");
    const int64_t first = std::max(length_, n - l.capacity);
    if (first < n && first < source.OldestStored(static_cast<int>(i))) {
      Fail("KV cache: the source no longer stores position ", first, " of layer ", i);
    }
  }
  if (n == length_) return;
  Reserve(n);
  auto& from = const_cast<KvCache&>(source);  // KeySlot is non-const; nothing is written to it
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int layer = static_cast<int>(i);
    const size_t stride = HeadStride(layer), source_stride = from.HeadStride(layer);
    for (int64_t q = std::max(length_, n - layers_[i].capacity); q < n; ++q) {
      for (int64_t h = 0; h < kv_heads_; ++h) {
        std::memcpy(KeySlot(layer, q) + h * stride, from.KeySlot(layer, q) + h * source_stride, head_bytes_);
        if (!values_are_keys_) {
          std::memcpy(ValueSlot(layer, q) + h * stride, from.ValueSlot(layer, q) + h * source_stride, head_bytes_);
        }
      }
    }
  }
  // Slots of the copied positions now hold them; any other slot keeps what it held, so the
  // invariant on max_written_ stays true with the larger of the two.
  max_written_ = std::max(max_written_, n - 1);
  length_ = n;
}

const RopeFrequencies& KvCache::RopeFrequenciesFor(const Rope& rope, int64_t seq_len) {
  if (!rope.length_dependent()) return rope.frequencies();
  if (!rope_tracker_) rope_tracker_.emplace(rope);
  return rope_tracker_->Update(seq_len);
}

}  // namespace tessera
