#include "engine/ngram.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace tessera {
namespace {

// The draft t[start, start + min(k', len - start)) with k' = min(k, max_model_len - len).
std::vector<int32_t> DraftFrom(std::span<const int32_t> tokens, int64_t start, int64_t max_model_len, int64_t k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  const int64_t n = std::min({k, max_model_len - len, len - start});
  if (n <= 0) return {};
  return std::vector<int32_t>(tokens.begin() + start, tokens.begin() + start + n);
}

uint64_t Mix(uint64_t x) {  // SplitMix64 finalizer: spreads (parent, token) keys over the table
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void ValidateNgramParams(int64_t min_n, int64_t max_n, int64_t k) {
  if (min_n < 1) Fail("n-gram speculation: min_n must be >= 1 (got ", min_n, ")");
  if (max_n < min_n) Fail("n-gram speculation: min_n ", min_n, " is larger than max_n ", max_n);
  if (k < 0) Fail("n-gram speculation: k must be >= 0 (got ", k, ")");
}

std::vector<int32_t> PrefixFunction(std::span<const int32_t> tokens) {
  const size_t n = tokens.size();
  std::vector<int32_t> lps(n, 0);
  int32_t cur = 0;
  for (size_t i = 1; i < n; ++i) {
    while (cur > 0 && tokens[i] != tokens[static_cast<size_t>(cur)]) cur = lps[static_cast<size_t>(cur) - 1];
    if (tokens[i] == tokens[static_cast<size_t>(cur)]) ++cur;
    lps[i] = cur;
  }
  return lps;
}

std::vector<int32_t> ProposeNgramKmp(std::span<const int32_t> tokens, int64_t min_n, int64_t max_n,
                                     int64_t max_model_len, int64_t k) {
  ValidateNgramParams(min_n, max_n, k);
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (len < min_n) return {};
  if (std::min(k, max_model_len - len) <= 0) return {};
  // r = the history reversed: the suffix becomes a prefix, and a match of the prefix of length
  // m ending at r[i] (i >= 1) is an earlier occurrence of the last m tokens. lps is kept only
  // for the first max_n prefixes; a match reaching max_n falls back to lps[max_n - 1], so matches
  // never exceed max_n and the scan goes on.
  const auto r = [&](int64_t i) { return tokens[static_cast<size_t>(len - 1 - i)]; };
  std::vector<int64_t> lps(static_cast<size_t>(max_n), 0);
  int64_t best = 0, position = 0, cur = 0;
  int64_t i = 1;
  while (i < len) {
    if (r(cur) == r(i)) {
      ++cur;
      // >=: a later i in r is an earlier occurrence in the history; the earliest wins ties.
      if (cur >= best) {
        best = cur;
        position = i;
      }
      if (i < max_n) lps[static_cast<size_t>(i)] = cur;
      if (cur == max_n) cur = lps[static_cast<size_t>(max_n - 1)];
      ++i;
    } else if (cur != 0) {
      cur = lps[static_cast<size_t>(cur - 1)];
    } else {
      ++i;
    }
  }
  if (best < min_n) return {};
  return DraftFrom(tokens, len - 1 - position + best, max_model_len, k);
}

std::vector<int32_t> ProposeNgramBrute(std::span<const int32_t> tokens, int64_t min_n, int64_t max_n,
                                       int64_t max_model_len, int64_t k) {
  ValidateNgramParams(min_n, max_n, k);
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (len < min_n) return {};
  if (std::min(k, max_model_len - len) <= 0) return {};
  for (int64_t n = std::min(max_n, len - 1); n >= min_n; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    for (int64_t s = 0; s < len - n; ++s) {
      if (std::equal(suffix.begin(), suffix.end(), tokens.begin() + s)) {
        return DraftFrom(tokens, s + n, max_model_len, k);
      }
    }
  }
  return {};
}

// ---- NgramIndex ----------------------------------------------------------------------------

NgramIndex::NgramIndex(int64_t min_n, int64_t max_n) : min_n_(min_n), max_n_(max_n) {
  ValidateNgramParams(min_n, max_n, 0);
  Reset();
}

void NgramIndex::Reset() {
  tokens_.clear();
  table_.assign(1024, Slot{});
  used_ = 0;
  first_end_.assign(1, -1);
  match_n_ = 0;
  match_end_ = -1;
}

void NgramIndex::Grow() {
  std::vector<Slot> old(table_.size() * 2);
  old.swap(table_);
  const size_t mask = table_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t h = Mix(s.key) & mask;
    while (table_[h].key != kEmpty) h = (h + 1) & mask;
    table_[h] = s;
  }
}

uint32_t NgramIndex::Intern(uint64_t key, int64_t position, bool& found) {
  size_t mask = table_.size() - 1;
  size_t h = Mix(key) & mask;
  while (table_[h].key != kEmpty) {
    if (table_[h].key == key) {
      found = true;
      return table_[h].id;
    }
    h = (h + 1) & mask;
  }
  found = false;
  if (first_end_.size() >= std::numeric_limits<uint32_t>::max()) {
    Fail("n-gram index: more than 2^32 distinct n-grams");
  }
  const uint32_t id = static_cast<uint32_t>(first_end_.size());
  first_end_.push_back(position);
  if (2 * (used_ + 1) > table_.size()) {  // keep the load factor <= 1/2
    Grow();
    mask = table_.size() - 1;
    h = Mix(key) & mask;
    while (table_[h].key != kEmpty) h = (h + 1) & mask;
  }
  table_[h] = Slot{key, id};
  ++used_;
  return id;
}

void NgramIndex::Append(int32_t token) {
  if (token < 0) Fail("n-gram index: token id ", token, " is negative");
  tokens_.push_back(token);
  const int64_t p = size() - 1;
  // The n-grams ending at p, n = 1 .. min(max_n, p + 1), shortest first: each is its first
  // token followed by the previous (shorter) one. Looked up before insertion, so `found` means
  // "ended earlier than p"; once one is new, every longer one is new too.
  uint32_t id = 0;
  bool repeated = true;
  match_n_ = 0;
  match_end_ = -1;
  const int64_t longest = std::min(max_n_, p + 1);
  for (int64_t n = 1; n <= longest; ++n) {
    const uint32_t t = static_cast<uint32_t>(tokens_[static_cast<size_t>(p - n + 1)]);
    bool found = false;
    id = Intern((static_cast<uint64_t>(id) << 32) | t, p, found);
    if (repeated && found) {
      match_n_ = n;
      match_end_ = first_end_[id];
    }
    repeated = repeated && found;
  }
}

void NgramIndex::Propose(int64_t k, int64_t max_model_len, std::vector<int32_t>& out) const {
  out.clear();
  if (match_n_ < min_n_) return;
  const int64_t len = size();
  const int64_t start = match_end_ + 1;  // <= len - 1: the occurrence ended before the last token
  const int64_t n = std::min({k, max_model_len - len, len - start});
  if (n <= 0) return;
  out.assign(tokens_.begin() + start, tokens_.begin() + start + n);
}

}  // namespace tessera
