// The BPE merge loop of tokenizer/bpe.h against a reference (issue 44: the loop was rewritten to
// take ~9 bytes per byte of a piece instead of ~70, so that 10 MB of one letter tokenizes in
// bounded memory; its ids must not change). The reference is Hugging Face's Word::merge_all as
// the loop used to implement it: symbols in a doubly linked list, candidate pairs in a min-heap
// on (rank, position), stale candidates skipped when popped. Random vocabularies over a small
// alphabet make long merge chains, ties between equal pairs (runs of one letter), merges whose
// result token already exists and repeated merge lines; pieces run from 49 symbols (the first
// length past MergeSmall) to 200,000. The Hugging Face goldens (tokenizer_test,
// tokenizer_families_test) check the same loop against real vocabularies.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/bpe.h"

namespace tessera {
namespace {

struct Rules {
  std::vector<std::string> tokens;                      // id -> text
  std::map<std::pair<int32_t, int32_t>, MergeRule> merges;  // later lines replace earlier ones
};

// The reference merge (the pre-issue-44 loop): ids of the initial symbols in, merged ids out.
std::vector<int32_t> ReferenceMerge(const Rules& rules, std::vector<int32_t> ids) {
  struct Symbol {
    int32_t id, prev, next;
    bool live;
  };
  struct Candidate {
    int32_t rank, pos, new_id, left_id, right_id;
  };
  const auto later = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < ids.size(); ++i) {
    symbols.push_back({ids[i], static_cast<int32_t>(i) - 1, i + 1 < ids.size() ? static_cast<int32_t>(i) + 1 : -1, true});
  }
  std::vector<Candidate> heap;
  auto push = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = rules.merges.find({symbols[pos].id, symbols[next].id});
    if (it == rules.merges.end()) return;
    heap.push_back({it->second.rank, pos, it->second.new_id, symbols[pos].id, symbols[next].id});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    if (left.id != top.left_id || symbols[left.next].id != top.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.new_id;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  std::vector<int32_t> out;
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
  return out;
}

// `alphabet` as one-character tokens 0.., then `merges` random merges of two existing tokens
// (a few repeat an earlier pair; a result that is already a token keeps its id).
Rules RandomRules(const std::vector<std::string>& alphabet, int merges, std::mt19937& rng) {
  Rules r;
  r.tokens = alphabet;
  std::map<std::string, int32_t> id_of;
  for (size_t i = 0; i < alphabet.size(); ++i) id_of[alphabet[i]] = static_cast<int32_t>(i);
  for (int rank = 0; rank < merges; ++rank) {
    // Favour recent tokens so that long tokens (long chains of merges) appear.
    auto pick = [&]() {
      const size_t n = r.tokens.size();
      return static_cast<int32_t>(rng() % 2 ? rng() % n : n - 1 - rng() % std::min<size_t>(n, 8));
    };
    const int32_t left = pick(), right = pick();
    const std::string text = r.tokens[left] + r.tokens[right];
    if (text.size() > 24) continue;
    auto [it, fresh] = id_of.emplace(text, static_cast<int32_t>(r.tokens.size()));
    if (fresh) r.tokens.push_back(text);
    r.merges[{left, right}] = MergeRule{rank, it->second};
  }
  return r;
}

void Load(const Rules& rules, BpeModel& model) {
  for (size_t id = 0; id < rules.tokens.size(); ++id) model.vocab().Insert(rules.tokens[id], static_cast<int32_t>(id));
  model.IndexByteTokens();
  // Inserted in rank order, as the tokenizer loader does, so that a repeated pair keeps its last line.
  std::vector<std::pair<std::pair<int32_t, int32_t>, MergeRule>> lines(rules.merges.begin(), rules.merges.end());
  std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.second.rank < b.second.rank; });
  for (const auto& [pair, rule] : lines) model.AddMerge(pair.first, pair.second, rule);
}

std::string RandomText(const std::string& letters, size_t n, std::mt19937& rng) {
  std::string s;
  // Runs of one letter (ties between equal pairs) alternate with mixed stretches.
  while (s.size() < n) {
    const size_t run = 1 + rng() % 40;
    const bool same = rng() % 2;
    const char c = letters[rng() % letters.size()];
    for (size_t i = 0; i < run && s.size() < n; ++i) s += same ? c : letters[rng() % letters.size()];
  }
  return s;
}

TEST(BpeMerge, ByteLevelPiecesMatchTheReference) {
  std::mt19937 rng(44);
  for (int vocab = 0; vocab < 6; ++vocab) {
    const Rules rules = RandomRules({"a", "b", "c", "d"}, 60 + 40 * vocab, rng);
    BpeModel model;
    Load(rules, model);
    BpeScratch scratch;  // reused across pieces of every size, as Encode does
    bool with_x = false;
    for (const size_t n : {49, 50, 64, 100, 257, 1000, 4096, 20000, 200000}) {
      // Every other piece has 'x', which has no token: dropped from the piece, as HF drops a
      // byte without unk token or byte fallback.
      with_x = !with_x;
      const std::string piece = RandomText(with_x ? "abcdx" : "abcd", n, rng);
      std::vector<int32_t> initial;
      for (char ch : piece) {
        if (ch != 'x') initial.push_back(ch - 'a');
      }
      std::vector<int32_t> got;
      model.Merge(piece, scratch, got);
      ASSERT_EQ(got, ReferenceMerge(rules, initial)) << "vocabulary " << vocab << ", " << n << " bytes";
    }
    for (const char c : std::string("abcd")) {  // one letter throughout: every pair ties
      const std::string piece(100000, c);
      std::vector<int32_t> got;
      model.Merge(piece, scratch, got);
      ASSERT_EQ(got, ReferenceMerge(rules, std::vector<int32_t>(piece.size(), c - 'a'))) << "run of " << c;
    }
  }
}

// The character-level path (converted SentencePiece models): multi-byte characters are the
// initial symbols.
TEST(BpeMerge, CharacterPiecesMatchTheReference) {
  std::mt19937 rng(4444);
  const std::vector<std::string> alphabet = {"a", "\u00e9", "\u4e2d", "\U0001F600", "\u2581"};
  for (int vocab = 0; vocab < 4; ++vocab) {
    const Rules rules = RandomRules(alphabet, 80 + 50 * vocab, rng);
    BpeModel model;
    Load(rules, model);
    model.SetCharSymbols(/*unk_id=*/-1, /*byte_fallback=*/false, /*fuse_unk=*/false);
    BpeScratch scratch;
    for (const size_t n : {1, 2, 49, 333, 5000, 60000}) {
      std::string piece;
      std::vector<int32_t> initial;
      while (initial.size() < n) {
        const auto c = static_cast<int32_t>(rng() % alphabet.size());
        const size_t run = rng() % 3 == 0 ? 1 + rng() % 30 : 1;
        for (size_t i = 0; i < run && initial.size() < n; ++i) {
          piece += alphabet[c];
          initial.push_back(c);
        }
      }
      std::vector<int32_t> got;
      model.MergeChars(piece, scratch, got);
      ASSERT_EQ(got, ReferenceMerge(rules, initial)) << "vocabulary " << vocab << ", " << n << " characters";
    }
  }
}

}  // namespace
}  // namespace tessera
