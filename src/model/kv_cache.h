// Key/value cache for one sequence.
//
// DeepSeek's MLA (config kv_lora_rank > 0, deepseek.md §4) caches one latent row [c | k_pe] of
// kv_lora_rank + qk_rope_head_dim values per position and layer, shared by every head: one
// key/value head whose values are its keys (values_are_keys(); ValueSlot is KeySlot).
//
// Per layer, keys and values (after RoPE) of every cached position, head-major:
// [kv_head][slot][head_dim], so that one head's positions are one sequential stream (decode reads
// a head's whole history per task; interleaved heads left it 1/kv_heads of every row it touched),
// in the cache's element type (BF16 by default, F32 for the exact path, or int8). Full-attention layers
// hold every position up to the context size (slot = position). Sliding-window layers hold only
// a ring of `window + rollback` slots (slot = position % capacity): the window the next token can
// see, plus room to roll back up to `rollback` positions without losing keys still in view.
//
// Positions are explicit: the cache holds positions [0, length()). Truncate(n) drops the
// positions >= n (for verifying several tokens at once and rolling back); appending continues at
// position length().
//
// Storage is allocated as positions are appended (full layers grow geometrically up to
// `context`), so a large context costs only what the sequence uses; an allocation the machine's
// memory cannot hold is refused with a one-line error naming the bytes.
//
// Appending is transactional: BeginAppend reserves the rows, the forward pass writes them, and
// Extend commits the new length; a forward that fails partway calls AbortAppend, after which the
// cache holds only positions whose rows are intact in every layer (a sliding ring may have lost
// older positions to the uncommitted rows, and then the cache is emptied).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/config.h"
#include "model/rope.h"

namespace tessera {

// Element type of the cache: BF16, f32 (the exact path), or int8 codes with one f32 scale per
// 32 channels of a head (kernels/kv_int8.h; about 0.56 of BF16's bytes at head_dim 128).
enum class KvType { kBF16, kF32, kInt8 };
const char* KvTypeName(KvType type);
KvType ParseKvType(const std::string& name);  // "bf16" | "f32" | "int8"; throws tessera::Error otherwise
// Bytes of one head's key (or value) vector of head_dim values in the cache.
size_t KvHeadBytes(int64_t head_dim, KvType type);

class KvCache {
 public:
  // `context` is the largest number of positions the sequence may reach; it may not exceed the
  // model's max_position_embeddings (one-line error naming both). Allocates nothing yet.
  KvCache(const ModelConfig& config, int64_t context, KvType type, int64_t rollback = 64);

  // Bytes the cache of `config` takes once it holds `positions` positions.
  static uint64_t BytesFor(const ModelConfig& config, int64_t positions, KvType type, int64_t rollback = 64);

  KvType type() const { return type_; }
  int64_t context() const { return context_; }
  int64_t length() const { return length_; }
  int64_t rollback() const { return rollback_; }
  bool values_are_keys() const { return values_are_keys_; }
  int64_t kv_heads() const { return kv_heads_; }
  // Bytes allocated now.
  size_t bytes() const;

  // Makes room for positions [0, positions) (positions <= context()). Throws a one-line
  // tessera::Error, leaving the cache as it was, when the memory this needs is more than the
  // machine has available.
  void Reserve(int64_t positions);

  // Drops positions >= n. Throws tessera::Error if n > length() or if a sliding layer's ring no
  // longer holds the keys position n - 1 needs (rolling back more than rollback() positions).
  void Truncate(int64_t n);

  // Makes this cache hold positions [0, n) with the rows `source` holds for them (prompt sharing
  // between sequences: their keys and values depend only on the tokens, so they are the rows
  // this sequence would compute). Positions below length() are kept; [length(), n) are copied.
  // Needs length() <= n <= source.length(), the same layout (config, context, type, rollback),
  // and every copied position the next token sees still stored in source's rings; throws a
  // one-line tessera::Error, changing nothing, otherwise or when the rows cannot be allocated.
  // Not for length-dependent ropes (their frequencies depend on the sequence's own history).
  void CopyPrefixFrom(const KvCache& source, int64_t n);

  // Storage access for the attention code: a head's vector is KvHeadBytes(head_dim, type()) bytes;
  // head h of `position` is at KeySlot(layer, position) + h * HeadStride(layer) (HeadStride changes
  // when the layer's storage grows: read it after BeginAppend).
  bool sliding(int layer) const { return layers_[layer].sliding; }
  int64_t capacity(int layer) const { return layers_[layer].capacity; }
  int64_t window(int layer) const { return layers_[layer].window; }
  size_t HeadStride(int layer) const { return static_cast<size_t>(layers_[layer].allocated) * head_bytes_; }
  // Head 0's K (or V) vector of `position` in `layer` (its slot must be allocated).
  uint8_t* KeySlot(int layer, int64_t position);
  uint8_t* ValueSlot(int layer, int64_t position);
  // A forward pass is about to write positions [start, end), start == length(): reserves their
  // rows (throws, changing nothing, when they cannot be allocated or end > context()).
  void BeginAppend(int64_t start, int64_t end);
  // Commits positions [length(), new_length): the caller filled their rows in every layer.
  void Extend(int64_t new_length) {
    length_ = new_length;
    if (new_length - 1 > max_written_) max_written_ = new_length - 1;
  }
  // The forward pass that called BeginAppend(start, end) failed: some layers may hold rows of
  // [start, end), which overwrote ring slots of older positions. Keeps length() == start when
  // every position the next token at `start` sees is still intact, and empties the cache otherwise.
  void AbortAppend(int64_t start, int64_t end);
  // Oldest position whose K/V row is still stored in `layer` (0 for full layers).
  int64_t OldestStored(int layer) const;

  // The rotary frequencies this sequence's forward call reaching `seq_len` positions uses:
  // `rope`'s own for length-independent types; for dynamic NTK and longrope, those of HF's
  // stateful dynamic_rope_update (RopeFrequencyTracker), whose state lives with the sequence,
  // so each sequence of a batch evolves as it would alone in HF. Not thread-safe (one forward
  // call at a time per cache, as the caches are used anyway).
  const RopeFrequencies& RopeFrequenciesFor(const Rope& rope, int64_t seq_len);

 private:
  struct Layer {
    bool sliding = false;
    int64_t window = 0;
    int64_t capacity = 0;            // slots: the whole context, or the ring
    int64_t allocated = 0;           // slots with storage, <= capacity
    std::vector<uint8_t> keys, values;  // [kv_head][allocated][head_bytes_]
  };
  size_t RowBytes() const { return row_bytes_; }  // all heads of one slot
  // The first sliding layer whose ring no longer holds every position the token at n would see
  // (the sequence cannot be cut to n positions and continue), or -1.
  int LayerLosing(int64_t n) const;

  KvType type_;
  int64_t context_;
  int64_t rollback_;
  int64_t length_ = 0;
  // Highest position ever written. A ring slot holds the latest position written to it, so
  // position q is intact iff q > max_written_ - capacity (truncation does not restore rows).
  int64_t max_written_ = -1;
  size_t row_bytes_;
  size_t head_bytes_;
  int64_t kv_heads_;
  bool values_are_keys_ = false;
  std::vector<Layer> layers_;
  std::optional<RopeFrequencyTracker> rope_tracker_;  // made on first length-dependent use
};

}  // namespace tessera
