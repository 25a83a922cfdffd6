// Byte-level BPE model: vocabulary and merge tables and the merge loop of Hugging Face's
// `BPE` model (tokenizers/src/models/bpe/{model.rs,word.rs}), keyed by raw bytes instead of
// the byte-level characters (Ġ for space, ...) in which tokenizer.json spells tokens; the
// mapping is a bijection, so lookups are equivalent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// Allocations of 2 MiB or more are 2 MiB aligned and marked for transparent huge pages: the
// hash tables below are probed at random (about 30 MB for o200k), and with 4 KiB pages nearly
// every probe would also miss the TLB.
void* AllocateLarge(size_t bytes);
void FreeLarge(void* p, size_t bytes);

template <typename T>
struct LargeTableAllocator {
  using value_type = T;
  LargeTableAllocator() = default;
  template <typename U>
  LargeTableAllocator(const LargeTableAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateLarge(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { FreeLarge(p, n * sizeof(T)); }
  bool operator==(const LargeTableAllocator&) const { return true; }
};

uint64_t HashBytes(const void* data, size_t size);

// Open-addressing hash map from byte strings to int32 ids. Keys live in one arena; each slot
// also holds the first 8 key bytes, so a probe for a key of up to 8 bytes (most words) never
// touches the arena.
class BytesToId {
 public:
  void Reserve(size_t count);
  // Returns false (and changes nothing) if `key` is already present.
  bool Insert(std::string_view key, int32_t id) { return Insert(key, id, HashBytes(key.data(), key.size())); }
  int32_t Find(std::string_view key) const { return Find(key, HashBytes(key.data(), key.size())); }  // -1: absent
  // Batched use while loading: hash and Prefetch a group of keys, then Find/Insert them, so
  // that the cache misses of the group overlap. `hash` must be HashBytes(key).
  void Prefetch(uint64_t hash) const;
  bool Insert(std::string_view key, int32_t id, uint64_t hash);
  int32_t Find(std::string_view key, uint64_t hash) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t prefix = 0;  // key bytes 0..7, zero padded
    uint32_t hash = 0;    // high half of the 64-bit hash
    int32_t id = -1;      // -1: empty
    uint32_t offset = 0;  // of the whole key in arena_
    uint32_t length = 0;
  };
  static uint64_t Prefix(std::string_view key);
  bool Matches(const Slot& slot, uint32_t tag, uint64_t prefix, std::string_view key) const;
  void Grow();
  std::vector<Slot, LargeTableAllocator<Slot>> slots_;
  std::string arena_;
  size_t size_ = 0;
};

// A merge of two adjacent symbols: the pair's rank (its line in `merges`, lower merges first)
// and the id of the concatenated token.
struct MergeRule {
  int32_t rank;
  int32_t new_id;
};

// Open-addressing hash map from (left id, right id) to MergeRule.
class MergeTable {
 public:
  void Reserve(size_t count);
  // Later insertions of the same pair replace earlier ones, as HF's HashMap collect does.
  void Insert(int32_t left, int32_t right, MergeRule rule);
  const MergeRule* Find(int32_t left, int32_t right) const;
  void Prefetch(int32_t left, int32_t right) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    MergeRule rule{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  void Grow();
  std::vector<Slot, LargeTableAllocator<Slot>> slots_;
  size_t size_ = 0;
};

// Reusable buffers for one thread's BPE merges: about 9 bytes per initial symbol of the longest
// piece merged (at most one symbol per byte), so that one huge piece (10 MB of one letter, or a
// whole text under a model without pre-tokenizer) costs a small constant per input byte
// (issue 44; the linked list and candidate heap this replaces took ~70 bytes per byte).
struct BpeScratch {
  // Index i is the i-th initial symbol. A symbol covers the indices [start, end] of the initial
  // symbols merged into it: ids[start] is its token id (>= 0); index start + 1 holds -1 - end and
  // index end holds -1 - start (a two-index symbol's second index, being both, holds -1 - start),
  // so that the next and previous symbols are found in O(1) without per-symbol pointers.
  std::vector<int32_t> ids;
  // ranks[start]: the rank of the merge of the symbol at `start` with the next one, or INT32_MAX
  // (no merge, no next symbol, or not a start). Always exact: no stale entries to skip.
  std::vector<int32_t> ranks;
  // A min-tree over blocks of 16 ranks: tree[1] is the smallest (rank << 32 | start), i.e. the
  // lowest-ranked pair, leftmost on ties; ~0 when nothing merges.
  std::vector<uint64_t> tree;
};

// The vocabulary and merges of a byte-level BPE model.
class BpeModel {
 public:
  BpeModel();

  BytesToId& vocab() { return vocab_; }
  const BytesToId& vocab() const { return vocab_; }
  void ReserveMerges(size_t count) { merges_.Reserve(count); }
  // Call after the vocabulary is complete and before the merges are added.
  void IndexByteTokens();
  // Later merges of the same pair replace earlier ones, as HF's HashMap collect does.
  void AddMerge(int32_t left, int32_t right, MergeRule rule);
  void PrefetchMerge(int32_t left, int32_t right) const { merges_.Prefetch(left, right); }

  // Appends the ids for one pre-token `piece` (raw bytes) to `out`. Mirrors HF's
  // Word::merge_all: the initial symbols are the bytes (a byte without a one-byte token is
  // dropped, as HF does without unk token or byte fallback), then the adjacent pair of lowest
  // rank is merged, leftmost first. HF keeps a min-heap of candidates and skips the stale ones
  // when popped; here every symbol's pair rank is kept exact and the minimum found in a tree
  // over blocks of ranks (BpeScratch), which picks the same pair at every step.
  void Merge(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const;

  // Models whose vocabulary is spelled in UTF-8 rather than byte-level characters (converted
  // SentencePiece models such as Mistral's): the initial symbols are the characters of the
  // piece, looked up whole. A character without a token becomes its "<0xNN>" tokens when
  // `byte_fallback` and all of them exist, otherwise the unk token (consecutive ones fused into
  // one with `fuse_unk`), or is dropped when `unk_id` is -1. Call after the vocabulary is
  // complete.
  void SetCharSymbols(int32_t unk_id, bool byte_fallback, bool fuse_unk);
  bool char_symbols() const { return char_symbols_; }
  // As Merge, for a model set up by SetCharSymbols (HF BPE::merge_word, then merge_all).
  void MergeChars(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const;

 private:
  static constexpr size_t kSmallPiece = 48;  // symbols; longer pieces use MergeLoop
  const MergeRule* FindMerge(int32_t left, int32_t right) const;
  void MergeSmall(std::string_view piece, std::vector<int32_t>& out) const;
  int32_t RankOf(int32_t left, int32_t right) const;
  void MergeLoop(BpeScratch& scratch, std::vector<int32_t>& out) const;

  BytesToId vocab_;
  MergeTable merges_;
  int32_t byte_ids_[256];      // id of the one-byte token for each byte, or -1
  std::vector<int16_t> byte_of_token_;  // id -> byte of a one-byte token, -1 otherwise
  // Merges of two one-byte tokens, indexed by (left byte << 8 | right byte); rank -1 = none.
  // The first merges of every piece come from here instead of the large table.
  std::vector<MergeRule> byte_pairs_;
  // SetCharSymbols.
  bool char_symbols_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;
  int32_t byte_fallback_ids_[256];  // id of "<0xNN>" for each byte, or -1
};

}  // namespace tessera
