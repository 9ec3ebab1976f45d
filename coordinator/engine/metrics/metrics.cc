#include "coordinator/engine/metrics/metrics.h"

#include <sstream>

namespace sagad {

void Metrics::Inc(const std::string& name, const std::string& labels, double v) {
  MutexLock l(mu_);
  counters_[name][labels] += v;
}

Metrics::Histogram& Metrics::HistogramLocked(const std::string& name, const std::string& labels) {
  Histogram& h = histograms_[name][labels];
  if (h.bounds.empty()) {
    h.bounds = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
    h.counts.assign(h.bounds.size() + 1, 0);
  }
  return h;
}

void Metrics::Observe(const std::string& name, double seconds, const std::string& labels) {
  MutexLock l(mu_);
  Histogram& h = HistogramLocked(name, labels);
  size_t i = 0;
  while (i < h.bounds.size() && seconds > h.bounds[i]) ++i;
  ++h.counts[i];
  ++h.count;
  h.sum += seconds;
}

void Metrics::Describe(const std::string& name, const std::string& type, const std::string& help,
                       bool labelled) {
  MutexLock l(mu_);
  help_[name] = {type, help};
  // Exported from the first scrape on, observed or not.
  if (type == "histogram" && labelled)
    histograms_[name];
  else if (type == "histogram")
    HistogramLocked(name, "");
  else
    counters_[name];
}

double Metrics::Get(const std::string& name, const std::string& labels) const {
  MutexLock l(mu_);
  auto it = counters_.find(name);
  if (it == counters_.end()) return 0;
  auto v = it->second.find(labels);
  return v == it->second.end() ? 0 : v->second;
}

std::string Metrics::Render(const std::string& extra) const {
  MutexLock l(mu_);
  std::ostringstream out;
  auto header = [&](const std::string& name, const char* fallback_type) REQUIRES(mu_) {
    auto h = help_.find(name);
    out << "# HELP " << name << " " << (h == help_.end() ? name : h->second.second) << "\n";
    out << "# TYPE " << name << " " << (h == help_.end() ? fallback_type : h->second.first.c_str())
        << "\n";
  };
  for (const auto& [name, series] : counters_) {
    header(name, "counter");
    for (const auto& [labels, v] : series)
      out << name << (labels.empty() ? "" : "{" + labels + "}") << " " << v << "\n";
  }
  for (const auto& [name, series] : histograms_) {
    header(name, "histogram");
    for (const auto& [labels, h] : series) {
      const std::string with = labels.empty() ? "" : labels + ",";
      const std::string only = labels.empty() ? "" : "{" + labels + "}";
      uint64_t cum = 0;
      for (size_t i = 0; i < h.bounds.size(); ++i) {
        cum += h.counts[i];
        out << name << "_bucket{" << with << "le=\"" << h.bounds[i] << "\"} " << cum << "\n";
      }
      out << name << "_bucket{" << with << "le=\"+Inf\"} " << h.count << "\n";
      out << name << "_sum" << only << " " << h.sum << "\n"
          << name << "_count" << only << " " << h.count << "\n";
    }
  }
  out << extra;
  return out.str();
}

}  // namespace sagad
