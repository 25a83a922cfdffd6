// `tessera bench --profile`: the decode profile (core/profile.h) of one model, printed as a
// table of operations (time, bytes and GB/s per decode token, next to the read probe) and of
// the thread pool (hand-offs, busy and idle time per thread). `--profile-prefill`: the same for
// one prefill, with each operation's compute rate next to the measured peaks.
#pragma once

#include "model/kv_cache.h"
#include "model/model.h"

namespace tessera::cli {

// Decodes `tokens` tokens after the positions `cache` holds (its depth: 0, or a prefilled
// prompt), `reps` times after one untimed pass, with the profile on, rolling the cache back to its
// depth after each pass (it needs rollback() >= tokens); then measures the read bandwidth and
// prints the tables, or JSON.
void RunDecodeProfile(const Model& model, KvCache& cache, int tokens, int reps, bool json);

// Prefills `tokens` random tokens after the positions `cache` holds, `reps` times after one
// untimed pass, with the profile on (rolling back to the depth after each); then measures the
// compute peaks and prints, per prefill, each kind of operation's time and, for the linears and
// attention, its rate in ops against the peak of its arithmetic (int8 dot products for the q8
// formats, f32 FMAs otherwise), or JSON.
void RunPrefillProfile(const Model& model, KvCache& cache, int tokens, int reps, bool json);

}  // namespace tessera::cli
