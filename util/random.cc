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

uint64_t SeededRandom::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace sagad
