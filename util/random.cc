#include "util/random.h"

namespace sagad {

SystemRandom::SystemRandom() {
  std::random_device rd;
  gen_.seed((static_cast<uint64_t>(rd()) << 32) ^ rd());
}

uint64_t SystemRandom::Next() {
  MutexLock l(mu_);
  return gen_();
}

SystemRandom& SystemRandom::Shared() {
  static SystemRandom* shared = new SystemRandom();  // never destroyed: used at exit
  return *shared;
}

namespace {
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
}  // namespace

uint64_t SplitMixOf(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SeededRandom::Next() { return SplitMixOf(state_ += kGolden); }

uint64_t AtomicRandom::Next() { return SplitMixOf(state_.fetch_add(kGolden) + kGolden); }

}  // namespace sagad
