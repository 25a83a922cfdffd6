// RMSNorm and attention (layers.h).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/profile.h"
#include "core/thread_pool.h"
#include "kernels/attend_blocked.h"
#include "kernels/kernels.h"
#include "kernels/kv_int8.h"
#include "model/layers.h"

namespace tessera {
namespace {

// heads vectors of d floats (x + i d) into the cache's element type, head i at out + i stride
// (BF16 and f32: stride d).
inline void StoreKv(const float* x, int64_t heads, int64_t d, int64_t /*stride*/, uint16_t* out) {
  for (int64_t i = 0; i < heads * d; ++i) out[i] = F32ToBf16(x[i]);
}
inline void StoreKv(const float* x, int64_t heads, int64_t d, int64_t /*stride*/, float* out) {
  std::memcpy(out, x, static_cast<size_t>(heads * d) * sizeof(float));
}
inline void StoreKv(const float* x, int64_t heads, int64_t d, int64_t stride, int8_t* out) {
  for (int64_t i = 0; i < heads; ++i) QuantizeKvInt8(x + i * d, static_cast<size_t>(d), out + i * stride);
}

// The shared-blocks path of prefill (Attend): batches of at least this many queries, each task
// one block of one key/value head for this many queries (the block's rows stay in L2 while they
// pass over it), the partials of at most kSharedPartialBytes at a time.
constexpr int64_t kSharedBlocksMinTokens = 16;
constexpr int64_t kSharedBlockTokens = 32;
constexpr int64_t kSharedPartialBytes = int64_t{64} << 20;
thread_local std::vector<float> tls_shared_partials;

// Attend's queries for a prompt (or chunk) after a long history: T queries at positions
// start .. start + T - 1, every one seeing positions from 0 (krows / vrows index = position) and
// the first more than kAttendBlock of them, results into out in Attend's layout. Each query is
// attended in blocks, its first shared_blocks of them full and common to the whole batch, so the
// shared blocks run block by block over all the batch's queries, the block's rows staying in
// cache, instead of query by query (each query re-reading the whole history from memory). The
// same AttendOneBlock calls per query and block and the same merge as AttendBlocked: the same
// bits.
template <typename Elem>
void AttendSharedBlocks(const AttentionShape& shape, const float* sinks, const float* q, int64_t T, int64_t start,
                        const Elem* const* krows, const Elem* const* vrows, int64_t head_stride, float scale,
                        float* out) {
  const int64_t D = shape.head_dim, Nq = shape.heads, Nkv = shape.kv_heads, group = Nq / Nkv;
  const KernelTable& kt = ActiveKernels();
  ThreadPool& pool = GlobalPool();
  const int64_t shared_blocks = (start + 1) / static_cast<int64_t>(kAttendBlock);
  const int64_t max_blocks = static_cast<int64_t>(AttendBlockCount(static_cast<size_t>(start + T)));
  const int64_t head_floats = static_cast<int64_t>(AttendPartialFloats(static_cast<size_t>(D)));
  // One key/value head's partials, [token][block][query head][D + 2], for a chunk of tokens.
  const int64_t token_floats = max_blocks * group * head_floats;
  const int64_t chunk = std::clamp<int64_t>(kSharedPartialBytes / (token_floats * 4), 1, T);
  // The calling thread's buffer, kept: at 16K positions a 512-token chunk's partials are 35 MB,
  // fresh pages in every layer otherwise. (The pool's tasks use it through this pointer; by name
  // they would reach their own threads' empty buffers.)
  std::vector<float>& partial_store = tls_shared_partials;
  if (partial_store.size() < static_cast<size_t>(chunk * token_floats)) {
    partial_store.resize(static_cast<size_t>(chunk * token_floats));
  }
  float* const partials = partial_store.data();
  std::vector<std::vector<float>> scores(pool.num_threads());
  auto block_of = [&](int64_t t, int64_t kvh, int64_t block, int thread, float* partial) {
    std::vector<float>& s = scores[thread];
    s.resize(static_cast<size_t>(group) * kAttendBlock);
    AttendOneBlock(kt, &q[(t * Nq + kvh * group) * D], D, group, D, krows, vrows, kvh * head_stride,
                   static_cast<size_t>(start + t + 1), static_cast<size_t>(block), scale, s.data(), partial);
  };
  for (int64_t kvh = 0; kvh < Nkv; ++kvh) {
    for (int64_t t0 = 0; t0 < T; t0 += chunk) {
      const int64_t t1 = std::min(T, t0 + chunk);
      const int64_t spans = (t1 - t0 + kSharedBlockTokens - 1) / kSharedBlockTokens;
      pool.Run(static_cast<size_t>(shared_blocks * spans), [&](size_t task, int thread) {
        const int64_t block = static_cast<int64_t>(task) / spans;
        const int64_t first = t0 + static_cast<int64_t>(task) % spans * kSharedBlockTokens;
        for (int64_t t = first; t < std::min(t1, first + kSharedBlockTokens); ++t) {
          const int64_t at = (t - t0) * token_floats + block * group * head_floats;
          block_of(t, kvh, block, thread, &partials[static_cast<size_t>(at)]);
        }
      });
      pool.Run(static_cast<size_t>(t1 - t0), [&](size_t task, int thread) {
        const int64_t t = t0 + static_cast<int64_t>(task);
        float* own = &partials[static_cast<size_t>((t - t0) * token_floats)];
        const int64_t blocks = static_cast<int64_t>(AttendBlockCount(static_cast<size_t>(start + t + 1)));
        for (int64_t block = shared_blocks; block < blocks; ++block) {
          block_of(t, kvh, block, thread, own + block * group * head_floats);
        }
        MergeHeadPartials(own, static_cast<size_t>(group), static_cast<size_t>(blocks), static_cast<size_t>(D),
                          &sinks[kvh * group], out + (t * Nq + kvh * group) * D, static_cast<size_t>(D));
      });
    }
  }
}

template <typename Elem>
void StoreRows(KvCache& cache, int layer, const float* k, const float* v, int64_t T, int64_t start, int64_t D) {
  const int64_t Nkv = cache.kv_heads();
  const int64_t head_elems = static_cast<int64_t>(KvHeadBytes(D, cache.type()) / sizeof(Elem));
  const int64_t head_stride = static_cast<int64_t>(cache.HeadStride(layer) / sizeof(Elem));
  for (int64_t t = 0; t < T; ++t) {
    Elem* key = reinterpret_cast<Elem*>(cache.KeySlot(layer, start + t));
    Elem* value = reinterpret_cast<Elem*>(cache.ValueSlot(layer, start + t));
    for (int64_t h = 0; h < Nkv; ++h) {
      StoreKv(k + (t * Nkv + h) * D, 1, D, head_elems, key + h * head_stride);
      if (!cache.values_are_keys()) StoreKv(v + (t * Nkv + h) * D, 1, D, head_elems, value + h * head_stride);
    }
  }
}

}  // namespace

void StoreCacheRows(KvCache& cache, int layer, const float* k, const float* v, int64_t T, int64_t start, int64_t D) {
  switch (cache.type()) {
    case KvType::kBF16: StoreRows<uint16_t>(cache, layer, k, v, T, start, D); break;
    case KvType::kF32: StoreRows<float>(cache, layer, k, v, T, start, D); break;
    case KvType::kInt8: StoreRows<int8_t>(cache, layer, k, v, T, start, D); break;
  }
}

void ReadCacheRows(KvCache& cache, int layer, int64_t first, int64_t count, int64_t D, float* out) {
  const int64_t Nkv = cache.kv_heads();
  const size_t stride = cache.HeadStride(layer);
  for (int64_t pos = first; pos < first + count; ++pos) {
    for (int64_t h = 0; h < Nkv; ++h) {
      const uint8_t* head = cache.KeySlot(layer, pos) + h * stride;
      float* o = out + ((pos - first) * Nkv + h) * D;
      switch (cache.type()) {
        case KvType::kF32: std::memcpy(o, head, static_cast<size_t>(D) * sizeof(float)); break;
        case KvType::kBF16:
          for (int64_t c = 0; c < D; ++c) o[c] = Bf16ToF32(reinterpret_cast<const uint16_t*>(head)[c]);
          break;
        case KvType::kInt8:
          for (int64_t c = 0; c < D; ++c) {
            o[c] = KvInt8Value(reinterpret_cast<const int8_t*>(head), static_cast<size_t>(D), static_cast<size_t>(c));
          }
          break;
      }
    }
  }
}

void RmsNorm(const float* x, const float* w, int64_t m, int64_t n, double eps, float* y) {
  const ProfileScope scope("norm");
  // Rows split over the pool (each row's arithmetic as alone, so the bits do not depend on the
  // split); chunks of at least ~16K values, so a decode step's one row stays on this thread.
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)));
  GlobalPool().ParallelFor(static_cast<size_t>(m), grain, [&](size_t begin, size_t end) {
    for (int64_t r = static_cast<int64_t>(begin); r < static_cast<int64_t>(end); ++r) {
      const float* xr = x + r * n;
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
      float* yr = y + r * n;
      for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * inv);
    }
  });
}

void ProjectQkv(const AttentionWeights& w, const float* h, int64_t T, float* q, float* k, float* v) {
  // q, k and v in one dispatch: the small k/v matrices alone would not keep both threads busy.
  Q8Activations hq;  // h quantized once for the three projections (q8 formats only)
  auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
  const LinearOutput qkv[] = {{w.q.get(), 0, bias(w.bq), q}, {w.k.get(), 0, bias(w.bk), k}, {w.v.get(), 0, bias(w.bv), v}};
  MultiplyGroup(qkv, h, static_cast<size_t>(T), hq);
}

void Attend(const AttentionWeights& w, const AttentionShape& shape, const Rope& rope, int layer, float* q, float* k,
            const float* v, int64_t T, int64_t start, KvCache& cache, const float* rope_cs, float* out) {
  const int64_t D = shape.head_dim, Nq = shape.heads, Nkv = shape.kv_heads;
  if (!w.q_norm.empty()) {
    // Qwen3: RMSNorm over each head's D values, after the projection and before RoPE (in place:
    // RmsNorm reads a row whole before writing it).
    RmsNorm(q, w.q_norm.data(), T * Nq, D, shape.eps, q);
    RmsNorm(k, w.k_norm.data(), T * Nkv, D, shape.eps, k);
  }
  const int64_t cs_stride = 2 * rope.half();
  if (w.rope) {  // NoPE layers (SmolLM3) leave q and k unrotated
    const ProfileScope scope("rope");
    rope.Apply(q, T, Nq, Nq * D, D, rope_cs, cs_stride);
    rope.Apply(k, T, Nkv, Nkv * D, D, rope_cs, cs_stride);
  }
  AttendCached(w, shape, rope.attention_scale(), layer, q, k, v, T, start, cache, out);
}

void AttendCached(const AttentionWeights& w, const AttentionShape& shape, float scale, int layer, const float* q,
                  const float* k, const float* v, int64_t T, int64_t start, KvCache& cache, float* out) {
  // This rank's heads (all of them without tensor parallelism); local query head i reads local
  // key/value head i / group in both sharding cases (model/tensor_parallel.h).
  const int64_t D = shape.head_dim, Nq = shape.heads, Nkv = shape.kv_heads;
  const int64_t group = Nq / Nkv;
  // A latent cache (DeepSeek MLA) stores one row per position that is both key and value.
  const bool shared_values = cache.values_are_keys();
  auto run = [&](auto elem_tag) {  // body of the cache element type's instantiation
    using Elem = decltype(elem_tag);
    // A head's vector in Elem units (D for BF16 and f32; codes and scales for int8).
    const int64_t head_elems = static_cast<int64_t>(KvHeadBytes(D, cache.type()) / sizeof(Elem));
    const size_t head_bytes = static_cast<size_t>(head_elems) * sizeof(Elem);
    const int64_t window = w.sliding ? shape.window.value_or(start + T) : start + T;
    // For the profile: the key and value rows every query reads (its window of positions).
    double kv_positions = 0.0;
    for (int64_t t = 0; t < T; ++t) kv_positions += static_cast<double>(std::min(start + t + 1, window));
    // Ops: per query head and position seen, a D-long dot product and a D-long weighted sum.
    const ProfileScope scope("attention", KvTypeName(cache.type()),
                             kv_positions * static_cast<double>((shared_values ? 1 : 2) * Nkv * static_cast<int64_t>(head_bytes)),
                             kv_positions * static_cast<double>(4 * Nq * D));
    // Positions some query of this batch sees, [lo, end).
    const int64_t end = start + T;
    const int64_t lo = std::max<int64_t>(0, start - window + 1);
    // The queries read every position from one head-major store (key/value head h of position p
    // at krows[p - lo] + h head_stride): the cache itself, the batch's rows written into it first,
    // unless they would overwrite ring slots of older positions the batch's own queries still see
    // (a sliding layer given more than its rollback room of tokens at once, the ring wrapping):
    // then a copy of the positions seen, from which the cache is written afterwards. Either way a
    // position reads the values the cache holds for it (batch-size invariance).
    const int64_t capacity = cache.capacity(layer);
    const bool in_place = !cache.sliding(layer) || capacity >= cache.context() || T <= capacity - window + 1;
    std::vector<Elem> kwin, vwin;
    int64_t head_stride = 0;
    std::vector<const Elem*> krows(end - lo), vrows(end - lo);
    if (in_place) {
      head_stride = static_cast<int64_t>(cache.HeadStride(layer) / sizeof(Elem));
      StoreCacheRows(cache, layer, k, v, T, start, D);
      for (int64_t pos = lo; pos < end; ++pos) {
        krows[pos - lo] = reinterpret_cast<const Elem*>(cache.KeySlot(layer, pos));
        vrows[pos - lo] = reinterpret_cast<const Elem*>(cache.ValueSlot(layer, pos));
      }
    } else {
      const int64_t span = end - lo;
      head_stride = span * head_elems;
      kwin.resize(static_cast<size_t>(Nkv * head_stride));
      if (!shared_values) vwin.resize(static_cast<size_t>(Nkv * head_stride));
      const int64_t cache_stride = static_cast<int64_t>(cache.HeadStride(layer));
      for (int64_t pos = lo; pos < end; ++pos) {
        krows[pos - lo] = &kwin[(pos - lo) * head_elems];
        vrows[pos - lo] = shared_values ? krows[pos - lo] : &vwin[(pos - lo) * head_elems];
        for (int64_t h = 0; h < Nkv; ++h) {
          Elem* key = &kwin[h * head_stride + (pos - lo) * head_elems];
          Elem* value = shared_values ? nullptr : &vwin[h * head_stride + (pos - lo) * head_elems];
          if (pos >= start) {
            StoreKv(k + ((pos - start) * Nkv + h) * D, 1, D, head_elems, key);
            if (!shared_values) StoreKv(v + ((pos - start) * Nkv + h) * D, 1, D, head_elems, value);
          } else {
            std::memcpy(key, cache.KeySlot(layer, pos) + h * cache_stride, head_bytes);
            if (!shared_values) std::memcpy(value, cache.ValueSlot(layer, pos) + h * cache_stride, head_bytes);
          }
        }
      }
    }
    if (start + T <= window && start + 1 > static_cast<int64_t>(kAttendBlock) && T >= kSharedBlocksMinTokens) {
      AttendSharedBlocks(shape, w.sinks.data(), q, T, start, krows.data(), vrows.data(), head_stride, scale, out);
    } else {
      const KernelTable& kt = ActiveKernels();
      ThreadPool& pool = GlobalPool();
      const int64_t threads = pool.num_threads();
      // One unit per (token, key/value head, slice of its query heads): the heads of a GQA group
      // share the rows' loads in the kernel (attend_group_*, each head's bits as if alone), and the
      // group is sliced only when there would otherwise be fewer than 4 units per thread (decode).
      // Each slice reads the rows once more: one shared key/value head (DeepSeek's latent cache,
      // every head of the model in one group) is sliced only as far as one unit per thread, its
      // long histories split into blocks instead.
      const int64_t wanted_units = shared_values ? threads : 4 * threads;
      int64_t slice = group;
      while (slice % 2 == 0 && T * Nkv * (group / slice) < wanted_units) slice /= 2;
      const int64_t slices = group / slice;
      const int64_t units = T * Nkv * slices;
      // A query over more than kAttendBlock positions is attended in blocks merged afterwards
      // (kernels/attend_blocked.h: the same bits however the blocks are spread). With still too few
      // units per thread (decode deep in the context), each block is a task of its own and the last
      // of a unit's blocks to finish merges them; otherwise a unit's task runs all of its blocks.
      const int64_t max_blocks = static_cast<int64_t>(AttendBlockCount(static_cast<size_t>(std::min(start + T, window))));  // the last query's
      const bool split = max_blocks > 1 && units < 4 * threads;
      const size_t partial_floats = AttendPartialFloats(static_cast<size_t>(D));
      const size_t unit_floats = static_cast<size_t>(max_blocks * slice) * partial_floats;
      std::vector<float> split_partials(split ? static_cast<size_t>(units) * unit_floats : 0);
      std::vector<std::atomic<int64_t>> blocks_done(split ? static_cast<size_t>(units) : 0);
      std::vector<std::vector<float>> scratch(pool.num_threads()), partials(pool.num_threads());
      const int64_t tasks_per_unit = split ? max_blocks : 1;
      pool.Run(static_cast<size_t>(units * tasks_per_unit), [&](size_t task, int thread) {
        const int64_t unit = static_cast<int64_t>(task) / tasks_per_unit;
        const int64_t block = static_cast<int64_t>(task) % tasks_per_unit;
        const int64_t t = unit / (Nkv * slices);
        const int64_t kvh = unit / slices % Nkv;
        const int64_t hd = kvh * group + unit % slices * slice;  // first query head
        const int64_t pos = start + t;
        // Sliding layers see the `window` positions ending at the query itself (HF:
        // kv_idx > q_idx - sliding_window); full layers see every earlier position.
        const int64_t first = std::max<int64_t>(0, pos - window + 1);
        const size_t n = static_cast<size_t>(pos - first + 1);
        const size_t blocks = AttendBlockCount(n);
        const float* qv = &q[(t * Nq + hd) * D];
        float* o = out + (t * Nq + hd) * D;
        const Elem* const* ks = &krows[first - lo];
        const Elem* const* vs = &vrows[first - lo];
        std::vector<float>& scores = scratch[thread];
        scores.resize(static_cast<size_t>(slice) * std::min(n, kAttendBlock));
        if (!split || blocks == 1) {
          if (split && block > 0) return;  // this query has one block, computed by the unit's first task
          std::vector<float>& own = partials[thread];
          own.resize(blocks > 1 ? blocks * static_cast<size_t>(slice) * partial_floats : 0);
          AttendBlocked(kt, qv, D, slice, D, ks, vs, kvh * head_stride, n, scale, &w.sinks[hd], scores.data(), own.data(), o, D);
          return;
        }
        if (static_cast<size_t>(block) >= blocks) return;  // an earlier query of the batch sees fewer blocks
        float* unit_partials = &split_partials[static_cast<size_t>(unit) * unit_floats];
        AttendOneBlock(kt, qv, D, slice, D, ks, vs, kvh * head_stride, n, static_cast<size_t>(block), scale, scores.data(),
                       unit_partials + static_cast<size_t>(block * slice) * partial_floats);
        // acq_rel: the last block to finish sees every other block's partial before merging.
        if (blocks_done[unit].fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<int64_t>(blocks)) {
          MergeHeadPartials(unit_partials, slice, blocks, D, &w.sinks[hd], o, D);
        }
      });
    }  // the query-by-query path
    if (!in_place) {
      // The newest `capacity` positions into the ring (older ones would be overwritten by later
      // ones in this batch anyway).
      const int64_t cache_stride = static_cast<int64_t>(cache.HeadStride(layer));
      for (int64_t pos = std::max<int64_t>(start, end - capacity); pos < end; ++pos) {
        for (int64_t h = 0; h < Nkv; ++h) {
          std::memcpy(cache.KeySlot(layer, pos) + h * cache_stride, &kwin[h * head_stride + (pos - lo) * head_elems], head_bytes);
          if (!shared_values) {
            std::memcpy(cache.ValueSlot(layer, pos) + h * cache_stride, &vwin[h * head_stride + (pos - lo) * head_elems],
                        head_bytes);
          }
        }
      }
    }
  };
  switch (cache.type()) {
    case KvType::kBF16: run(uint16_t{}); break;
    case KvType::kF32: run(float{}); break;
    case KvType::kInt8: run(int8_t{}); break;
  }
}

}  // namespace tessera
