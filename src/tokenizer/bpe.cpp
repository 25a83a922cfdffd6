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

// Short pieces: the same choice as the heap loop below (the mergeable adjacent pair of lowest
// rank, leftmost on ties), found by scanning an array of pair ranks, which beats heap upkeep
// when there are at most kSmallPiece symbols.
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
// Min-heap on (rank, pos): std heaps are max-heaps, so the comparator is inverted. Entries
// with equal (rank, pos) describe the same pair, so ties need no further order.
struct Later {
  bool operator()(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};
}  // namespace

// Runs the merges of the symbols and heap in `scratch` (the heap holding the candidate pairs
// of the initial symbols) and appends the resulting ids. Always inlined: out of line, the
// compiler also stopped inlining the push_backs of Merge, the o200k hot path.
[[gnu::always_inline]] inline void BpeModel::MergeLoop(BpeScratch& scratch, std::vector<int32_t>& out) const {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  constexpr Later later{};
  auto push = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const MergeRule* rule = FindMerge(symbols[pos].id, symbols[next].id)) {
      heap.push_back({rule->rank, pos, rule->new_id, symbols[pos].id, symbols[next].id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    // Stale candidate: the pair at `pos` changed since it was made (see bpe.h).
    if (left.id != top.left_id || symbols[left.next].id != top.right_id) continue;
    BpeScratch::Symbol& right = symbols[left.next];
    left.id = top.new_id;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void BpeModel::Merge(std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) const {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  for (unsigned char b : piece) {
    const int32_t id = byte_ids_[b];
    if (id < 0) continue;
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  if (symbols.size() == 1) {
    out.push_back(symbols[0].id);
    return;
  }
  if (symbols.size() <= kSmallPiece) {
    MergeSmall(piece, out);
    return;
  }

  constexpr Later later{};
  // Initial pairs are all byte pairs (the dropped bytes aside): no hashing needed.
  {
    int32_t pos = 0;
    unsigned char prev_byte = 0;
    bool have_prev = false;
    for (unsigned char b : piece) {
      if (byte_ids_[b] < 0) continue;
      if (have_prev) {
        const MergeRule& rule = byte_pairs_[(prev_byte << 8) | b];
        if (rule.rank >= 0) heap.push_back({rule.rank, pos - 1, rule.new_id, byte_ids_[prev_byte], byte_ids_[b]});
      }
      prev_byte = b;
      have_prev = true;
      ++pos;
    }
    std::make_heap(heap.begin(), heap.end(), later);
  }
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
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  const auto add = [&](int32_t id) {
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  };
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
  if (symbols.empty()) return;
  symbols.back().next = -1;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const MergeRule* rule = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({rule->rank, static_cast<int32_t>(i), rule->new_id, symbols[i].id, symbols[i + 1].id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), Later{});
  MergeLoop(scratch, out);
}

}  // namespace tessera
