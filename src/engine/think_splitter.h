// Splits a streamed reply into its <think> block (the reasoning) and the answer: Qwen3's model
// may open the block itself (dense-decoders.md §8), DeepSeek-R1's template opens it in the prompt
// so that the reply starts inside it and ends the reasoning with </think> (deepseek.md §8).
// Shared by `tessera generate` / `chat` and the server.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "engine/chat_template.h"

namespace tessera {

// Other templates' replies are all answer. Text is held back only while it could still be the start of
// the markers.
class ThinkSplitter {
 public:
  explicit ThinkSplitter(ReplyThinking thinking)
      : state_(thinking == ReplyThinking::kMayOpen ? State::kStart
               : thinking == ReplyThinking::kOpen  ? State::kThinking
                                                   : State::kAnswer) {}
  // Appends `text`; returns (analysis, answer) ready to show.
  std::pair<std::string, std::string> Add(const std::string& text) {
    pending_ += text;
    std::string analysis, answer;
    for (;;) {
      if (state_ == State::kAfterThink) {
        // The newlines after </think> may come in later pieces: dropped until the answer starts.
        const size_t start = pending_.find_first_not_of('\n');
        if (start == std::string::npos) {
          pending_.clear();
          break;
        }
        pending_.erase(0, start);
        state_ = State::kAnswer;
      }
      if (state_ == State::kAnswer) {
        answer += pending_;
        pending_.clear();
        break;
      }
      if (state_ == State::kStart) {
        const std::string_view open = "<think>";
        const size_t ws = pending_.find_first_not_of(" \n");
        if (ws == std::string::npos) break;
        const std::string_view rest = std::string_view(pending_).substr(ws);
        if (rest.size() < open.size() && open.substr(0, rest.size()) == rest) break;  // maybe the opener
        if (rest.substr(0, open.size()) == open) {
          pending_ = std::string(rest.substr(open.size()));
          state_ = State::kThinking;
        } else {
          state_ = State::kAnswer;
        }
        continue;
      }
      const std::string_view close = "</think>";
      const size_t end = pending_.find(close);
      if (end == std::string::npos) {
        // Keep what could be the start of "</think>".
        size_t keep = 0;
        for (size_t n = std::min(pending_.size(), close.size() - 1); n > 0; --n) {
          if (std::string_view(pending_).substr(pending_.size() - n) == close.substr(0, n)) {
            keep = n;
            break;
          }
        }
        analysis += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        break;
      }
      analysis += pending_.substr(0, end);
      pending_.erase(0, end + close.size());
      state_ = State::kAfterThink;
    }
    return {analysis, answer};
  }
  std::pair<std::string, std::string> Finish() {
    std::pair<std::string, std::string> out;
    (state_ == State::kThinking ? out.first : out.second) = pending_;
    pending_.clear();
    return out;
  }

 private:
  enum class State { kStart, kThinking, kAfterThink, kAnswer };
  State state_;
  std::string pending_;
};

}  // namespace tessera
