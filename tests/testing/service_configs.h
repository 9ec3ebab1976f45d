// ServiceConfigs: an Adapter that only holds services' configuration (no
// call is made through it), for the engine parts that read a service's
// limits (ServiceGates) without a downstream.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "adapters/adapter.h"

namespace sagad::testing {

class ServiceConfigs : public Adapter {
 public:
  std::map<std::string, ServiceConfig> services;
  CallResult Call(const CallRequest&) override { return {}; }
  QueryResult Query(const std::string&, const std::string&, const std::string&, uint64_t, int,
                    const TraceContext&) override {
    return {};
  }
  const ServiceConfig* Service(const std::string& name) const override {
    auto it = services.find(name);
    return it == services.end() ? nullptr : &it->second;
  }
  std::vector<std::string> ServiceNames() const override {
    std::vector<std::string> out;
    for (const auto& [n, s] : services) out.push_back(n);
    return out;
  }
};

}  // namespace sagad::testing
