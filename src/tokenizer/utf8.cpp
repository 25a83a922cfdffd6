#include "tokenizer/utf8.h"

#include <cstring>

namespace tessera::utf8 {
namespace {

// For a lead byte: the sequence length (0 = never a lead byte) and the allowed range of the
// second byte, which is where overlong forms, surrogates and values above U+10FFFF are cut off.
struct LeadInfo {
  uint8_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

constexpr LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Length of the well-formed prefix of the sequence starting at data[0] (n > 0 bytes available):
// returns {valid_bytes, complete}. complete == false with valid_bytes == n means the input
// ended inside a sequence that could still become well-formed.
struct Prefix {
  size_t valid;
  bool complete;
};

inline Prefix ScanSequence(const uint8_t* data, size_t n) {
  const LeadInfo lead = Lead(data[0]);
  if (lead.length == 0) return {0, false};
  if (lead.length == 1) return {1, true};
  size_t i = 1;
  if (i == n) return {1, false};
  if (data[i] < lead.second_lo || data[i] > lead.second_hi) return {1, false};
  for (++i; i < lead.length; ++i) {
    if (i == n) return {i, false};
    if ((data[i] & 0xC0) != 0x80) return {i, false};
  }
  return {lead.length, true};
}

}  // namespace

size_t FindInvalid(std::string_view text) {
  const auto* data = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII runs are the common case; test 8 bytes at a time.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, data + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    if (data[i] < 0x80) {
      ++i;
      continue;
    }
    const Prefix p = ScanSequence(data + i, n - i);
    if (!p.complete) return i;
    i += p.valid;
  }
  return n;
}

size_t AppendLossy(const uint8_t* data, size_t size, bool final, std::string& out) {
  size_t i = 0;
  while (i < size) {
    size_t run = i;
    while (run < size && data[run] < 0x80) ++run;
    if (run > i) {
      out.append(reinterpret_cast<const char*>(data + i), run - i);
      i = run;
      if (i == size) break;
    }
    const Prefix p = ScanSequence(data + i, size - i);
    if (p.complete) {
      out.append(reinterpret_cast<const char*>(data + i), p.valid);
      i += p.valid;
    } else if (p.valid > 0 && i + p.valid == size && !final) {
      break;  // may still be completed by the next bytes
    } else {
      // One U+FFFD for the maximal subpart; an invalid lead byte is a subpart of its own.
      out.append(kReplacement, 3);
      i += p.valid > 0 ? p.valid : 1;
    }
  }
  return i;
}

char32_t Next(std::string_view text, size_t& pos) {
  const auto* d = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  if (d[0] < 0x80) {
    pos += 1;
    return d[0];
  }
  if (d[0] < 0xE0) {
    pos += 2;
    return (char32_t(d[0] & 0x1F) << 6) | (d[1] & 0x3F);
  }
  if (d[0] < 0xF0) {
    pos += 3;
    return (char32_t(d[0] & 0x0F) << 12) | (char32_t(d[1] & 0x3F) << 6) | (d[2] & 0x3F);
  }
  pos += 4;
  return (char32_t(d[0] & 0x07) << 18) | (char32_t(d[1] & 0x3F) << 12) |
         (char32_t(d[2] & 0x3F) << 6) | (d[3] & 0x3F);
}

void Append(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace tessera::utf8
