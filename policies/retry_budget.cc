#include "policies/retry_budget.h"

#include <algorithm>
#include <cmath>

namespace sagad {

RetryBudget::RetryBudget(RetryBudgetConfig config, int64_t now_ms)
    : config_(config), tokens_(config.capacity), last_ms_(now_ms) {}

void RetryBudget::Refill(int64_t now_ms) {
  if (now_ms > last_ms_) {
    tokens_ =
        std::min(config_.capacity, tokens_ + (now_ms - last_ms_) * config_.per_second / 1000.0);
    last_ms_ = now_ms;
  }
}

bool RetryBudget::TryTake(int64_t now_ms) {
  Refill(now_ms);
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

int64_t RetryBudget::WaitMillis(int64_t now_ms) {
  Refill(now_ms);
  if (tokens_ >= 1.0) return 0;
  if (config_.per_second <= 0) return INT64_MAX / 4;
  return static_cast<int64_t>(std::ceil((1.0 - tokens_) * 1000.0 / config_.per_second));
}

int64_t RetryBudget::Reserve(int64_t now_ms) {
  Refill(now_ms);
  if (config_.per_second <= 0 && tokens_ < 1.0) return INT64_MAX / 4;
  tokens_ -= 1.0;
  if (tokens_ >= 0) return 0;
  return static_cast<int64_t>(std::ceil(-tokens_ * 1000.0 / config_.per_second));
}

double RetryBudget::tokens(int64_t now_ms) {
  Refill(now_ms);
  return tokens_;
}

}  // namespace sagad
