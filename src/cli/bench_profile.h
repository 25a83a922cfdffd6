// `tessera bench --profile`: the decode profile (core/profile.h) of one model, printed as a
// table of operations (time, bytes and GB/s per decode token, next to the read probe) and of
// the thread pool (hand-offs, busy and idle time per thread).
#pragma once

#include "model/kv_cache.h"
#include "model/model.h"

namespace tessera::cli {

// Decodes `tokens` tokens from an empty cache `reps` times (after one untimed pass) with the
// profile on, then measures the read bandwidth; prints the tables, or JSON.
void RunDecodeProfile(const Model& model, int tokens, int reps, KvType kv, bool json);

}  // namespace tessera::cli
