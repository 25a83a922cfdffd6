// N-gram (prompt-lookup) drafting for speculative decoding
// (../shared/reference/speculative-ngram.md §1).
//
// Semantics (vLLM's `_find_longest_matched_ngram_and_propose_tokens`, §1.2). For the history
// t[0, len) (prompt and generated tokens, no drafts) and 1 <= min_n <= max_n:
//   - no draft when len < min_n, or when k' = min(k, max_model_len - len) <= 0;
//   - n* = the largest n in [min_n, max_n] such that the last n tokens occur earlier, i.e. at a
//     start s < len - n (the occurrence ends before the last token; it may overlap the suffix);
//   - ties: among the occurrences of that n-gram, the EARLIEST (smallest s) wins;
//   - the draft is t[s + n, s + n + k'), clipped at len: it may be shorter than k and may run
//     into the suffix itself (periodic text gives periodic drafts).
// Example (§1.2): [1, 2, 3, 4, 2, 3], min 2, max 3, k 4 -> [4, 2, 3].
//
// Three implementations of the same function:
//   NgramIndex         incremental: O(max_n) per appended token, O(1) per proposal (used by
//                      the generator);
//   ProposeNgramKmp    vLLM's scan: KMP prefix function of the reversed history, O(len) per
//                      proposal (the benchmark baseline);
//   ProposeNgramBrute  the definition above, written out (the test oracle).
//
// NgramIndex: every distinct n-gram (n <= max_n) of the history gets an id, defined
// recursively: the n-gram ending at p is (its first token t[p-n+1], the id of the (n-1)-gram
// ending at p), with id 0 for the empty sequence. A hash table maps (token, parent id) -> id, so
// the ids of the n-grams ending at a new position cost one probe per n, without comparing
// token runs, and equal ids mean equal n-grams exactly (no hash collisions to resolve). Each id
// keeps the position where its n-gram FIRST ended: the earliest occurrence, which is the tie
// rule. Looking the n-grams of a new position up before inserting them tells which of them
// occurred earlier; occurrence is monotone in n (a repeated n-gram's suffixes repeat too), so
// the longest repeated suffix is the last one found. Memory: at most max_n ids per position.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

// Defaults of `tessera generate --spec ngram` (documented in README): min_n 2 re-anchors a draft
// two tokens after the output diverges from the copied text; max_n 5 is vLLM's default
// (speculative.py: both 5 when neither is given); k 8 is the most drafts the cost model
// weighs (c(k) is measured for k = 1..8, docs/BENCHMARKS.md).
inline constexpr int64_t kDefaultNgramMinN = 2;
inline constexpr int64_t kDefaultNgramMaxN = 5;
inline constexpr int64_t kDefaultSpecK = 8;

// Throws tessera::Error with one line unless 1 <= min_n <= max_n and k >= 0.
void ValidateNgramParams(int64_t min_n, int64_t max_n, int64_t k);

// The KMP prefix function (lps) of `tokens`: lps[i] = the length of the longest proper prefix
// of tokens[0, i] that is also its suffix (§1.4: lps([1, 2, 1, 2, 3]) = [0, 0, 1, 2, 0]).
std::vector<int32_t> PrefixFunction(std::span<const int32_t> tokens);

// vLLM's algorithm (§1.2), step for step. Validates like ValidateNgramParams.
std::vector<int32_t> ProposeNgramKmp(std::span<const int32_t> tokens, int64_t min_n, int64_t max_n,
                                     int64_t max_model_len, int64_t k);

// The brute-force definition (§1.2): for n from min(max_n, len - 1) down to min_n, the first
// start s < len - n whose n tokens equal the last n.
std::vector<int32_t> ProposeNgramBrute(std::span<const int32_t> tokens, int64_t min_n, int64_t max_n,
                                       int64_t max_model_len, int64_t k);

class NgramIndex {
 public:
  // Throws tessera::Error unless 1 <= min_n <= max_n.
  NgramIndex(int64_t min_n, int64_t max_n);

  // Appends one token (>= 0, else tessera::Error) to the history and indexes the n-grams that
  // end at it.
  void Append(int32_t token);
  void Append(std::span<const int32_t> tokens) {
    for (int32_t t : tokens) Append(t);
  }
  void Reset();

  // The draft for the current history: up to min(k, max_model_len - size()) tokens (the same
  // result as ProposeNgramKmp on tokens()). Appends to nothing; `out` is overwritten.
  void Propose(int64_t k, int64_t max_model_len, std::vector<int32_t>& out) const;

  // The longest repeated suffix within [min_n, max_n] for the current history: its length (0 if
  // none) and the start of its earliest occurrence.
  int64_t match_length() const { return match_n_ >= min_n_ ? match_n_ : 0; }
  int64_t match_start() const { return match_end_ - match_n_ + 1; }

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t min_n() const { return min_n_; }
  int64_t max_n() const { return max_n_; }
  // Distinct n-grams (1 <= n <= max_n) indexed so far.
  int64_t num_ngrams() const { return static_cast<int64_t>(first_end_.size()) - 1; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;  // (parent id << 32) | token
    uint32_t id = 0;
  };
  // The id of `key`, creating it with first end `position` when absent; `found` tells which.
  uint32_t Intern(uint64_t key, int64_t position, bool& found);
  void Grow();

  int64_t min_n_, max_n_;
  std::vector<int32_t> tokens_;
  std::vector<Slot> table_;        // open addressing, linear probing, power-of-two size
  size_t used_ = 0;
  std::vector<int64_t> first_end_;  // [id]: where the n-gram first ended; [0] is the empty one
  int64_t match_n_ = 0;             // longest suffix (<= max_n) that occurred earlier
  int64_t match_end_ = -1;          // end position of its earliest occurrence
};

}  // namespace tessera
