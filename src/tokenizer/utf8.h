// UTF-8 helpers shared by the tokenizer and its streaming decoder.
//
// Well-formed sequences are those of the Unicode standard (Table 3-7): no overlong forms, no
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::utf8 {

// Byte offset of the first byte that does not start a well-formed sequence, or text.size().
size_t FindInvalid(std::string_view text);

// Appends `data[0, size)` to `out`, replacing each maximal ill-formed subpart with U+FFFD
// exactly as Rust's String::from_utf8_lossy does (the "substitution of maximal subparts"
// practice). With `final` false, a trailing incomplete but so far well-formed sequence is left
// unconsumed; the return value is the number of bytes consumed (always `size` when `final`).
// Because replacement is decided by maximal subparts, converting a byte stream in pieces this
// way gives the same text as converting it at once.
size_t AppendLossy(const uint8_t* data, size_t size, bool final, std::string& out);

// Decodes the code point that starts at text[pos] (text must be well-formed there) and
// advances pos past it.
char32_t Next(std::string_view text, size_t& pos);

// Appends the UTF-8 encoding of a scalar value (c < 0x110000, not a surrogate).
void Append(char32_t c, std::string& out);

}  // namespace tessera::utf8
