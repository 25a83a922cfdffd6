#include "model/quantize_int4.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "io/model_dir.h"
#include "kernels/parallel_matmul.h"
#include "model/architecture.h"
#include "model/calibration.h"
#include "model/model.h"
#include "model/tensor_specs.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

constexpr int kMaxCode = 15;
constexpr size_t kKeepRows = 512;  // recorded rows per linear input (AutoAWQ's n_sample_token)
constexpr int kRatios = 20;        // scale search grid a = i / 20
constexpr int kClipSteps = 10;     // clip search: 1 - i / 20, i < 10

// A float matrix W [rows, cols] row-major.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
  float* row(int64_t r) { return &w[r * cols]; }
  const float* row(int64_t r) const { return &w[r * cols]; }
};

Matrix ReadMatrix(const TensorView& t) {
  Matrix m;
  m.rows = t.shape()[0];
  m.cols = t.shape()[1];
  m.w.resize(static_cast<size_t>(m.rows * m.cols));
  const size_t elem = DTypeSize(t.dtype());
  GlobalPool().ParallelFor(m.w.size(), 1 << 16, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) m.w[i] = ElementToF32(t.dtype(), t.data + i * elem);
  });
  return m;
}

std::vector<float> ReadVector(const TensorView& t) {
  std::vector<float> v(t.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementToF32(t.dtype(), t.data + i * DTypeSize(t.dtype()));
  return v;
}

float RoundScale(float s, DType dtype) { return dtype == DType::kF16 ? F16ToF32(F32ToF16(s)) : Bf16ToF32(F32ToBf16(s)); }

// The quantizer of the header comment on one group of n values: codes q, zero z, scale s.
void QuantizeGroup(const float* w, size_t n, DType scale_dtype, uint8_t* q, uint8_t* z, float* s) {
  float lo = w[0], hi = w[0];
  for (size_t i = 1; i < n; ++i) lo = std::min(lo, w[i]), hi = std::max(hi, w[i]);
  const float scale = RoundScale(std::max(hi - lo, 1e-5f) / kMaxCode, scale_dtype);
  const float zero = std::clamp(-std::nearbyint(lo / scale), 0.0f, static_cast<float>(kMaxCode));
  for (size_t i = 0; i < n; ++i) {
    q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(w[i] / scale) + zero, 0.0f, static_cast<float>(kMaxCode)));
  }
  *z = static_cast<uint8_t>(zero);
  *s = scale;
}

// W fake-quantized in place: every group replaced by (q - z) s.
void FakeQuantize(std::vector<float>& w, size_t group, DType scale_dtype) {
  GlobalPool().ParallelFor(w.size() / group, 64, [&](size_t b, size_t e) {
    std::vector<uint8_t> q(group);
    for (size_t g = b; g < e; ++g) {
      uint8_t z;
      float s;
      float* v = &w[g * group];
      QuantizeGroup(v, group, scale_dtype, q.data(), &z, &s);
      for (size_t i = 0; i < group; ++i) v[i] = static_cast<float>(int{q[i]} - int{z}) * s;
    }
  });
}

// Y [n, W.rows] = X [n, W.cols] W^T (+ bias).
std::vector<float> Apply(const Matrix& W, const std::vector<float>& x, const std::vector<float>* bias = nullptr) {
  const size_t n = x.size() / static_cast<size_t>(W.cols);
  std::vector<float> y(n * static_cast<size_t>(W.rows));
  MatmulF32(x.data(), n, static_cast<size_t>(W.cols), W.w.data(), static_cast<size_t>(W.rows),
            bias && !bias->empty() ? bias->data() : nullptr, y.data());
  return y;
}

double MeanSquaredError(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0.0;
  for (size_t i = 0; i < a.size(); ++i) e += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
  return a.empty() ? 0.0 : e / static_cast<double>(a.size());
}

// ---- calibration records ---------------------------------------------------------------------

// One linear input site of one layer: mean |x| per channel over every calibration row, and up to
// kKeepRows of the rows (evenly spread) for the losses.
struct Record {
  int64_t cols = 0, seen = 0;
  std::vector<double> abs_sum;
  std::vector<float> rows;  // kept rows, row-major
  void Add(const float* x, int64_t n, int64_t c, int64_t stride) {
    if (cols == 0) {
      cols = c;
      abs_sum.assign(static_cast<size_t>(c), 0.0);
    }
    for (int64_t r = 0; r < n; ++r, ++seen) {
      for (int64_t i = 0; i < c; ++i) abs_sum[i] += std::fabs(x[r * c + i]);
      if (seen % stride == 0 && rows.size() < kKeepRows * static_cast<size_t>(c)) rows.insert(rows.end(), x + r * c, x + (r + 1) * c);
    }
  }
  std::vector<float> Mean() const {
    std::vector<float> m(abs_sum.size());
    for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(abs_sum[i] / static_cast<double>(std::max<int64_t>(seen, 1)));
    return m;
  }
};

// x / s per column, in place.
void DivideColumns(std::vector<float>& x, const std::vector<float>& s) {
  const size_t c = s.size();
  for (size_t i = 0; i < x.size(); ++i) x[i] /= s[i % c];
}

// ---- AWQ steps -------------------------------------------------------------------------------

struct Searcher {
  size_t group;
  DType scale_dtype;

  // w_mean per input channel over the modules' rows: |w| / the max |w| of its group.
  std::vector<float> WeightMean(const std::vector<const Matrix*>& modules) const {
    const int64_t cols = modules.front()->cols;
    std::vector<double> sum(static_cast<size_t>(cols), 0.0);
    int64_t rows = 0;
    for (const Matrix* m : modules) {
      for (int64_t r = 0; r < m->rows; ++r, ++rows) {
        const float* w = m->row(r);
        for (int64_t g = 0; g < cols / static_cast<int64_t>(group); ++g) {
          float amax = 0.0f;
          for (size_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(w[g * group + i]));
          for (size_t i = 0; i < group; ++i) sum[g * group + i] += std::fabs(w[g * group + i]) / (amax + 1e-6f);
        }
      }
    }
    std::vector<float> mean(sum.size());
    for (size_t i = 0; i < mean.size(); ++i) mean[i] = static_cast<float>(sum[i] / static_cast<double>(rows));
    return mean;
  }

  // The scales of ratio a (before the loss): x_mean^a / (w_mean^(1-a) + 1e-4), >= 1e-4, over
  // sqrt(max min).
  static std::vector<float> Scales(const std::vector<float>& x_mean, const std::vector<float>& w_mean, double a) {
    std::vector<float> s(x_mean.size());
    float lo = 1e30f, hi = 0.0f;
    for (size_t i = 0; i < s.size(); ++i) {
      const double v = std::pow(std::max<double>(x_mean[i], 0.0), a) / (std::pow(w_mean[i], 1.0 - a) + 1e-4);
      s[i] = std::max(static_cast<float>(v), 1e-4f);
      lo = std::min(lo, s[i]);
      hi = std::max(hi, s[i]);
    }
    const float norm = std::sqrt(hi * lo);
    for (float& v : s) v /= norm;
    return s;
  }

  // Q(W diag(s)) diag(1/s).
  Matrix ScaledFake(const Matrix& w, const std::vector<float>& s) const {
    Matrix out = w;
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t c = 0; c < w.cols; ++c) out.w[r * w.cols + c] *= s[c];
    }
    FakeQuantize(out.w, group, scale_dtype);
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t c = 0; c < w.cols; ++c) out.w[r * w.cols + c] /= s[c];
    }
    return out;
  }

  // The best s over the ratios for `modules` reading the recorded input; judge(fake modules)
  // returns the loss of one candidate.
  std::vector<float> Search(const Record& input, const std::vector<const Matrix*>& modules,
                            const std::function<double(const std::vector<Matrix>&)>& judge) const {
    const std::vector<float> x_mean = input.Mean(), w_mean = WeightMean(modules);
    std::vector<float> best(x_mean.size(), 1.0f);
    double best_loss;
    {
      // No scaling (plain round to nearest) competes too, so the search never does worse than
      // RTN on its own loss.
      std::vector<Matrix> fake;
      for (const Matrix* m : modules) fake.push_back(ScaledFake(*m, best));
      best_loss = judge(fake);
    }
    for (int i = 0; i < kRatios; ++i) {
      const std::vector<float> s = Scales(x_mean, w_mean, static_cast<double>(i) / kRatios);
      std::vector<Matrix> fake;
      for (const Matrix* m : modules) fake.push_back(ScaledFake(*m, s));
      const double loss = judge(fake);
      if (loss < best_loss) best_loss = loss, best = s;
    }
    return best;
  }

  // Clip search on W (scaled already) against its recorded input rows x [n, cols]: per row and
  // group, the clamp of least error on the group's partial dot products; W clamped to it.
  void Clip(Matrix& w, const std::vector<float>& x) const {
    const int64_t n = static_cast<int64_t>(x.size()) / w.cols, groups = w.cols / static_cast<int64_t>(group);
    GlobalPool().ParallelFor(static_cast<size_t>(w.rows), 4, [&](size_t b, size_t e) {
      std::vector<float> cand(group);
      std::vector<uint8_t> q(group);
      std::vector<double> ref(static_cast<size_t>(n));
      for (size_t r = b; r < e; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          float* wg = w.row(static_cast<int64_t>(r)) + g * group;
          float amax = 0.0f;
          for (size_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(wg[i]));
          for (int64_t t = 0; t < n; ++t) {
            double d = 0.0;
            for (size_t i = 0; i < group; ++i) d += double{x[t * w.cols + g * group + i]} * wg[i];
            ref[t] = d;
          }
          double best_err = std::numeric_limits<double>::infinity();
          float best_max = amax;
          for (int step = 0; step < kClipSteps; ++step) {
            const float mx = amax * (1.0f - static_cast<float>(step) / kRatios);
            for (size_t i = 0; i < group; ++i) cand[i] = std::clamp(wg[i], -mx, mx);
            uint8_t z;
            float s;
            QuantizeGroup(cand.data(), group, scale_dtype, q.data(), &z, &s);
            for (size_t i = 0; i < group; ++i) cand[i] = static_cast<float>(int{q[i]} - int{z}) * s;
            double err = 0.0;
            for (int64_t t = 0; t < n; ++t) {
              double d = 0.0;
              for (size_t i = 0; i < group; ++i) d += double{x[t * w.cols + g * group + i]} * cand[i];
              err += (d - ref[t]) * (d - ref[t]);
            }
            if (err < best_err) best_err = err, best_max = mx;
          }
          for (size_t i = 0; i < group; ++i) wg[i] = std::clamp(wg[i], -best_max, best_max);
        }
      }
    });
  }
};

void ScaleColumns(Matrix& w, const std::vector<float>& s) {
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) w.w[r * w.cols + c] *= s[c];
  }
}
void DivideRows(Matrix& w, std::vector<float>* bias, const std::vector<float>& s) {
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) w.w[r * w.cols + c] /= s[r];
    if (bias && !bias->empty()) (*bias)[r] /= s[r];
  }
}

// silu(gate x) * up x, then down: the dense MLP (dense-decoders.md §1) on recorded rows.
std::vector<float> Mlp(const Matrix& gate, const Matrix& up, const Matrix& down, const std::vector<float>& x,
                       const std::vector<float>& bg, const std::vector<float>& bu, const std::vector<float>& bd) {
  std::vector<float> g = Apply(gate, x, &bg), u = Apply(up, x, &bu);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  return Apply(down, g, &bd);
}

// ---- writing ---------------------------------------------------------------------------------

// The stored tensors of one quantized module from its (scaled, clipped) float weight.
struct PackedModule {
  std::vector<int32_t> codes, zeros;
  std::vector<uint16_t> scales;  // fp16 (AutoAWQ) or bf16 (compressed-tensors)
};

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // logical column of nibble i

PackedModule Pack(const Matrix& w, size_t group, Int4Layout layout) {
  const int64_t out = w.rows, in = w.cols, groups = in / static_cast<int64_t>(group);
  const bool awq = layout == Int4Layout::kAutoAwqGemm;
  const DType scale_dtype = awq ? DType::kF16 : DType::kBF16;
  std::vector<uint8_t> q(static_cast<size_t>(out * in)), z(static_cast<size_t>(out * groups));
  std::vector<float> s(static_cast<size_t>(out * groups));
  GlobalPool().ParallelFor(static_cast<size_t>(out * groups), 64, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const size_t r = i / groups, g = i % groups;
      QuantizeGroup(w.row(static_cast<int64_t>(r)) + g * group, group, scale_dtype, &q[r * in + g * group], &z[i], &s[i]);
    }
  });
  PackedModule p;
  p.scales.resize(s.size());
  if (awq) {
    // qweight [in, out/8], qzeros [groups, out/8]: nibble i of word c holds column 8c + kAwqOrder[i];
    // scales [groups, out].
    p.codes.assign(static_cast<size_t>(in * out / 8), 0);
    p.zeros.assign(static_cast<size_t>(groups * out / 8), 0);
    for (int64_t c = 0; c < in; ++c) {
      for (int64_t word = 0; word < out / 8; ++word) {
        uint32_t v = 0;
        for (int i = 0; i < 8; ++i) v |= uint32_t{q[(8 * word + kAwqOrder[i]) * in + c]} << (4 * i);
        p.codes[c * (out / 8) + word] = static_cast<int32_t>(v);
      }
    }
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t word = 0; word < out / 8; ++word) {
        uint32_t v = 0;
        for (int i = 0; i < 8; ++i) v |= uint32_t{z[(8 * word + kAwqOrder[i]) * groups + g]} << (4 * i);
        p.zeros[g * (out / 8) + word] = static_cast<int32_t>(v);
      }
      for (int64_t j = 0; j < out; ++j) p.scales[g * out + j] = F32ToF16(s[j * groups + g]);
    }
    return p;
  }
  // weight_packed [out, in/8] natural order (q + 8 = our unsigned code), weight_zero_point
  // [ceil(out/8), groups] packed along out (z + 8 likewise), weight_scale [out, groups].
  p.codes.assign(static_cast<size_t>(out * in / 8), 0);
  for (int64_t j = 0; j < out; ++j) {
    for (int64_t word = 0; word < in / 8; ++word) {
      uint32_t v = 0;
      for (int i = 0; i < 8; ++i) v |= uint32_t{q[j * in + 8 * word + i]} << (4 * i);
      p.codes[j * (in / 8) + word] = static_cast<int32_t>(v);
    }
  }
  p.zeros.assign(static_cast<size_t>((out + 7) / 8 * groups), 0);
  for (int64_t j = 0; j < out; ++j) {
    for (int64_t g = 0; g < groups; ++g) {
      uint32_t& v = reinterpret_cast<uint32_t&>(p.zeros[(j / 8) * groups + g]);
      v |= uint32_t{z[j * groups + g]} << (4 * (j % 8));
      p.scales[j * groups + g] = F32ToBf16(s[j * groups + g]);
    }
  }
  return p;
}

template <typename T>
TensorFiller Bytes(std::shared_ptr<std::vector<T>> data) {
  return [data](uint8_t* dst, size_t n) {
    TESSERA_CHECK(n == data->size() * sizeof(T));
    std::memcpy(dst, data->data(), n);
  };
}

}  // namespace

Int4QuantizeResult QuantizeToInt4(const std::string& in_dir, const std::string& out_dir,
                                  const Int4QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const DenseFamilyInput input = OpenDenseFamilyInput(in_dir, out_dir, options.overwrite, "int4 quantization");
  const std::string& dir = input.dir;
  const std::string& config_path = input.config_path;
  const ModelConfig& config = input.config;
  if (options.group_size != -1 && (options.group_size <= 0 || options.group_size % 8 != 0)) {
    Fail("--group ", options.group_size, ": must be -1 or a positive multiple of 8");
  }
  const WeightStore store = WeightStore::Open(dir);
  RequireTensorsForCounts(config, store, config_path);
  RequireNoProblems(CheckTensors(ModelTensorSpecs(config, config_path), store), dir);

  Int4Scheme scheme;
  scheme.layout = options.layout;
  scheme.group_size = options.group_size;
  scheme.zero_points = true;
  scheme.targets = {"Linear"};
  scheme.ignore = {"lm_head"};
  nlohmann::json out_json = ModelConfigToJson(config);
  out_json["quantization_config"] = Int4QuantizationConfigJson(scheme);
  const ModelConfig out_config = ParseModelConfig(out_json.dump(), out_dir + "/config.json");
  // Also checks every module's shape against the group size (one line naming the tensor).
  const std::vector<TensorSpec> specs = ModelTensorSpecs(out_config, config_path);
  const Architecture& arch = ArchitectureOf(config, config_path);
  const DType scale_dtype = scheme.layout == Int4Layout::kAutoAwqGemm ? DType::kF16 : DType::kBF16;

  Int4QuantizeResult result;
  // ---- calibration (awq)
  std::map<std::pair<int, LinearInput>, Record> records;
  if (options.awq) {
    if (options.calib_file.empty()) Fail("--to awq needs calibration text (--calib FILE)");
    const CalibrationText text = LoadCalibrationText(dir, options.calib_file, options.samples, options.window);
    // Rows kept per record: every stride-th of the calibration rows, about kKeepRows of them.
    const int64_t stride = std::max<int64_t>(1, text.rows() / static_cast<int64_t>(kKeepRows));
    RunCalibration(
        dir, text,
        [&](int layer, LinearInput site, const float* x, int64_t rows, int64_t cols) {
          records[{layer, site}].Add(x, rows, cols, stride);
        },
        options.progress);
    result.calibration_tokens = text.rows();
  }

  // ---- per layer: search, fold, clip, quantize
  std::map<std::string, std::shared_ptr<PackedModule>> packed;   // module -> its int4 tensors
  std::map<std::string, std::shared_ptr<std::vector<float>>> floats;  // changed norms and biases
  auto view = [&](const std::string& name) { return store.Get(name); };
  auto bias_of = [&](const std::string& module) {
    const auto t = store.Find(module + ".bias");
    return t ? ReadVector(*t) : std::vector<float>();
  };
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const auto layer_start = std::chrono::steady_clock::now();
    const std::string p = StrCat("model.layers.", l, ".");
    const LayerPlan plan = PlanLayer(arch, config, l);
    std::vector<std::string> modules;
    for (const TensorSpec& s : specs) {
      if (s.layer == l && s.kind == TensorKind::kInt4Codes) modules.push_back(s.name.substr(0, s.name.rfind('.')));
    }
    std::map<std::string, Matrix> w;
    for (const std::string& m : modules) w[m] = ReadMatrix(view(m + ".weight"));
    const int li = static_cast<int>(l);
    const bool awq = options.awq && !plan.moe && records.count({li, LinearInput::kQkv});
    if (awq) {
      Searcher search{static_cast<size_t>(scheme.GroupFor(config.hidden_size)), scale_dtype};
      const std::string q = p + "self_attn.q_proj", k = p + "self_attn.k_proj", v = p + "self_attn.v_proj",
                        o = p + "self_attn.o_proj", gate = p + "mlp.gate_proj", up = p + "mlp.up_proj",
                        down = p + "mlp.down_proj";
      Record& r_qkv = records[{li, LinearInput::kQkv}];
      Record& r_o = records[{li, LinearInput::kO}];
      Record& r_mlp = records[{li, LinearInput::kGateUp}];
      Record& r_down = records[{li, LinearInput::kDown}];
      auto norm = std::make_shared<std::vector<float>>(ReadVector(view(p + "input_layernorm.weight")));
      auto post = std::make_shared<std::vector<float>>(ReadVector(view(p + "post_attention_layernorm.weight")));
      std::vector<float> bv = bias_of(v), bg = bias_of(gate), bu = bias_of(up), bd = bias_of(down);
      // 1. input_layernorm -> q, k, v (judged on their outputs).
      {
        const std::vector<float> ref_q = Apply(w[q], r_qkv.rows), ref_k = Apply(w[k], r_qkv.rows),
                                 ref_v = Apply(w[v], r_qkv.rows);
        const std::vector<float> s = search.Search(r_qkv, {&w[q], &w[k], &w[v]}, [&](const std::vector<Matrix>& f) {
          return MeanSquaredError(Apply(f[0], r_qkv.rows), ref_q) + MeanSquaredError(Apply(f[1], r_qkv.rows), ref_k) +
                 MeanSquaredError(Apply(f[2], r_qkv.rows), ref_v);
        });
        for (size_t i = 0; i < s.size(); ++i) (*norm)[i] /= s[i];
        for (const std::string& m : {q, k, v}) ScaleColumns(w[m], s);
        DivideColumns(r_qkv.rows, s);
      }
      // 2. v_proj -> o_proj when their shapes match (no GQA).
      if (w[v].rows == w[o].cols) {
        const std::vector<float> ref = Apply(w[o], r_o.rows);
        const std::vector<float> s = search.Search(r_o, {&w[o]}, [&](const std::vector<Matrix>& f) {
          return MeanSquaredError(Apply(f[0], r_o.rows), ref);
        });
        DivideRows(w[v], &bv, s);
        ScaleColumns(w[o], s);
        DivideColumns(r_o.rows, s);
      }
      // 3. post_attention_layernorm -> gate, up (judged on the MLP's output).
      {
        const std::vector<float> ref = Mlp(w[gate], w[up], w[down], r_mlp.rows, bg, bu, bd);
        const std::vector<float> s = search.Search(r_mlp, {&w[gate], &w[up]}, [&](const std::vector<Matrix>& f) {
          return MeanSquaredError(Mlp(f[0], f[1], w[down], r_mlp.rows, bg, bu, bd), ref);
        });
        for (size_t i = 0; i < s.size(); ++i) (*post)[i] /= s[i];
        ScaleColumns(w[gate], s);
        ScaleColumns(w[up], s);
        DivideColumns(r_mlp.rows, s);
      }
      // 4. up_proj -> down_proj.
      {
        Searcher down_search{static_cast<size_t>(scheme.GroupFor(w[down].cols)), scale_dtype};
        const std::vector<float> ref = Apply(w[down], r_down.rows);
        const std::vector<float> s = down_search.Search(r_down, {&w[down]}, [&](const std::vector<Matrix>& f) {
          return MeanSquaredError(Apply(f[0], r_down.rows), ref);
        });
        DivideRows(w[up], &bu, s);
        ScaleColumns(w[down], s);
        DivideColumns(r_down.rows, s);
        // Clip: every module but q and k.
        down_search.Clip(w[down], r_down.rows);
      }
      search.Clip(w[v], r_qkv.rows);
      Searcher{static_cast<size_t>(scheme.GroupFor(w[o].cols)), scale_dtype}.Clip(w[o], r_o.rows);
      search.Clip(w[gate], r_mlp.rows);
      search.Clip(w[up], r_mlp.rows);
      floats[p + "input_layernorm.weight"] = norm;
      floats[p + "post_attention_layernorm.weight"] = post;
      if (!bv.empty()) floats[v + ".bias"] = std::make_shared<std::vector<float>>(bv);
      if (!bu.empty()) floats[up + ".bias"] = std::make_shared<std::vector<float>>(bu);
    }
    for (const std::string& m : modules) {
      packed[m] = std::make_shared<PackedModule>(Pack(w[m], static_cast<size_t>(scheme.GroupFor(w[m].cols)), scheme.layout));
    }
    result.quantized_modules += modules.size();
    if (options.progress) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double per_layer = std::chrono::duration<double>(std::chrono::steady_clock::now() - layer_start).count();
      options.progress(StrCat("quantize: layer ", l + 1, " / ", config.num_hidden_layers, ", ",
                              static_cast<int64_t>(elapsed), " s elapsed, about ",
                              static_cast<int64_t>(per_layer * static_cast<double>(config.num_hidden_layers - l - 1) + 0.5),
                              " s left"));
    }
  }

  // ---- the output tensors
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& spec : specs) {
    TensorToWrite t{spec.name, spec.dtype, spec.shape, nullptr};
    const std::string module = spec.name.substr(0, spec.name.rfind('.'));
    switch (spec.kind) {
      case TensorKind::kInt4Codes:
        t.fill = [m = packed.at(module)](uint8_t* dst, size_t n) { std::memcpy(dst, m->codes.data(), n); };
        break;
      case TensorKind::kInt4Zeros:
        t.fill = [m = packed.at(module)](uint8_t* dst, size_t n) { std::memcpy(dst, m->zeros.data(), n); };
        break;
      case TensorKind::kInt4Scales:
        t.fill = [m = packed.at(module)](uint8_t* dst, size_t n) { std::memcpy(dst, m->scales.data(), n); };
        break;
      case TensorKind::kInt4Shape: {
        auto shape = std::make_shared<std::vector<int64_t>>(spec.module_shape);
        t.fill = Bytes(shape);
        break;
      }
      default:
        if (const auto it = floats.find(spec.name); it != floats.end()) {
          t.dtype = DType::kF32;  // folded: written exactly
          t.fill = Bytes(it->second);
        } else {
          const TensorView v = view(spec.name);
          t.dtype = v.dtype();
          t.shape = v.shape();
          t.fill = [v](uint8_t* dst, size_t n) { std::memcpy(dst, v.data, n); };
        }
    }
    tensors.push_back(std::move(t));
  }
  result.num_tensors = tensors.size();
  ConvertedModel written =
      WriteConvertedModel(dir, out_dir, std::move(tensors), out_json, options.overwrite, options.max_shard_bytes, nullptr);
  result.weight_files = std::move(written.weight_files);
  result.output_bytes = written.output_bytes;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessera
