// N-gram proposer (engine/ngram.h): vLLM's upstream cases (tests/v1/spec_decode/test_ngram.py,
// ../shared/reference/speculative-ngram.md §1.4), the cases §1.4 asks tessera to add, and the
// incremental index against vLLM's KMP scan and the brute-force definition (§1.2) on random and
// long histories.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.h"
#include "engine/ngram.h"
#include "test_util.h"

namespace tessera {
namespace {

using Tokens = std::vector<int32_t>;

constexpr int64_t kLongContext = 1 << 20;

// The draft of NgramIndex fed `tokens` one at a time.
Tokens IndexDraft(const Tokens& tokens, int64_t min_n, int64_t max_n, int64_t max_model_len, int64_t k) {
  NgramIndex index(min_n, max_n);
  index.Append(tokens);
  Tokens out;
  index.Propose(k, max_model_len, out);
  return out;
}

struct Case {
  Tokens tokens;
  int64_t min_n, max_n, k;
  Tokens expected;
  int64_t max_model_len = kLongContext;
};

// §1.4, rows 1-13 in order (row 9's "any k" is taken as 3).
const std::vector<Case>& UpstreamCases() {
  static const std::vector<Case> cases = {
      {{1, 2, 3, 4, 1, 2, 3, 5, 6}, 2, 2, 2, {}},
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 3, {4, 1, 2}},
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 2, {4, 1}},
      {{1, 2, 3, 4, 1, 2, 3}, 1, 1, 3, {4, 1, 2}},
      {{1, 2, 3, 4, 1, 2, 3}, 1, 1, 2, {4, 1}},
      {{1, 3, 6, 2, 3, 4, 1, 2, 3}, 2, 2, 3, {4, 1, 2}},
      {{1, 3, 6, 2, 3, 4, 1, 2, 3}, 1, 1, 2, {6, 2}},  // the earliest "3" wins
      {{1, 2, 3, 4, 5}, 2, 2, 2, {}},
      {{1, 2, 3, 4, 1, 2, 3}, 4, 4, 3, {}},
      {{1, 2, 3, 4, 1, 2, 3}, 3, 4, 2, {4, 1}},
      {{2, 3, 4, 5, 1, 2, 3, 4, 1, 2, 3, 4}, 3, 4, 2, {1, 2}},  // the 4-gram wins over [5, 1]
      {{3, 4, 5, 2, 3, 4, 1, 2, 3, 4}, 2, 4, 2, {1, 2}},        // not [5, 2]
      {{1, 2, 3, 100, 1, 2, 3, 200, 1, 2, 3, 300, 1, 2, 3}, 3, 3, 2, {100, 1}},  // first occurrence
  };
  return cases;
}

// The cases §1.4 asks tessera to add.
const std::vector<Case>& AddedCases() {
  static const std::vector<Case> cases = {
      // The docstring example of §1.2: [4, 2, 3] has no earlier occurrence, [2, 3] does.
      {{1, 2, 3, 4, 2, 3}, 2, 3, 4, {4, 2, 3}},
      // max_model_len clamp: len = max_model_len - 1 -> at most one token; len = max_model_len -> none.
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 3, {4}, 8},
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 3, {}, 7},
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 3, {}, 5},
      // k larger than the continuation: the draft runs to the end of the history.
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 10, {4, 1, 2, 3}},
      // min_n > len.
      {{1, 2, 1}, 4, 6, 3, {}},
      // The occurrence may overlap the suffix: [1, 1, 1] matches "1 1" at 0-1 and drafts the
      // last token; a periodic history drafts its period.
      {{1, 1, 1}, 2, 2, 4, {1}},
      {{7, 8, 9, 7, 8, 9, 7, 8}, 2, 5, 5, {9, 7, 8}},
      // k = 0 and an empty history: no draft.
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 0, {}},
      {{}, 1, 3, 3, {}},
  };
  return cases;
}

void ExpectAllAgree(const Case& c, const std::string& label) {
  EXPECT_EQ(ProposeNgramKmp(c.tokens, c.min_n, c.max_n, c.max_model_len, c.k), c.expected) << label << " (KMP)";
  EXPECT_EQ(ProposeNgramBrute(c.tokens, c.min_n, c.max_n, c.max_model_len, c.k), c.expected) << label << " (brute)";
  EXPECT_EQ(IndexDraft(c.tokens, c.min_n, c.max_n, c.max_model_len, c.k), c.expected) << label << " (index)";
}

TEST(Ngram, UpstreamProposerCases) {
  const auto& cases = UpstreamCases();
  for (size_t i = 0; i < cases.size(); ++i) ExpectAllAgree(cases[i], "§1.4 case " + std::to_string(i + 1));
}

TEST(Ngram, AddedCases) {
  const auto& cases = AddedCases();
  for (size_t i = 0; i < cases.size(); ++i) ExpectAllAgree(cases[i], "added case " + std::to_string(i + 1));
}

TEST(Ngram, UpstreamPrefixFunctionCases) {  // §1.4, the older API's lps cases
  EXPECT_EQ(PrefixFunction(Tokens{}), Tokens{});
  EXPECT_EQ(PrefixFunction(Tokens{1}), (Tokens{0}));
  EXPECT_EQ(PrefixFunction(Tokens{1, 1, 1}), (Tokens{0, 1, 2}));
  EXPECT_EQ(PrefixFunction(Tokens{1, 2, 3, 4}), (Tokens{0, 0, 0, 0}));
  EXPECT_EQ(PrefixFunction(Tokens{1, 2, 1, 2, 3}), (Tokens{0, 0, 1, 2, 0}));
}

TEST(Ngram, MatchReportsLengthAndEarliestStart) {
  NgramIndex index(1, 4);
  index.Append(Tokens{1, 2, 3, 100, 1, 2, 3, 200, 1, 2, 3});
  EXPECT_EQ(index.match_length(), 3);
  EXPECT_EQ(index.match_start(), 0);
  index.Append(7);  // 7 never occurred
  EXPECT_EQ(index.match_length(), 0);
  Tokens out = {5};
  index.Propose(3, kLongContext, out);
  EXPECT_TRUE(out.empty());
  index.Reset();
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.num_ngrams(), 0);
  index.Append(Tokens{4, 4, 4, 4});
  // Every n-gram of a constant run is the same run: one id per length.
  EXPECT_EQ(index.num_ngrams(), 4);
  index.Propose(8, kLongContext, out);
  EXPECT_EQ(out, (Tokens{4}));  // "4 4 4" first ended at 2, only position 3 follows
}

// Random histories over small alphabets (many repeats and ties), every prefix, random
// parameters: the incremental index, the KMP scan and the brute force agree.
TEST(Ngram, IndexMatchesKmpAndBruteForceOnRandomHistories) {
  std::mt19937_64 rng(20261201);
  int64_t drafts = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t alphabet = 1 + static_cast<int32_t>(rng() % 5);
    const int64_t len = static_cast<int64_t>(rng() % 120);
    const int64_t min_n = 1 + static_cast<int64_t>(rng() % 4);
    const int64_t max_n = min_n + static_cast<int64_t>(rng() % 5);
    const int64_t k = static_cast<int64_t>(rng() % 10);
    const int64_t slack = static_cast<int64_t>(rng() % 6);  // max_model_len = final len + slack
    Tokens tokens;
    NgramIndex index(min_n, max_n);
    Tokens got;
    for (int64_t i = 0; i < len; ++i) {
      // Copy a random earlier token a third of the time: runs repeat like copied text.
      const bool copy = !tokens.empty() && rng() % 3 == 0;
      const int32_t t = copy ? tokens[rng() % tokens.size()] : static_cast<int32_t>(rng() % alphabet);
      tokens.push_back(t);
      index.Append(t);
      const int64_t mml = len + slack;
      const Tokens kmp = ProposeNgramKmp(tokens, min_n, max_n, mml, k);
      ASSERT_EQ(ProposeNgramBrute(tokens, min_n, max_n, mml, k), kmp) << "trial " << trial << " len " << i + 1;
      index.Propose(k, mml, got);
      ASSERT_EQ(got, kmp) << "trial " << trial << " len " << i + 1;
      drafts += kmp.empty() ? 0 : 1;
    }
  }
  EXPECT_GT(drafts, 1000);  // the comparison covered many non-empty drafts
}

// A 32k-token history shaped like copied text: the index and the KMP scan agree along the way.
TEST(Ngram, LongHistoryAgreesWithKmp) {
  std::mt19937_64 rng(7);
  Tokens tokens;
  NgramIndex index(2, 5);
  Tokens got;
  int64_t checks = 0, non_empty = 0;
  auto push = [&](int32_t t) {
    tokens.push_back(t);
    index.Append(t);
    if (tokens.size() % 97 != 0) return;
    const Tokens kmp = ProposeNgramKmp(tokens, 2, 5, kLongContext, 8);
    index.Propose(8, kLongContext, got);
    EXPECT_EQ(got, kmp) << "at length " << tokens.size();
    ++checks;
    non_empty += kmp.empty() ? 0 : 1;
  };
  while (tokens.size() < 32768) {
    if (tokens.size() > 64 && rng() % 2 == 0) {
      const size_t from = rng() % (tokens.size() - 32);
      const size_t n = 4 + rng() % 28;
      for (size_t j = 0; j < n; ++j) push(tokens[from + j]);
    } else {
      push(static_cast<int32_t>(rng() % 50000));
    }
  }
  EXPECT_EQ(checks, 32768 / 97);
  EXPECT_GT(non_empty, checks / 2);  // mostly inside copied runs
  EXPECT_LE(index.num_ngrams(), 5 * index.size());
}

TEST(Ngram, BadParametersAreOneLineErrors) {
  const Tokens t = {1, 2, 3};
  EXPECT_NE(ErrorOf([&] { ProposeNgramKmp(t, 0, 2, 10, 1); }).find("min_n must be >= 1"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { ProposeNgramBrute(t, 3, 2, 10, 1); }).find("min_n 3 is larger than max_n 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { ProposeNgramKmp(t, 1, 2, 10, -1); }).find("k must be >= 0"), std::string::npos);
  EXPECT_NE(ErrorOf([] { NgramIndex(5, 4); }).find("larger than max_n"), std::string::npos);
  NgramIndex index(1, 2);
  EXPECT_NE(ErrorOf([&] { index.Append(-3); }).find("negative"), std::string::npos);
}

}  // namespace
}  // namespace tessera
