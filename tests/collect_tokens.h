// The tokens a BatchEngine request produces, collected until it is done (the engine tests).
#pragma once

#include <chrono>
#include <vector>

#include "server/batch_engine.h"

namespace tessera {

inline std::vector<int32_t> CollectTokens(RequestHandle& handle) {
  std::vector<int32_t> tokens;
  std::vector<TokenEvent> events;
  while (!handle.done() || handle.Wait(events, std::chrono::milliseconds(0))) {
    handle.Wait(events, std::chrono::milliseconds(20));
    for (const TokenEvent& e : events) tokens.push_back(e.token);
    events.clear();
  }
  return tokens;
}

}  // namespace tessera
