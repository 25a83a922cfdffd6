// Budgets of a model description (issue 44), the same for config.json and GGUF metadata: every
// count that sizes something (per-layer lists, per-expert tensors and routers, per-head tables,
// vocabulary rows) is checked against these before anything is sized by it, so a hostile file
// gets a one-line error instead of an allocation without bound. Each is far above every released
// model: 126 layers (Llama 3.1 405B; llama.cpp stops at 512), 384 routed experts (Kimi-K2), 128
// heads, 262,144 tokens (Gemma 3), 53,248 wide (Llama 3.1 405B's MLP), a 10M-token context
// (Llama 4 Scout).
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int64_t kMaxConfigLayers = 1024;
inline constexpr int64_t kMaxConfigExperts = 4096;              // routed, shared, per token, groups
inline constexpr int64_t kMaxConfigHeads = 4096;                // query and key-value heads
inline constexpr int64_t kMaxConfigVocab = int64_t{1} << 24;    // 16,777,216 tokens
inline constexpr int64_t kMaxConfigWidth = int64_t{1} << 20;    // hidden, intermediate, head and rank sizes
inline constexpr int64_t kMaxConfigContext = int64_t{1} << 26;  // 67,108,864 positions (also windows)

}  // namespace tessera
