// Random draws that give the same numbers from the same seed on every
// machine: the standard fixes std::mt19937_64's output, and the draws below
// use nothing it leaves to the library (std::uniform_real_distribution and
// std::exponential_distribution may differ between standard libraries).
// The benchmark's job arrivals and the simulator's request traces are drawn
// with it, so that a scenario's seed names one trace anywhere.
// Thread-compatible.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace msched {

class SeededDraws {
 public:
  explicit SeededDraws(uint64_t seed) : rng_(seed) {}

  // Uniform in [0, 1): the generator's top 53 bits.
  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  // The gap to the next event of a Poisson process at `per_s` events per
  // second, in seconds (an exponential draw, by inversion).
  double ExponentialGapS(double per_s) { return -std::log1p(-Uniform()) / per_s; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace msched
