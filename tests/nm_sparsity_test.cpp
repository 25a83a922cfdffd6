// N:M structured sparsity (kernels/nm_sparsity.h, kernels/structured_spmm.h) against
// ../shared/reference/sparsity.md: the encode/decode round trip of upstream's
// test_sparse_matrix_encode (§7.1) for f32, bf16 and int8, strides 1-4 and both sparse dims; the
// worked example of §5; the mask generator; structured_spmm in every configuration against a dense
// reference (upstream's test_structured_spmm grid of §7.2, int8 cases and tails added); and the
// upstream validation errors (§6).
#include "kernels/structured_spmm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/nm_sparsity.h"
#include "test_util.h"

namespace tessera {
namespace {

template <typename T>
std::vector<T> RandomValues(size_t count, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> v(count);
  for (T& x : v) {
    const float f = normal(rng) * scale;
    if constexpr (std::is_same_v<T, float>) x = f;
    if constexpr (std::is_same_v<T, uint16_t>) x = F32ToBf16(f);
    if constexpr (std::is_same_v<T, int8_t>) x = static_cast<int8_t>(std::lround(std::clamp(f * 40.0f, -127.0f, 127.0f)));
  }
  return v;
}

// §7.1: decode(encode(data, mask)) == (where(mask, data, 0), mask), exactly.
template <typename T>
void RoundTrip(std::mt19937& rng) {
  std::uniform_int_distribution<int> kept_d(1, 3), group_d(4, 10), mult_d(4, 10), stride_d(1, 4), dim_d(0, 1);
  for (int example = 0; example < 20; ++example) {
    NmSparsity s{kept_d(rng), group_d(rng), stride_d(rng)};
    const int sparse_dim = dim_d(rng);
    const int64_t P = NmIndicesPerWord(s.group);
    int64_t rows = mult_d(rng) * P, cols = mult_d(rng);
    (sparse_dim == 1 ? cols : rows) *= static_cast<int64_t>(s.stride) * s.group;
    SCOPED_TRACE(testing::Message() << s.kept << ":" << s.group << " stride " << s.stride << " dim " << sparse_dim
                                    << " " << rows << "x" << cols);
    const std::vector<T> data = RandomValues<T>(static_cast<size_t>(rows * cols), rng);
    const std::vector<uint8_t> mask = GenerateNmMask(rows, cols, s, sparse_dim, rng());
    const NmEncoded<T> e = EncodeNm<T>(data, mask, rows, cols, s, sparse_dim);
    std::vector<T> decoded;
    std::vector<int32_t> decoded_mask;
    DecodeNm(e, decoded, decoded_mask);
    for (size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(decoded_mask[i], mask[i]) << i;
      ASSERT_EQ(decoded[i], mask[i] ? data[i] : T{}) << i;
    }
  }
}

TEST(NmSparsity, EncodeDecodeRoundTrip) {
  std::mt19937 rng(5);
  RoundTrip<float>(rng);
  RoundTrip<uint16_t>(rng);
  RoundTrip<int8_t>(rng);
}

// §5's worked example: 2:4, row [5, 0, 0, 7 | 0, 9, 0, 0] (16 such rows fill a 2-bit word).
TEST(NmSparsity, WorkedExampleFillsUnderfilledGroupsWithTheLowestSlot) {
  std::vector<float> data;
  for (int r = 0; r < 16; ++r) data.insert(data.end(), {5, 0, 0, 7, 0, 9, 0, 0});
  std::vector<uint8_t> mask(data.size());
  for (size_t i = 0; i < data.size(); ++i) mask[i] = data[i] != 0;
  const NmEncoded<float> e = EncodeNm<float>(data, mask, 16, 8, {2, 4, 1}, 1);
  EXPECT_EQ(e.nonzeros_shape, (std::array<int64_t, 3>{2, 16, 2}));
  EXPECT_EQ(e.metadata_shape, (std::array<int64_t, 3>{2, 1, 2}));
  EXPECT_EQ(e.nonzeros[0], 5);   // plane 0, row 0: [5, 9]
  EXPECT_EQ(e.nonzeros[1], 9);
  EXPECT_EQ(e.nonzeros[32], 7);  // plane 1, row 0: [7, 0]
  EXPECT_EQ(e.nonzeros[33], 0);
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(NmIndexAt(e.metadata, e.metadata_shape, 4, 0, r, 0), 0);
    EXPECT_EQ(NmIndexAt(e.metadata, e.metadata_shape, 4, 0, r, 1), 1);
    EXPECT_EQ(NmIndexAt(e.metadata, e.metadata_shape, 4, 1, r, 0), 3);
    EXPECT_EQ(NmIndexAt(e.metadata, e.metadata_shape, 4, 1, r, 1), 0);
  }
  // Plane 0, column 0 holds sixteen 0s; plane 1, column 0 sixteen 3s: 0xFFFFFFFF, negative as int32.
  EXPECT_EQ(e.metadata[2], -1);
  std::vector<float> decoded;
  std::vector<int32_t> kept;
  DecodeNm(e, decoded, kept);
  EXPECT_EQ(std::vector<int32_t>(kept.begin(), kept.begin() + 8), (std::vector<int32_t>{1, 0, 0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(std::vector<float>(decoded.begin(), decoded.begin() + 8), (std::vector<float>{5, 0, 0, 7, 0, 9, 0, 0}));
  // More than N set: the first N are kept, the rest dropped (upstream does not validate).
  std::vector<uint8_t> all(data.size(), 1);
  DecodeNm(EncodeNm<float>(data, all, 16, 8, {2, 4, 1}, 1), decoded, kept);
  EXPECT_EQ(std::vector<int32_t>(kept.begin(), kept.begin() + 8), (std::vector<int32_t>{1, 1, 0, 0, 1, 1, 0, 0}));
}

TEST(NmSparsity, MaskHasExactlyNPerStridedGroupAndBadShapesAreErrors) {
  const NmSparsity s{3, 8, 2};
  const std::vector<uint8_t> mask = GenerateNmMask(3, 32, s, 1, 7);
  for (int r = 0; r < 3; ++r) {
    for (int run = 0; run < 2; ++run) {
      for (int phase = 0; phase < 2; ++phase) {
        int ones = 0;
        for (int j = 0; j < 8; ++j) ones += mask[r * 32 + run * 16 + j * 2 + phase];
        EXPECT_EQ(ones, 3);
      }
    }
  }
  const std::vector<uint8_t> columns = GenerateNmMask(32, 3, s, 0, 7);
  for (int c = 0; c < 3; ++c) {
    int ones = 0;
    for (int r = 0; r < 32; ++r) ones += columns[r * 3 + c];
    EXPECT_EQ(ones, 12);
  }
  EXPECT_EQ(GenerateNmMask(3, 32, s, 1, 7), mask);  // deterministic in the seed
  EXPECT_EQ(ErrorOf([] { GenerateNmMask(4, 8, {2, 4, 1}, 2, 0); }), "gen_sparse_mask: sparse_dim must be 0 or 1, got 2");
  EXPECT_NE(ErrorOf([] { GenerateNmMask(4, 8, {4, 4, 1}, 1, 0); }).find("invalid inputs"), std::string::npos);
  EXPECT_EQ(ErrorOf([] { GenerateNmMask(4, 12, {2, 4, 2}, 1, 0); }), "gen_sparse_mask: expected width 12 is a multiple of 8");
  EXPECT_EQ(ErrorOf([] { GenerateNmMask(12, 4, {2, 4, 2}, 0, 0); }), "gen_sparse_mask: expected height 12 is a multiple of 8");
}

// ---- structured_spmm ---------------------------------------------------------------------------

SpmmTensor Make(SpmmDType dtype, std::vector<int64_t> shape, std::mt19937& rng, float scale) {
  const size_t count = static_cast<size_t>(shape[0] * shape[1]);
  switch (dtype) {
    case SpmmDType::kF32: return SpmmTensor::F32(shape, RandomValues<float>(count, rng, scale));
    case SpmmDType::kBF16: return SpmmTensor::BF16(shape, RandomValues<uint16_t>(count, rng, scale));
    case SpmmDType::kInt8: return SpmmTensor::Int8(shape, RandomValues<int8_t>(count, rng));
  }
  return {};
}

// The sparse operand's dense form encoded: nonzeros as a tensor of its dtype, and the metadata.
struct Encoded {
  SpmmTensor nonzeros;
  std::vector<int64_t> metadata_shape;
  std::vector<int32_t> metadata;
};
template <typename T>
Encoded EncodeAs(const std::vector<T>& values, const std::vector<uint8_t>& mask, int64_t rows, int64_t cols,
                 NmSparsity s, int dim, SpmmDType dtype) {
  NmEncoded<T> e = EncodeNm<T>(values, mask, rows, cols, s, dim);
  Encoded out;
  const std::vector<int64_t> shape(e.nonzeros_shape.begin(), e.nonzeros_shape.end());
  if constexpr (std::is_same_v<T, float>) out.nonzeros = SpmmTensor::F32(shape, e.nonzeros);
  if constexpr (std::is_same_v<T, uint16_t>) out.nonzeros = SpmmTensor::BF16(shape, e.nonzeros);
  if constexpr (std::is_same_v<T, int8_t>) out.nonzeros = SpmmTensor::Int8(shape, e.nonzeros);
  out.nonzeros.dtype = dtype;
  out.metadata_shape.assign(e.metadata_shape.begin(), e.metadata_shape.end());
  out.metadata = std::move(e.metadata);
  return out;
}
Encoded Encode(const SpmmTensor& t, const std::vector<uint8_t>& mask, NmSparsity s, int dim) {
  switch (t.dtype) {
    case SpmmDType::kF32: return EncodeAs(t.f32, mask, t.shape[0], t.shape[1], s, dim, t.dtype);
    case SpmmDType::kBF16: return EncodeAs(t.bf16, mask, t.shape[0], t.shape[1], s, dim, t.dtype);
    case SpmmDType::kInt8: return EncodeAs(t.i8, mask, t.shape[0], t.shape[1], s, dim, t.dtype);
  }
  return {};
}

float FillAs(double v, SpmmDType dtype) {
  if (dtype == SpmmDType::kBF16) return Bf16ToF32(F32ToBf16(static_cast<float>(v)));
  if (dtype == SpmmDType::kInt8) return static_cast<float>(std::trunc(v));
  return static_cast<float>(v);
}

struct SpmmCase {
  NmSparsity sparsity;
  int64_t m, k, n;
  bool rhs_sparse, contract_sparse, rhs_transpose;
  double fill;
  SpmmDType sparse_dtype, dense_dtype;
};

// One case: the sparse operand's sparse dim grows to lcm(stride * M, dim) as upstream's test does;
// reference = where(mask, dense, fill) . other in double.
void CheckSpmm(const SpmmCase& c, std::mt19937& rng, int64_t block = 128) {
  SCOPED_TRACE(testing::Message() << c.sparsity.kept << ":" << c.sparsity.group << " stride " << c.sparsity.stride
                                  << " m,k,n " << c.m << "," << c.k << "," << c.n << " rhs_sparse " << c.rhs_sparse
                                  << " contract " << c.contract_sparse << " transpose " << c.rhs_transpose << " fill "
                                  << c.fill << " " << SpmmDTypeName(c.sparse_dtype) << " x "
                                  << SpmmDTypeName(c.dense_dtype));
  const int dim = SpmmSparseDim(c.rhs_sparse, c.contract_sparse, c.rhs_transpose);
  int64_t m = c.m, k = c.k, n = c.n;
  const int64_t unit = static_cast<int64_t>(c.sparsity.stride) * c.sparsity.group;
  // The sparse operand's shape in (m, n, k) terms and which of them is its sparse dim.
  int64_t* sparse_dims[2];
  if (c.rhs_sparse) {
    sparse_dims[0] = c.rhs_transpose ? &n : &k;
    sparse_dims[1] = c.rhs_transpose ? &k : &n;
  } else {
    sparse_dims[0] = &m;
    sparse_dims[1] = &k;
  }
  int64_t& grown = *sparse_dims[dim];
  grown = std::lcm(unit, grown);
  const bool k_grown = &grown == &k;
  const std::vector<int64_t> sparse_shape = {*sparse_dims[0], *sparse_dims[1]};
  const std::vector<int64_t> dense_shape =
      c.rhs_sparse ? std::vector<int64_t>{m, k} : (c.rhs_transpose ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
  const SpmmTensor sparse = Make(c.sparse_dtype, sparse_shape, rng, 0.01f);
  const SpmmTensor dense = Make(c.dense_dtype, dense_shape, rng, 0.01f);
  const std::vector<uint8_t> mask = GenerateNmMask(sparse_shape[0], sparse_shape[1], c.sparsity, dim, 123);
  const Encoded e = Encode(sparse, mask, c.sparsity, dim);
  SpmmOptions o;
  o.kept = c.sparsity.kept;
  o.group = c.sparsity.group;
  o.rhs_sparse = c.rhs_sparse;
  o.contract_sparse = c.contract_sparse;
  o.rhs_transpose = c.rhs_transpose;
  o.stride = c.sparsity.stride;
  o.default_value = c.fill;
  o.block_m = &grown == &m ? m : std::min<int64_t>(block, m);
  o.block_n = &grown == &n ? n : std::min<int64_t>(block, n);
  o.block_k = k;
  (void)k_grown;
  const SpmmTensor out = StructuredSpmm(o, e.nonzeros, e.metadata_shape, e.metadata, dense);
  ASSERT_EQ(out.shape, (std::vector<int64_t>{m, n}));
  ASSERT_EQ(out.dtype, SpmmOutDType(c.dense_dtype, c.sparse_dtype));
  const float fill = FillAs(c.fill, c.sparse_dtype);
  auto sparse_at = [&](int64_t r, int64_t col) {
    const size_t i = static_cast<size_t>(r * sparse_shape[1] + col);
    return mask[i] ? static_cast<double>(sparse.AsFloat(i)) : static_cast<double>(fill);
  };
  // where(mask, sparse, fill) and the dense operand, as lhs [m, k] and rhs^T [n, k] in double.
  std::vector<double> lhs(static_cast<size_t>(m * k)), rhs_t(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      lhs[static_cast<size_t>(i * k + kk)] =
          c.rhs_sparse ? static_cast<double>(dense.AsFloat(static_cast<size_t>(i * k + kk))) : sparse_at(i, kk);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t kk = 0; kk < k; ++kk) {
      rhs_t[static_cast<size_t>(j * k + kk)] =
          c.rhs_sparse ? (c.rhs_transpose ? sparse_at(j, kk) : sparse_at(kk, j))
                       : static_cast<double>(dense.AsFloat(static_cast<size_t>(c.rhs_transpose ? j * k + kk : kk * n + j)));
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0.0;
      for (int64_t kk = 0; kk < k; ++kk) want += lhs[static_cast<size_t>(i * k + kk)] * rhs_t[static_cast<size_t>(j * k + kk)];
      const size_t at = static_cast<size_t>(i * n + j);
      if (out.dtype == SpmmDType::kInt8) {
        ASSERT_EQ(out.i8[at], static_cast<int8_t>(static_cast<uint8_t>(static_cast<int64_t>(want) & 0xFF))) << i << "," << j;
      } else {
        const double got = out.AsFloat(at);
        ASSERT_NEAR(got, want, 5e-3 + 5e-3 * std::abs(want)) << i << "," << j;
      }
    }
  }
}

// §7.2's grid: 1:4 and 2:5 at stride 128, (m, k, n) = (128, 128, 128) for every configuration,
// fill ±1.9 and the four f32/bf16 pairs (the (512, 128, 256) shape is checked on a subset below).
TEST(StructuredSpmm, UpstreamGridMatchesTheDenseReference) {
  std::mt19937 rng(123);
  const SpmmDType floats[2] = {SpmmDType::kF32, SpmmDType::kBF16};
  int cases = 0;
  for (NmSparsity s : {NmSparsity{1, 4, 128}, NmSparsity{2, 5, 128}}) {
    for (int flags = 0; flags < 8; ++flags) {
      for (double fill : {-1.9, 1.9}) {
        for (SpmmDType a : floats) {
          for (SpmmDType b : floats) {
            CheckSpmm({s, 128, 128, 128, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0, fill, a, b}, rng);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 128);
}

TEST(StructuredSpmm, LargerShapesInt8AndFillsOfEveryDtype) {
  std::mt19937 rng(9);
  for (int flags = 0; flags < 8; ++flags) {
    CheckSpmm({{1, 4, 128}, 512, 128, 256, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0, 1.9,
               SpmmDType::kBF16, SpmmDType::kF32},
              rng);
  }
  // int8 sparse operands (stride 32 along the first dim, 128 along the last), with f32 and with
  // int8 dense operands (exact int32 accumulation, wrapped to int8 like a cast).
  for (int flags = 0; flags < 8; ++flags) {
    const bool rhs_sparse = flags & 1, contract = flags & 2, transpose = flags & 4;
    const int dim = SpmmSparseDim(rhs_sparse, contract, transpose);
    const NmSparsity s{2, 4, dim == 1 ? 128 : 32};
    CheckSpmm({s, 64, 128, 64, rhs_sparse, contract, transpose, -1.9, SpmmDType::kInt8, SpmmDType::kF32}, rng, 64);
    CheckSpmm({s, 64, 128, 64, rhs_sparse, contract, transpose, 1.9, SpmmDType::kInt8, SpmmDType::kInt8}, rng, 64);
  }
  // 3:16 (4-bit metadata, 8 per word) and 7:8.
  CheckSpmm({{3, 16, 128}, 64, 128, 64, false, true, false, 0.0, SpmmDType::kF32, SpmmDType::kF32}, rng, 64);
  CheckSpmm({{7, 8, 16}, 64, 128, 64, true, true, false, 0.5, SpmmDType::kBF16, SpmmDType::kBF16}, rng, 64);
}

// Random configurations and shapes: any N:M with M <= 16, the dims that carry no packing or
// stride rule at odd sizes (blocks covering them whole), every dtype pair.
TEST(StructuredSpmm, RandomShapesAndSparsities) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> group_d(2, 16), flag_d(0, 7), size_d(1, 40), dtype_d(0, 2);
  const SpmmDType dtypes[3] = {SpmmDType::kF32, SpmmDType::kBF16, SpmmDType::kInt8};
  for (int trial = 0; trial < 24; ++trial) {
    const int group = group_d(rng);
    const int kept = std::uniform_int_distribution<int>(1, group - 1)(rng);
    const int flags = flag_d(rng);
    const bool rhs_sparse = flags & 1, contract = flags & 2, transpose = flags & 4;
    const int dim = SpmmSparseDim(rhs_sparse, contract, transpose);
    const SpmmDType sparse_dtype = dtypes[dtype_d(rng)], dense_dtype = dtypes[dtype_d(rng)];
    const int64_t first_stride = sparse_dtype == SpmmDType::kF32 ? 8 : sparse_dtype == SpmmDType::kBF16 ? 16 : 32;
    const NmSparsity s{kept, group, static_cast<int>(dim == 1 ? 128 : first_stride)};
    const int64_t P = NmIndicesPerWord(group);
    // Sizes: the sparse operand's first dim a multiple of P (its block must be), the rest odd.
    int64_t m = size_d(rng), k = size_d(rng), n = size_d(rng);
    int64_t& first = rhs_sparse ? (transpose ? n : k) : m;
    first = P * std::uniform_int_distribution<int64_t>(1, 3)(rng);
    CheckSpmm({s, m, k, n, rhs_sparse, contract, transpose, trial % 2 ? 0.75 : 0.0, sparse_dtype, dense_dtype}, rng,
              1 << 20);
  }
}

TEST(StructuredSpmm, UpstreamValidationErrors) {
  std::mt19937 rng(1);
  const SpmmTensor nz = SpmmTensor::F32({1, 16, 128}, std::vector<float>(16 * 128));
  const std::vector<int64_t> md_shape = {1, 1, 128};
  const std::vector<int32_t> md(128);
  const SpmmTensor mat = SpmmTensor::F32({512, 128}, std::vector<float>(512 * 128));
  SpmmOptions o;
  o.kept = 1;
  o.group = 4;
  o.contract_sparse = true;  // lhs [16, 512] sparse along k
  o.block_m = 16;
  o.block_k = 512;
  o.block_n = 128;
  auto call = [&](SpmmOptions opt, const SpmmTensor& n, std::vector<int64_t> ms, const SpmmTensor& d) {
    StructuredSpmm(opt, n.shape.empty() ? nz : n, ms.empty() ? md_shape : ms, md, d.shape.empty() ? mat : d);
  };
  auto run = [&](SpmmOptions opt, const SpmmTensor& n = {}, std::vector<int64_t> ms = {}, const SpmmTensor& d = {}) {
    return ErrorOf([&] { call(opt, n, ms, d); });
  };
  EXPECT_NO_THROW(call(o, {}, {}, {}));
  SpmmOptions bad = o;
  bad.kept = 4;
  EXPECT_EQ(run(bad), "Invalid sparsity: (4, 4)");
  bad = o;
  bad.group = 17;
  EXPECT_EQ(run(bad), "Not implemented: when sparsity base is > 16");
  EXPECT_EQ(run(o, SpmmTensor::F32({16, 128}, {})), "Expected nonzeros' rank is 3, got 2");
  EXPECT_EQ(run(o, {}, {1, 128}), "Expected metadata's rank is 3, got 2");
  EXPECT_EQ(run(o, {}, {}, SpmmTensor::F32({512}, {})), "Expected matrix's rank is 2, got 1");
  bad = o;
  bad.stride = 64;
  EXPECT_EQ(run(bad), "Expected stride=64 is a multiple of 128");
  bad = o;
  bad.contract_sparse = false;  // sparse along m: bf16 needs a multiple of 16
  bad.stride = 8;
  EXPECT_EQ(run(bad, SpmmTensor::BF16({1, 16, 128}, std::vector<uint16_t>(16 * 128))), "Expected stride=8 is a multiple of 16");
  EXPECT_EQ(run(o, SpmmTensor::F32({2, 16, 128}, std::vector<float>(2 * 16 * 128))), "Expected lhs nonzeros shape[0] is 1, got 2");
  EXPECT_EQ(run(o, {}, {2, 1, 128}), "Expected lhs metadata shape[0] is 1, got 2");
  EXPECT_EQ(run(o, {}, {1, 1, 64}), "Expected nonzeros and metadata of lhs have same shape[2], got 128 vs 64");
  EXPECT_EQ(run(o, SpmmTensor::F32({1, 8, 128}, std::vector<float>(8 * 128))), "Expected lhs rows is a multiple of md_packing=16, got 8");
  EXPECT_EQ(run(o, {}, {1, 2, 128}), "Expected lhs metadata rows can be perfectly packed by 16");
  EXPECT_EQ(run(o, {}, {}, SpmmTensor::F32({256, 128}, std::vector<float>(256 * 128))),
            "Expected lhs contracting size 512 is equal to rhs contracting size 256");
  bad = o;
  bad.block_k = 256;
  EXPECT_EQ(run(bad), "Expected block_k=256 is a multiple of 512");
  bad = o;
  bad.block_m = 8;
  EXPECT_EQ(run(bad), "Expected block_m=8 is a multiple of 16");
  bad = o;
  bad.block_n = 96;
  EXPECT_EQ(run(bad), "Expected block_n=96 can fully divide output rows 128");
  (void)rng;
}

}  // namespace
}  // namespace tessera
