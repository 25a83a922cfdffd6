// The tokenizer a GGUF file describes (issue 30 point 3), as the tokenizer.json the existing
// tokenizer reads, built to tokenize as llama.cpp does on the same file (llama-vocab.cpp):
//   tokenizer.ggml.model "gpt2"   byte-level BPE: tokens, merges ("a b"), and the pre-tokenizer
//                                 named by tokenizer.ggml.pre (a table in gguf_vocab.cpp with every
//                                 name llama.cpp knows, one row per rule: the split regexes of the
//                                 Hugging Face tokenizer llama.cpp adapted, whether whole words are
//                                 looked up before merging, and the BOS default; the few names
//                                 whose vocabulary is not byte-level are refused with the reason);
//   tokenizer.ggml.model "llama"  SentencePiece BPE: tokens with scores, the text prefixed with a
//                                 space (tokenizer.ggml.add_space_prefix, default true) and its
//                                 spaces written U+2581, merges derived from the scores as
//                                 transformers' SentencePiece converter does (each split of a
//                                 token into two tokens, ranked by the token's score), unknown
//                                 characters as <0xXX> byte tokens.
// token_type 2 (unknown) and 3 (control) tokens are special added tokens (matched in text unless
// EncodeOrdinary), type 4 (user-defined) ones added tokens matched always; tokenizer.ggml.add_bos_token /
// add_eos_token (else the model's default) make the template of EncodeWithTemplate.
#pragma once

#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "tokenizer/tokenizer_config.h"

namespace tessera {

// tokenizer.json content; a one-line error naming the file and key for a tokenizer model or
// pre-tokenizer without a row, missing or inconsistent arrays.
nlohmann::json GgufTokenizerJson(const GgufFile& file);

// The tokenizer_config.json equivalent: BOS/EOS token texts, add_bos/add_eos and
// tokenizer.chat_template ("" when absent).
TokenizerConfig GgufTokenizerConfig(const GgufFile& file);

}  // namespace tessera
