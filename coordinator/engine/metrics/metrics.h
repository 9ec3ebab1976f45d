// Metrics: counters and histograms rendered in the Prometheus text format.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "util/mutex.h"

namespace sagad {

class Metrics {
 public:
  // Adds `v` to counter `name` with label set `labels` ("" or `k="v",...`).
  void Inc(const std::string& name, const std::string& labels = "", double v = 1);
  // Records one observation (seconds) in histogram `name`, in the series of
  // `labels` ("" or `k="v",...`).
  void Observe(const std::string& name, double seconds, const std::string& labels = "");
  // Declares HELP text and type ("counter", "gauge", "histogram"); the family
  // is rendered from then on (a histogram with zero counts, a counter family
  // with no series until one is counted).
  // A histogram family whose every series has labels (`labelled`) has no
  // unlabelled series at zero.
  void Describe(const std::string& name, const std::string& type, const std::string& help,
                bool labelled = false);
  // Current value of a counter (tests and gauges).
  double Get(const std::string& name, const std::string& labels = "") const;
  // Prometheus text exposition of everything recorded, plus `extra` lines.
  std::string Render(const std::string& extra = "") const;

 private:
  struct Histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bucket, non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  // Made on first use.
  Histogram& HistogramLocked(const std::string& name, const std::string& labels) REQUIRES(mu_);

  mutable Mutex mu_;
  // name -> (type, help)
  std::map<std::string, std::pair<std::string, std::string>> help_ GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, double>> counters_ GUARDED_BY(mu_);
  // name -> labels -> histogram
  std::map<std::string, std::map<std::string, Histogram>> histograms_ GUARDED_BY(mu_);
};

}  // namespace sagad
