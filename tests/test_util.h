// Helpers shared by the test files.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "io/npy.h"
#include "kernels/kernels.h"
#include "kernels/q8.h"

namespace tessera {

// Runs f, which must throw tessera::Error with a one-line message; returns the message (empty,
// with a test failure, when nothing was thrown).
template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

// x [m, k] quantized row by row with the scalar reference quantizer (every ISA's gives the same
// bits, tests/q8_test.cpp).
inline Q8Activations QuantizeQ8Reference(const std::vector<float>& x, size_t m, size_t k) {
  Q8Activations a;
  a.m = m, a.k = k;
  a.q.resize(m * k);
  a.d.resize(m * k / kQ8Block);
  a.sum.resize(m * k / kQ8Block);
  for (size_t i = 0; i < m; ++i) {
    KernelsFor(Isa::kScalar).quantize_q8(x.data() + i * k, k, a.q.data() + i * k, a.d.data() + i * k / kQ8Block,
                                         a.sum.data() + i * k / kQ8Block);
  }
  return a;
}

// n token ids uniform in [0, vocab), the same for the same seed.
inline std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& t : out) t = dist(rng);
  return out;
}

// Prompt then greedy continuation of a golden checkpoint (tests/data/gpt_oss_golden/NAME/
// golden.json): the sequence whose transformers logits are its logits.npy.
inline std::vector<int32_t> GoldenSequence(const std::string& name) {
  std::ifstream in(std::string(TESSERA_TEST_DATA) + "/gpt_oss_golden/" + name + "/golden.json");
  const auto j = nlohmann::json::parse(in);
  std::vector<int32_t> seq = j.at("prompt_ids").get<std::vector<int32_t>>();
  const auto greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
  seq.insert(seq.end(), greedy.begin(), greedy.end());
  return seq;
}

// A golden checkpoint directory (tests/data/{gpt_oss,dense}_golden/NAME, made by
// tools/make_{gpt_oss,dense}_golden.py): its prompt, greedy continuation and the transformers
// logits [prompt + greedy, vocab] of one pass over both.
struct ModelGolden {
  std::vector<int32_t> prompt, greedy;
  NpyArray logits;
  std::vector<int32_t> sequence() const {
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), greedy.begin(), greedy.end());
    return seq;
  }
};

inline ModelGolden LoadModelGolden(const std::string& dir) {
  std::ifstream in(dir + "/golden.json");
  const auto j = nlohmann::json::parse(in);
  ModelGolden g;
  g.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
  g.greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
  g.logits = ReadNpyF32(dir + "/logits.npy");
  return g;
}

// The first maximum, as torch.argmax.
inline int32_t ArgmaxOf(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

// max |got - ref| over rows [row0, row0 + rows) of a golden's logits, relative to max |ref|.
inline double RelativeToGolden(const float* got, const NpyArray& ref, int64_t row0, int64_t rows) {
  const int64_t V = ref.shape[1];
  double max_ref = 0.0, max_err = 0.0;
  for (float r : ref.data) max_ref = std::max(max_ref, static_cast<double>(std::fabs(r)));
  for (int64_t i = 0; i < rows * V; ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(got[i] - ref.data[row0 * V + i])));
  }
  return max_err / max_ref;
}

// KL(p || q) of the softmax distributions of two logit rows of n entries, in double.
inline double KlDivergence(const float* p_logits, const float* q_logits, int64_t n) {
  auto log_softmax = [n](const float* l, std::vector<double>& out) {
    const double mx = *std::max_element(l, l + n);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(l[i] - mx);
    const double lse = mx + std::log(sum);
    out.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[i] = l[i] - lse;
  };
  std::vector<double> lp, lq;
  log_softmax(p_logits, lp);
  log_softmax(q_logits, lq);
  double kl = 0.0;
  for (int64_t i = 0; i < n; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

}  // namespace tessera
