#include "model/calibration.h"

#include <algorithm>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

CalibrationText LoadCalibrationText(const std::string& dir, const std::string& calib_file, int64_t samples,
                                    int64_t window) {
  CalibrationText text;
  text.tokens = Tokenizer::FromModelDir(dir).Encode(ReadFile(calib_file));
  text.window = window;
  text.windows = std::min<int64_t>(samples, static_cast<int64_t>(text.tokens.size()) / window);
  if (text.windows < 1) {
    Fail(calib_file, ": ", text.tokens.size(), " tokens, fewer than one calibration window of ", window);
  }
  return text;
}

void RunCalibration(const std::string& dir, const CalibrationText& text, LinearInputObserver observer,
                    const std::function<void(const std::string&)>& progress) {
  ModelOptions options;
  options.observe_linear_inputs = std::move(observer);
  const auto model = Model::Load(dir, options);
  for (int64_t w = 0; w < text.windows; ++w) {
    KvCache cache(model->cache_config(), text.window, KvType::kF32);
    std::vector<float> logits;
    model->Forward(std::span<const int32_t>(text.tokens)
                       .subspan(static_cast<size_t>(w * text.window), static_cast<size_t>(text.window)),
                   0, cache, LogitsMode::kLast, logits);
    if (progress) progress(StrCat("calibration: window ", w + 1, " / ", text.windows));
  }
}

}  // namespace tessera
