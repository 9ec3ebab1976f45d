#include "coordinator/http/http_message.h"

#include <strings.h>

namespace sagad {

std::string HttpRequest::get_header_value(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  return "";
}

size_t HttpRequest::get_header_value_count(const std::string& name) const {
  size_t n = 0;
  for (const auto& kv : headers) n += strcasecmp(kv.first.c_str(), name.c_str()) == 0;
  return n;
}

std::string HttpRequest::get_param_value(const std::string& name) const {
  auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

void HttpResponse::set_header(const std::string& name, const std::string& value) {
  for (auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) {
      v = value;
      return;
    }
  headers.emplace_back(name, value);
}

std::function<void()> HttpResponse::Defer() {
  deferred_ = true;
  if (on_defer_) on_defer_();
  return on_complete_;
}

void Abandonment::Set(std::function<void()> f) {
  {
    MutexLock l(mu_);
    if (!fired_) {
      f_ = std::move(f);
      return;
    }
  }
  if (f) f();
}

void Abandonment::Fire() {
  std::function<void()> f;
  {
    MutexLock l(mu_);
    if (fired_) return;
    fired_ = true;
    f = std::move(f_);
  }
  if (f) f();
}

std::shared_ptr<DeferredAnswer> DeferredAnswer::Start(HttpResponse& res,
                                                      std::function<void()> on_abandon) {
  auto d = std::make_shared<DeferredAnswer>();
  d->res_ = &res;
  {
    MutexLock l(d->mu_);
    d->complete_ = res.Defer();
  }
  // Weakly: the exchange owns its abandonment, and `complete_` owns the
  // exchange's connection; a strong reference here would be a cycle that
  // keeps every deferred connection alive (found by LeakSanitizer).
  res.OnAbandon([weak = std::weak_ptr<DeferredAnswer>(d), on_abandon = std::move(on_abandon)] {
    if (auto d = weak.lock()) {
      MutexLock l(d->mu_);
      d->over_ = true;
      d->complete_ = nullptr;
    }
    if (on_abandon) on_abandon();
  });
  return d;
}

bool DeferredAnswer::Give(const std::function<void(HttpResponse&)>& fill) {
  MutexLock l(mu_);
  if (over_) return false;
  over_ = true;
  fill(*res_);
  complete_();
  complete_ = nullptr;  // what it holds (the connection) is not ours to keep
  return true;
}

std::string PercentDecode(const std::string& s, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace sagad
