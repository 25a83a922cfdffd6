#include "tokenizer/bpe.h"

#include <sys/mman.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace tessera {
namespace {

inline uint64_t Mix(uint64_t a, uint64_t b) {
  const __uint128_t r = static_cast<__uint128_t>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

size_t NextPowerOfTwo(size_t n) {
  size_t p = 16;
  while (p < n) p <<= 1;
  return p;
}

constexpr size_t kHugePage = size_t{1} << 21;

}  // namespace

void* AllocateLarge(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes);
  const size_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);  // advisory: without THP this is a plain allocation
  return p;
}

void FreeLarge(void* p, size_t bytes) {
  if (bytes < kHugePage) {
    ::operator delete(p);
  } else {
    std::free(p);
  }
}

uint64_t HashBytes(const void* data, size_t size) {
  // A short multiply-fold hash (wyhash style): tokens are short, so per-call setup matters
  // more than bulk throughput.
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (size * 0xA0761D6478BD642Full);
  while (size >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = Mix(h ^ w, 0xE7037ED1A0B428DBull);
    p += 8;
    size -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, size);
  return Mix(h ^ w, 0x8EBC6AF09C88C6E3ull);
}

// ---- BytesToId ----------------------------------------------------------------------------

uint64_t BytesToId::Prefix(std::string_view key) {
  uint64_t prefix = 0;
  std::memcpy(&prefix, key.data(), std::min<size_t>(key.size(), 8));
  return prefix;
}

bool BytesToId::Matches(const Slot& slot, uint32_t tag, uint64_t prefix, std::string_view key) const {
  if (slot.hash != tag || slot.length != key.size() || slot.prefix != prefix) return false;
  return key.size() <= 8 || std::memcmp(arena_.data() + slot.offset + 8, key.data() + 8, key.size() - 8) == 0;
}

void BytesToId::Reserve(size_t count) {
  const size_t want = NextPowerOfTwo(count * 2);
  if (want <= slots_.size()) return;
  auto old = std::move(slots_);
  slots_.assign(want, Slot{});
  const size_t mask = want - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    size_t i = HashBytes(arena_.data() + s.offset, s.length) & mask;
    while (slots_[i].id >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void BytesToId::Grow() { Reserve(std::max<size_t>(16, size_ * 2)); }

void BytesToId::Prefetch(uint64_t hash) const {
  if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
}

bool BytesToId::Insert(std::string_view key, int32_t id, uint64_t h) {
  TESSERA_CHECK(id >= 0);
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  const uint32_t tag = static_cast<uint32_t>(h >> 32);
  const uint64_t prefix = Prefix(key);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (; slots_[i].id >= 0; i = (i + 1) & mask) {
    if (Matches(slots_[i], tag, prefix, key)) return false;
  }
  if (arena_.size() + key.size() > UINT32_MAX) Fail("token table exceeds 4 GiB");
  slots_[i] = Slot{prefix, tag, id, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size())};
  arena_.append(key);
  ++size_;
  return true;
}

int32_t BytesToId::Find(std::string_view key, uint64_t h) const {
  if (slots_.empty()) return -1;
  const uint32_t tag = static_cast<uint32_t>(h >> 32);
  const uint64_t prefix = Prefix(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (Matches(s, tag, prefix, key)) return s.id;
  }
}

// ---- MergeTable ---------------------------------------------------------------------------

namespace {
inline uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
inline size_t PairSlot(uint64_t key, size_t mask) { return Mix(key, 0x9FB21C651E98DF25ull) & mask; }
}  // namespace

void MergeTable::Reserve(size_t count) {
  const size_t want = NextPowerOfTwo(count * 2);
  if (want <= slots_.size()) return;
  auto old = std::move(slots_);
  slots_.assign(want, Slot{});
  const size_t mask = want - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = PairSlot(s.key, mask);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void MergeTable::Grow() { Reserve(std::max<size_t>(16, size_ * 2)); }

void MergeTable::Insert(int32_t left, int32_t right, MergeRule rule) {
  TESSERA_CHECK(left >= 0 && right >= 0);
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  const uint64_t key = PairKey(left, right);
  const size_t mask = slots_.size() - 1;
  size_t i = PairSlot(key, mask);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
  if (slots_[i].key == kEmpty) ++size_;
  slots_[i] = Slot{key, rule};
}

void MergeTable::Prefetch(int32_t left, int32_t right) const {
  if (!slots_.empty()) __builtin_prefetch(&slots_[PairSlot(PairKey(left, right), slots_.size() - 1)]);
}

const MergeRule* MergeTable::Find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = PairKey(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = PairSlot(key, mask);; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i].rule;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

// ---- BpeModel ---------------------------------------------------------------------------

BpeModel::BpeModel() {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  std::fill(std::begin(byte_fallback_ids_), std::end(byte_fallback_ids_), -1);
  byte_pairs_.assign(1 << 16, MergeRule{-1, -1});
}

void BpeModel::IndexByteTokens() {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_ids_[b] = vocab_.Find(std::string_view(&c, 1));
    if (byte_ids_[b] < 0) continue;
    if (static_cast<size_t>(byte_ids_[b]) >= byte_of_token_.size()) byte_of_token_.resize(byte_ids_[b] + 1, -1);
    byte_of_token_[byte_ids_[b]] = static_cast<int16_t>(b);
  }
}

void BpeModel::AddMerge(int32_t left, int32_t right, MergeRule rule) {
  merges_.Insert(left, right, rule);
  const auto byte_of = [&](int32_t id) -> int {
    return static_cast<size_t>(id) < byte_of_token_.size() ? byte_of_token_[id] : -1;
  };
  const int a = byte_of(left), b = byte_of(right);
  if (a >= 0 && b >= 0) byte_pairs_[(a << 8) | b] = rule;
}

const MergeRule* BpeModel::FindMerge(int32_t left, int32_t right) const { return merges_.Find(left, right); }

// Short pieces: the same choice as MergeLoop below (the mergeable adjacent pair of lowest rank,
// leftmost on ties), found by scanning an array of pair ranks, which beats tree upkeep when
// there are at most kSmallPiece symbols.
void BpeModel::MergeSmall(std::string_view piece, std::vector<int32_t>& out) const {
  constexpr int32_t kNoMerge = INT32_MAX;
  int32_t ids[kSmallPiece];
  int32_t ranks[kSmallPiece];    // ranks[i]: pair (ids[i], ids[i + 1]); kNoMerge if none
  int32_t new_ids[kSmallPiece];
  int m = 0;
  int prev_byte = -1;
  for (unsigned char b : piece) {
    if (byte_ids_[b] < 0) continue;
    if (prev_byte >= 0) {
      const MergeRule& rule = byte_pairs_[(prev_byte << 8) | b];
      ranks[m - 1] = rule.rank >= 0 ? rule.rank : kNoMerge;
      new_ids[m - 1] = rule.new_id;
    }
    ids[m++] = byte_ids_[b];
    prev_byte = b;
  }
  auto rate = [&](int i) {
    const MergeRule* rule = FindMerge(ids[i], ids[i + 1]);
    ranks[i] = rule != nullptr ? rule->rank : kNoMerge;
    new_ids[i] = rule != nullptr ? rule->new_id : -1;
  };
  while (m > 1) {
    int best = 0;
    for (int i = 1; i < m - 1; ++i) {
      if (ranks[i] < ranks[best]) best = i;  // strict: the leftmost of equal ranks wins
    }
    if (ranks[best] == kNoMerge) break;
    ids[best] = new_ids[best];
    for (int i = best + 1; i + 1 < m; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      new_ids[i] = new_ids[i + 1];
    }
    --m;
    if (best > 0) rate(best - 1);
    if (best + 1 < m) rate(best);
  }
  out.insert(out.end(), ids, ids + m);
}

namespace {

constexpr int32_t kNoRank = INT32_MAX;
constexpr uint64_t kNoPair = ~uint64_t{0};
constexpr int32_t kRankBlock = 16;  // ranks per leaf of the min-tree

inline uint64_t RankKey(int32_t rank, int32_t start) {
  return rank == kNoRank ? kNoPair : (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) | static_cast<uint32_t>(start);
}

// The symbols of one piece laid out as BpeScratch describes, and the min-tree over their ranks.
class SymbolRun {
 public:
  explicit SymbolRun(BpeScratch& scratch)
      : ids_(scratch.ids.data()), ranks_(scratch.ranks.data()), tree_(scratch.tree),
        n_(static_cast<int32_t>(scratch.ids.size())) {}

  // Last index of the symbol starting at `s`.
  int32_t EndOf(int32_t s) const {
    const int32_t a = s + 1;
    if (a >= n_ || ids_[a] >= 0) return s;  // one index: the next index starts a symbol
    const int32_t j = -1 - ids_[a];
    return j < a ? a : j;  // a link back to s: index a is the end; else it names the end
  }
  // Start of the symbol after / before the one starting at `s`, or -1.
  int32_t Next(int32_t s) const {
    const int32_t e = EndOf(s) + 1;
    return e < n_ ? e : -1;
  }
  int32_t Prev(int32_t s) const {
    if (s == 0) return -1;
    const int32_t v = ids_[s - 1];  // the previous symbol's end
    return v >= 0 ? s - 1 : -1 - v;
  }
  int32_t Id(int32_t s) const { return ids_[s]; }

  // The symbol at `s` absorbs the next one, [r, e], as token `id`.
  void Join(int32_t s, int32_t r, int32_t e, int32_t id) {
    ids_[s] = id;
    ids_[r] = -1 - s;  // no longer a start (its slot is an interior or the end below)
    if (s + 1 == e) {
      ids_[e] = -1 - s;
    } else {
      ids_[s + 1] = -1 - e;
      ids_[e] = -1 - s;
    }
  }

  void BuildTree() {
    leaves_ = (n_ + kRankBlock - 1) / kRankBlock;
    tree_.assign(2 * static_cast<size_t>(leaves_), kNoPair);
    for (int32_t b = 0; b < leaves_; ++b) tree_[leaves_ + b] = BlockMin(b);
    for (int32_t i = leaves_ - 1; i >= 1; --i) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
  }
  // The lowest-ranked pair, leftmost on ties (kNoPair: none). Every node of the tree descends
  // from node 1 (also when the leaf count is not a power of two), so it is the minimum of all.
  uint64_t Top() const { return tree_[1]; }

  void SetRank(int32_t s, int32_t rank) { ranks_[s] = rank; }
  // Recomputes the leaf of index `s` and its ancestors, stopping where nothing changes.
  void Refresh(int32_t s) {
    const int32_t b = s / kRankBlock;
    size_t i = static_cast<size_t>(leaves_ + b);
    uint64_t value = BlockMin(b);
    if (tree_[i] == value) return;
    tree_[i] = value;
    for (i >>= 1; i >= 1; i >>= 1) {
      value = std::min(tree_[2 * i], tree_[2 * i + 1]);
      if (tree_[i] == value) return;
      tree_[i] = value;
    }
  }

 private:
  uint64_t BlockMin(int32_t b) const {
    uint64_t best = kNoPair;
    const auto end = static_cast<int32_t>(std::min<int64_t>(n_, (int64_t{b} + 1) * kRankBlock));
    for (int32_t i = b * kRankBlock; i < end; ++i) best = std::min(best, RankKey(ranks_[i], i));
    return best;
  }

  int32_t* ids_;
  int32_t* ranks_;
  std::vector<uint64_t>& tree_;
  int32_t n_;
  int32_t leaves_ = 0;
};

}  // namespace

int32_t BpeModel::RankOf(int32_t left, int32_t right) const {
  const MergeRule* rule = FindMerge(left, right);
  return rule != nullptr ? rule->rank : kNoRank;
}

// Runs the merges of the symbols in `scratch` (ids and the ranks of their initial pairs set)
// and appends the resulting ids. Each step merges the lowest-ranked pair, leftmost on ties, and
// re-rates the two pairs the merge changed; a symbol's rank is only ever that of its current
// pair, so the tree's minimum is HF's next merge.
void BpeModel::MergeLoop(BpeScratch& scratch, std::vector<int32_t>& out) const {
  SymbolRun run(scratch);
  run.BuildTree();
  for (uint64_t top = run.Top(); top != kNoPair; top = run.Top()) {
    const auto s = static_cast<int32_t>(top & 0xffffffffu);
    const int32_t r = run.Next(s);
    TESSERA_CHECK(r >= 0);  // ranks[s] is exact: a symbol without a next one has no rank
    const int32_t e = run.EndOf(r);
    const MergeRule* rule = FindMerge(run.Id(s), run.Id(r));
    TESSERA_CHECK(rule != nullptr);
    run.Join(s, r, e, rule->new_id);
    run.SetRank(r, kNoRank);
    const int32_t next = run.Next(s);
    run.SetRank(s, next >= 0 ? RankOf(rule->new_id, run.Id(next)) : kNoRank);
    const int32_t prev = run.Prev(s);
    if (prev >= 0) run.SetRank(prev, RankOf(run.Id(prev), rule->new_id));
    run.Refresh(s);
    if (r / kRankBlock != s / kRankBlock) run.Refresh(r);
    if (prev >= 0 && prev / kRankBlock != s / kRankBlock) run.Refresh(prev);
  }
  for (int32_t s = 0; s >= 0; s = run.Next(s)) out.push_back(run.Id(s));
}

void BpeModel::Merge(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const {
  // Kept bytes first (a byte without a one-byte token is dropped): short pieces, the common
  // case, never touch the scratch buffers.
  size_t kept = 0;
  for (unsigned char b : piece) kept += byte_ids_[b] >= 0;
  if (kept == 0) return;
  if (kept == 1) {
    for (unsigned char b : piece) {
      if (byte_ids_[b] >= 0) out.push_back(byte_ids_[b]);
    }
    return;
  }
  if (kept <= kSmallPiece) {
    MergeSmall(piece, out);
    return;
  }
  if (kept > static_cast<size_t>(INT32_MAX) - 1) Fail("a piece of ", kept, " bytes is too long to tokenize");
  auto& ids = scratch.ids;
  auto& ranks = scratch.ranks;
  // Cleared first, so that growing allocates exactly `kept` (no doubling past it).
  ids.clear();
  ranks.clear();
  ids.resize(kept);
  ranks.resize(kept);
  // Initial pairs are all byte pairs: no hashing needed.
  size_t i = 0;
  int prev_byte = -1;
  for (unsigned char b : piece) {
    if (byte_ids_[b] < 0) continue;
    if (prev_byte >= 0) {
      const int32_t rank = byte_pairs_[(prev_byte << 8) | b].rank;
      ranks[i - 1] = rank >= 0 ? rank : kNoRank;
    }
    ids[i++] = byte_ids_[b];
    prev_byte = b;
  }
  ranks[kept - 1] = kNoRank;
  MergeLoop(scratch, out);
}

void BpeModel::SetCharSymbols(int32_t unk_id, bool byte_fallback, bool fuse_unk) {
  char_symbols_ = true;
  unk_id_ = unk_id;
  fuse_unk_ = fuse_unk;
  for (int b = 0; b < 256; ++b) {
    static const char kHex[] = "0123456789ABCDEF";
    const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    byte_fallback_ids_[b] = byte_fallback ? vocab_.Find(std::string_view(name, sizeof(name))) : -1;
  }
}

void BpeModel::MergeChars(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const {
  if (piece.size() > static_cast<size_t>(INT32_MAX) - 1) Fail("a piece of ", piece.size(), " bytes is too long to tokenize");
  auto& ids = scratch.ids;
  ids.clear();
  ids.reserve(piece.size());  // at most one symbol per byte: no growth by doubling
  const auto add = [&](int32_t id) { ids.push_back(id); };
  // As HF's BPE::merge_word: a pending unknown is emitted before the next known character,
  // but not before byte-fallback tokens (HF `continue`s past the flush there), and at the end.
  bool unk_pending = false;
  for (size_t pos = 0; pos < piece.size();) {
    const size_t start = pos;
    const auto b = static_cast<unsigned char>(piece[pos]);
    pos += b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    const std::string_view ch = piece.substr(start, pos - start);
    const int32_t id = vocab_.Find(ch);
    if (id >= 0) {
      if (unk_pending) add(unk_id_);
      unk_pending = false;
      add(id);
      continue;
    }
    bool all_bytes = true;
    for (unsigned char c : ch) all_bytes = all_bytes && byte_fallback_ids_[c] >= 0;
    if (all_bytes) {
      for (unsigned char c : ch) add(byte_fallback_ids_[c]);
      continue;
    }
    if (unk_id_ < 0) continue;  // no unk token: the character is dropped
    if (unk_pending && !fuse_unk_) add(unk_id_);
    unk_pending = true;
  }
  if (unk_pending) add(unk_id_);
  if (ids.empty()) return;
  auto& ranks = scratch.ranks;
  ranks.clear();
  ranks.resize(ids.size());
  for (size_t i = 0; i + 1 < ids.size(); ++i) ranks[i] = RankOf(ids[i], ids[i + 1]);
  ranks.back() = kNoRank;
  MergeLoop(scratch, out);
}

}  // namespace tessera
