// NonFencingService: a downstream that neither deduplicates nor fences (it
// keeps no highest Saga-Fencing-Token and does not refuse an attempt a
// question superseded): every POST of `path` is a new effect, made after
// `work_ms`; GET /operations/{key} answers 200 once that key took effect,
// else 404. What the lease rule alone must protect: a request sent after
// its lease is gone is counted twice here.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "tests/testing/rogue_downstream.h"

namespace sagad::testing {

class NonFencingService {
 public:
  NonFencingService(std::string path, int work_ms);
  std::string url() const { return server_.url(); }
  // Effects by idempotency key.
  std::map<std::string, int> Effects();
  // "" when exactly `keys` keys took effect, each once; else what differs
  // ("K: 2 times; ...").
  std::string NotOnce(size_t keys);

 private:
  RawReply Answer(const RawRequest& r);
  const std::string path_;
  const int work_ms_;
  std::mutex mu_;
  std::map<std::string, int> effects_;
  RogueDownstream server_;  // last: its threads call Answer
};

}  // namespace sagad::testing
