// Calibration for the converters that look at activations (AWQ in model/quantize_int4.h, Wanda
// in model/sparsify.h): a text file tokenized with the model's tokenizer runs through the
// engine's own exact forward in windows, with an observer on every linear module's input.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"

namespace tessera {

struct CalibrationText {
  std::vector<int32_t> tokens;
  int64_t window = 0;
  int64_t windows = 0;  // min(samples, tokens / window)
  int64_t rows() const { return windows * window; }
};
// Tokenizes `calib_file` with the tokenizer of `dir`. One-line errors for a missing file or text
// shorter than one window.
CalibrationText LoadCalibrationText(const std::string& dir, const std::string& calib_file, int64_t samples,
                                    int64_t window);

// Runs the windows, each from an empty cache, through the checkpoint in `dir` loaded with
// `observer`; progress("calibration: window i / n") after each.
void RunCalibration(const std::string& dir, const CalibrationText& text, LinearInputObserver observer,
                    const std::function<void(const std::string&)>& progress);

}  // namespace tessera
