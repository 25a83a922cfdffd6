// The MXFP4 encoder (kernels/mxfp4.h) against a plain reference and against the decoder.
//
// Recipe: OCP MX v1.0 as ../shared/reference/quantization.md A.3 states it (shared exponent
// floor(log2 amax) - 2 clamped to the E8M0 range, round half to even, saturation at 6 * 2^E);
// test list A.7 items 1 and 3. The reference below recomputes it in double precision with
// brute-force searches (no frexp, no rounding thresholds), so it shares no code path with the
// encoder. Edge policy (documented in mxfp4.h): zero blocks get scale byte 0, the sign of zero is
// kept (code 8), NaN/inf inputs are rejected, bytes 253..255 are never produced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "kernels/mxfp4.h"

namespace tessera {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Encoded {
  uint8_t codes[kMxfp4BlockBytes];
  uint8_t scale;
};

// OCP MX v1.0 in double arithmetic: E from a linear search for 2^k <= amax < 2^(k+1), elements
// by nearest distance over the eight magnitudes with ties to the even index.
std::optional<Encoded> ReferenceEncode(const float* x) {
  static const double kMagnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  double amax = 0.0;
  for (int j = 0; j < 32; ++j) {
    if (!std::isfinite(x[j])) return std::nullopt;
    amax = std::max(amax, std::fabs(static_cast<double>(x[j])));
  }
  int e = -127;
  if (amax > 0.0) {
    int k = -160;  // below the smallest float subnormal 2^-149
    while (std::ldexp(1.0, k + 1) <= amax) ++k;
    e = std::clamp(k - 2, -127, 127);
  }
  Encoded out{};
  out.scale = static_cast<uint8_t>(e + 127);
  for (int j = 0; j < 32; ++j) {
    const double v = std::fabs(static_cast<double>(x[j])) / std::ldexp(1.0, e);  // exact in double
    int best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (int m = 0; m < 8; ++m) {
      const double d = std::fabs(v - kMagnitudes[m]);
      if (d < best_d || (d == best_d && m % 2 == 0)) {
        best = m;
        best_d = d;
      }
    }
    const int code = best | (std::signbit(x[j]) ? 8 : 0);
    out.codes[j / 2] |= static_cast<uint8_t>(j % 2 == 0 ? code : code << 4);
  }
  return out;
}

void ExpectMatchesReference(const float* x, const char* what) {
  const std::optional<Encoded> want = ReferenceEncode(x);
  ASSERT_TRUE(want.has_value()) << what;
  Encoded got{};
  ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale)) << what;
  ASSERT_EQ(got.scale, want->scale) << what;
  for (int b = 0; b < kMxfp4BlockBytes; ++b) {
    ASSERT_EQ(got.codes[b], want->codes[b]) << what << " byte " << b << " (elements " << x[2 * b] << ", "
                                            << x[2 * b + 1] << ")";
  }
}

// Packs 32 codes low nibble first.
void Pack(const uint8_t* codes32, uint8_t* bytes16) {
  for (int b = 0; b < 16; ++b) bytes16[b] = static_cast<uint8_t>(codes32[2 * b] | (codes32[2 * b + 1] << 4));
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(Mxfp4Layout, PackLowNibbleFirst) {
  // gpt-oss.md §2.3: low nibble = element 2b, high nibble = element 2b + 1.
  uint8_t codes[32], bytes[16], back[32];
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>((j * 7 + 3) % 16);
  PackMxfp4Codes(codes, bytes);
  for (int b = 0; b < 16; ++b) EXPECT_EQ(bytes[b], codes[2 * b] | (codes[2 * b + 1] << 4)) << b;
  uint8_t expected[16];
  Pack(codes, expected);
  EXPECT_EQ(0, std::memcmp(bytes, expected, 16));
  UnpackMxfp4Codes(bytes, back);
  EXPECT_EQ(0, std::memcmp(codes, back, 32));
  // Unpack then pack is the identity on random bytes, and decoding agrees with the unpacked codes.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 1000; ++trial) {
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    uint8_t again[16];
    UnpackMxfp4Codes(bytes, back);
    PackMxfp4Codes(back, again);
    ASSERT_EQ(0, std::memcmp(bytes, again, 16));
    float x[32];
    DecodeMxfp4Block(bytes, 127, x);
    for (int j = 0; j < 32; ++j) ASSERT_TRUE(SameBits(x[j], kE2M1Values[back[j]]));
  }
}

TEST(Mxfp4Encoder, ElementRoundingTiesToEvenAndSaturates) {
  // quantization.md A.3: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0,
  // 3.5 -> 4.0, 5.0 -> 4.0 (codes 0, 2, 2, 4, 4, 6, 6); just off a tie the nearest value wins.
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const uint8_t tie_codes[] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(F32ToE2M1(ties[i]), tie_codes[i]) << ties[i];
    EXPECT_EQ(F32ToE2M1(-ties[i]), tie_codes[i] | 8) << -ties[i];
    EXPECT_EQ(F32ToE2M1(std::nextafter(ties[i], 0.0f)), i) << "below " << ties[i];
    EXPECT_EQ(F32ToE2M1(std::nextafter(ties[i], 8.0f)), i + 1) << "above " << ties[i];
  }
  for (int c = 0; c < 16; ++c) EXPECT_EQ(F32ToE2M1(kE2M1Values[c]), c) << c;  // -0 -> 8
  EXPECT_EQ(F32ToE2M1(6.5f), 7);
  EXPECT_EQ(F32ToE2M1(-7.99f), 15);
  EXPECT_EQ(F32ToE2M1(1e30f), 7);                 // saturation, not overflow
  EXPECT_EQ(F32ToE2M1(-1e-30f), 8);               // rounds to -0
  EXPECT_EQ(F32ToE2M1(std::ldexp(1.0f, -149)), 0);
}

TEST(Mxfp4Encoder, TiesInsideABlock) {
  // Scale 2^E fixed by an element 6 * 2^E; the other elements sit on the midpoints.
  for (int e : {-127, -100, -1, 0, 1, 60, 125}) {
    float x[32];
    const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const uint8_t tie_codes[] = {0, 2, 2, 4, 4, 6, 6};
    x[0] = std::ldexp(6.0f, e);
    for (int j = 1; j < 32; ++j) x[j] = std::ldexp((j % 2 ? 1 : -1) * ties[j % 7], e);
    Encoded got{};
    ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
    EXPECT_EQ(got.scale, e + 127);
    for (int j = 1; j < 32; ++j) {
      const int code = (got.codes[j / 2] >> (4 * (j % 2))) & 0xF;
      EXPECT_EQ(code, tie_codes[j % 7] | (j % 2 ? 0 : 8)) << "e=" << e << " j=" << j;
    }
    ExpectMatchesReference(x, "ties");
  }
}

TEST(Mxfp4Encoder, SaturatesAtSixTimesTheScale) {
  // amax in (6, 8) * 2^E keeps the exponent E and clips to 6 * 2^E (quantization.md A.3).
  for (float top : {6.0f, 6.5f, 7.0f, 7.9f, std::nextafter(8.0f, 0.0f)}) {
    float x[32] = {};
    x[5] = top;
    x[6] = -top;
    x[7] = 5.5f;  // between 4 and 6: nearest is 6
    Encoded got{};
    ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
    EXPECT_EQ(got.scale, 127) << top;
    EXPECT_EQ(got.codes[2] >> 4, 7) << top;   // x[5]
    EXPECT_EQ(got.codes[3] & 0xF, 15) << top;  // x[6]
    EXPECT_EQ(got.codes[3] >> 4, 7) << top;    // x[7]
    ExpectMatchesReference(x, "saturation");
  }
  // 8 itself moves to the next exponent: 8 = 4 * 2^1.
  float x[32] = {};
  x[0] = 8.0f;
  Encoded got{};
  ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
  EXPECT_EQ(got.scale, 128);
  EXPECT_EQ(got.codes[0], 6);
  // The largest finite float: exponent 127 - 2 = 125 (byte 252), value clipped to 6 * 2^125.
  x[0] = std::numeric_limits<float>::max();
  ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
  EXPECT_EQ(got.scale, 252);
  EXPECT_EQ(got.codes[0], 7);
}

TEST(Mxfp4Encoder, ZerosAndTinyBlocks) {
  float x[32];
  Encoded got{};
  std::fill_n(x, 32, 0.0f);
  ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
  EXPECT_EQ(got.scale, kMxfp4ZeroBlockScale);
  for (uint8_t c : got.codes) EXPECT_EQ(c, 0x00);
  std::fill_n(x, 32, -0.0f);  // the sign of zero survives: code 8
  ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
  EXPECT_EQ(got.scale, kMxfp4ZeroBlockScale);
  for (uint8_t c : got.codes) EXPECT_EQ(c, 0x88);
  // Subnormal maxima clamp to E = -127 (byte 0), like a zero block.
  std::fill_n(x, 32, 0.0f);
  x[3] = std::ldexp(1.0f, -149);
  x[4] = -std::ldexp(3.0f, -128);  // 1.5 * 2^-127: code 3 at byte 0
  ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
  EXPECT_EQ(got.scale, 0);
  EXPECT_EQ(got.codes[1] >> 4, 0);
  EXPECT_EQ(got.codes[2] & 0xF, 11);
  ExpectMatchesReference(x, "subnormal");
  // 6 * 2^-126 is normal: exponent -126, byte 1.
  x[4] = std::ldexp(6.0f, -126);
  ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
  EXPECT_EQ(got.scale, 1);
  EXPECT_EQ(got.codes[2] & 0xF, 7);
}

TEST(Mxfp4Encoder, RejectsNaNAndInfinityWithoutWriting) {
  for (float bad : {kNaN, -kNaN, kInf, -kInf}) {
    for (int pos : {0, 17, 31}) {
      float x[32];
      for (int j = 0; j < 32; ++j) x[j] = 0.5f * static_cast<float>(j);
      x[pos] = bad;
      Encoded got;
      std::memset(&got, 0xAB, sizeof(got));
      EXPECT_FALSE(QuantizeMxfp4Block(x, got.codes, &got.scale)) << bad << " at " << pos;
      EXPECT_EQ(got.scale, 0xAB);
      for (uint8_t c : got.codes) EXPECT_EQ(c, 0xAB);
    }
  }
}

TEST(Mxfp4Decoder, EdgeScaleBytes) {
  // Byte 255 is +inf as in the OpenAI/HF decoders (value * 2^128): nonzero codes decode to
  // +-inf, zero codes to NaN (0 * inf). Byte 254 overflows FP32 from magnitude 2 up.
  uint8_t codes[16];
  for (int b = 0; b < 16; ++b) codes[b] = static_cast<uint8_t>(b | ((15 - b) << 4));
  float out[32];
  DecodeMxfp4Block(codes, 255, out);
  for (int b = 0; b < 16; ++b) {
    for (int h = 0; h < 2; ++h) {
      const int c = h == 0 ? b : 15 - b;
      const float v = out[2 * b + h];
      if ((c & 7) == 0) {
        EXPECT_TRUE(std::isnan(v)) << c;
      } else {
        EXPECT_EQ(v, (c & 8) ? -kInf : kInf) << c;
      }
    }
  }
  DecodeMxfp4Block(codes, 254, out);
  for (int b = 0; b < 16; ++b) {
    const int c = b;  // low nibbles
    const float want = (c & 7) < 4 ? std::ldexp(kE2M1Values[c], 127) : ((c & 8) ? -kInf : kInf);
    EXPECT_TRUE(SameBits(out[2 * b], want)) << c;
  }
  DecodeMxfp4Block(codes, 0, out);
  for (int b = 0; b < 16; ++b) EXPECT_TRUE(SameBits(out[2 * b], kE2M1Values[b] * std::ldexp(1.0f, -127))) << b;
  EXPECT_EQ(out[2], std::ldexp(1.0f, -128));  // code 1 at byte 0: 2^-128, exact subnormal
}

// Every scale byte x every code: a block holding the code everywhere except one anchor element
// of magnitude 4 or 6 (so the block is canonical: its shared exponent is the one the encoder
// derives) decodes and re-encodes to the same bytes, -0 included. Bytes 253..255 decode to
// +-inf/NaN for any canonical block and are rejected; the encoder never emits them.
TEST(Mxfp4RoundTrip, AllScaleBytesAndCodes) {
  const uint8_t anchors[4] = {6, 7, 14, 15};
  for (int u = 0; u < 256; ++u) {
    for (int c = 0; c < 16; ++c) {
      uint8_t codes32[32];
      std::fill_n(codes32, 32, static_cast<uint8_t>(c));
      codes32[(c + u) % 32] = anchors[(u + c) % 4];
      uint8_t bytes[16];
      Pack(codes32, bytes);
      float x[32];
      DecodeMxfp4Block(bytes, static_cast<uint8_t>(u), x);
      const bool finite = std::all_of(x, x + 32, [](float v) { return std::isfinite(v); });
      Encoded got{};
      if (u <= 252) {
        ASSERT_TRUE(finite) << "u=" << u << " c=" << c;
        ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale)) << "u=" << u << " c=" << c;
        ASSERT_EQ(got.scale, u) << "c=" << c;
        ASSERT_EQ(0, std::memcmp(got.codes, bytes, 16)) << "u=" << u << " c=" << c;
      } else {
        ASSERT_FALSE(finite) << "u=" << u << " c=" << c;
        ASSERT_FALSE(QuantizeMxfp4Block(x, got.codes, &got.scale)) << "u=" << u << " c=" << c;
      }
    }
  }
}

// Non-canonical blocks (largest magnitude below 4, or all zero) come back on the canonical scale
// with exactly the same values: doubling the grid {0, .5, 1, 1.5, 2, 3} stays on the grid.
TEST(Mxfp4RoundTrip, NonCanonicalBlocksKeepTheirValues) {
  std::mt19937 rng(7);
  for (int u = 0; u <= 252; ++u) {
    for (int top = 0; top < 6; ++top) {  // largest magnitude code: 0 .. 5 (value 0 .. 3)
      uint8_t codes32[32];
      for (int j = 0; j < 32; ++j) {
        codes32[j] = static_cast<uint8_t>((rng() % (top + 1)) | (rng() % 2 ? 8 : 0));
      }
      codes32[rng() % 32] = static_cast<uint8_t>(top);
      uint8_t bytes[16];
      Pack(codes32, bytes);
      float x[32], back[32];
      DecodeMxfp4Block(bytes, static_cast<uint8_t>(u), x);
      Encoded got{};
      ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
      DecodeMxfp4Block(got.codes, got.scale, back);
      for (int j = 0; j < 32; ++j) ASSERT_TRUE(SameBits(x[j], back[j])) << "u=" << u << " top=" << top << " j=" << j;
      if (top == 0) {
        EXPECT_EQ(got.scale, kMxfp4ZeroBlockScale);
      } else {
        EXPECT_LE(got.scale, u);
      }
      ExpectMatchesReference(x, "non-canonical");
    }
  }
}

// Random blocks of many shapes against the reference; the decoded result is also the nearest
// grid value of every input (|x - decode| <= half a grid step, or saturated).
TEST(Mxfp4Encoder, RandomBlocksMatchReference) {
  std::mt19937 rng(20261130);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-150, 120);
  for (int trial = 0; trial < 20000; ++trial) {
    float x[32];
    const int kind = trial % 5;
    const int e = exponent(rng);
    for (int j = 0; j < 32; ++j) {
      switch (kind) {
        case 0: x[j] = std::ldexp(normal(rng), e); break;  // Gaussian at any magnitude
        case 1: {  // grid points and midpoints of one exponent
          const float half_steps[] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f, 2, 2.5f, 3, 3.5f, 4, 5, 6, 7};
          x[j] = std::ldexp((rng() % 2 ? -1.0f : 1.0f) * half_steps[rng() % 16], std::clamp(e, -120, 120));
          break;
        }
        case 2: x[j] = rng() % 4 == 0 ? (rng() % 2 ? 0.0f : -0.0f) : std::ldexp(normal(rng), e); break;
        case 3: x[j] = std::ldexp(normal(rng), std::max(e, -149) - static_cast<int>(rng() % 40)); break;  // wide range
        default: x[j] = (rng() % 2 ? 1.0f : -1.0f) * std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f,
                                                                   120 + static_cast<int>(rng() % 8));  // near FLT_MAX
      }
    }
    ExpectMatchesReference(x, "random");
    if (::testing::Test::HasFatalFailure()) return;
    Encoded got{};
    ASSERT_TRUE(QuantizeMxfp4Block(x, got.codes, &got.scale));
    float back[32];
    DecodeMxfp4Block(got.codes, got.scale, back);
    const double step = std::ldexp(1.0, got.scale - 127);  // 2^E
    for (int j = 0; j < 32; ++j) {
      const double a = std::fabs(static_cast<double>(x[j]));
      const double err = std::fabs(a - std::fabs(static_cast<double>(back[j])));
      // Grid spacing around a: 0.5 below 2, 1 below 4, 2 above; saturated values clip to 6.
      const double spacing = a < 2 * step ? 0.5 * step : a < 4 * step ? step : 2 * step;
      if (a <= 6 * step) ASSERT_LE(err, 0.5 * spacing) << x[j];
      else ASSERT_EQ(std::fabs(back[j]), 6 * step) << x[j];
      ASSERT_EQ(std::signbit(back[j]), std::signbit(x[j])) << x[j];
    }
  }
}

TEST(Mxfp4Encoder, RowAndMatrixHelpers) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (size_t in : {size_t{0}, size_t{32}, size_t{96}, size_t{2880}}) {
    const size_t rows = 3, groups = in / 32;
    std::vector<float> w(rows * in);
    for (float& v : w) v = normal(rng);
    std::vector<uint8_t> blocks(rows * groups * 16 + 1, 0xCD), scales(rows * groups + 1, 0xCD);
    ASSERT_TRUE(QuantizeMxfp4Matrix(w.data(), rows, in, blocks.data(), scales.data()));
    EXPECT_EQ(blocks.back(), 0xCD);  // guard bytes untouched
    EXPECT_EQ(scales.back(), 0xCD);
    for (size_t b = 0; b < rows * groups; ++b) {
      Encoded want{};
      ASSERT_TRUE(QuantizeMxfp4Block(w.data() + 32 * b, want.codes, &want.scale));
      ASSERT_EQ(scales[b], want.scale);
      ASSERT_EQ(0, std::memcmp(blocks.data() + 16 * b, want.codes, 16));
    }
    // Row helper is the inverse of DecodeMxfp4Row on the decoded values.
    std::vector<float> decoded(in), again(in);
    DecodeMxfp4Row(blocks.data(), scales.data(), in, decoded.data());
    std::vector<uint8_t> codes2(in / 2), scales2(groups);
    ASSERT_TRUE(QuantizeMxfp4Row(decoded.data(), in, codes2.data(), scales2.data()));
    EXPECT_TRUE(std::equal(codes2.begin(), codes2.end(), blocks.begin()));
    EXPECT_TRUE(std::equal(scales2.begin(), scales2.end(), scales.begin()));
  }
  // A NaN in the second block: the first block is written, the rest untouched.
  std::vector<float> row(96, 1.0f);
  row[40] = kNaN;
  std::vector<uint8_t> codes(48, 0xCD), scales(3, 0xCD);
  EXPECT_FALSE(QuantizeMxfp4Row(row.data(), 96, codes.data(), scales.data()));
  EXPECT_EQ(scales[0], 125);  // amax 1 = 4 * 2^-2
  EXPECT_EQ(scales[1], 0xCD);
  EXPECT_EQ(scales[2], 0xCD);
  EXPECT_EQ(codes[16], 0xCD);
  EXPECT_FALSE(QuantizeMxfp4Matrix(row.data(), 1, 96, codes.data(), scales.data()));
}

}  // namespace
}  // namespace tessera
