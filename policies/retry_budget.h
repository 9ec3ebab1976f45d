// RetryBudget: a token bucket per downstream service, so that an outage does
// not turn into a retry storm. First attempts are free; every re-send takes a
// token; an empty bucket defers the retry. A deferred retry reserves its
// token (the bucket goes into debt), so N retries deferred at once are due one
// refill apart, not all at the next token. Time is passed in (no clock here).
// Thread-safety: none; the engine guards each bucket.
#pragma once

#include <cstdint>

namespace sagad {

struct RetryBudgetConfig {
  double capacity = 50;    // tokens when full
  double per_second = 10;  // refill rate
};

class RetryBudget {
 public:
  explicit RetryBudget(RetryBudgetConfig config = {}, int64_t now_ms = 0);
  // Takes one token if there is one.
  bool TryTake(int64_t now_ms);
  // Milliseconds until a token will be available (0 if one is).
  int64_t WaitMillis(int64_t now_ms);
  // Takes a token now or, if there is none, the next one not yet promised:
  // the milliseconds until it is due (0: now). The caller then goes at that
  // time without taking another.
  int64_t Reserve(int64_t now_ms);
  double tokens(int64_t now_ms);

 private:
  void Refill(int64_t now_ms);
  RetryBudgetConfig config_;
  double tokens_;
  int64_t last_ms_;
};

}  // namespace sagad
