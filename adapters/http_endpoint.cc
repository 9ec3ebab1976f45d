#include "adapters/http_endpoint.h"

#include <boost/asio/ssl.hpp>
#include <exception>

namespace sagad {

HttpEndpoint HttpEndpoint::Parse(const std::string& url) {
  HttpEndpoint e;
  size_t scheme = url.find("://");
  e.tls = url.rfind("https://", 0) == 0;
  size_t host_at = scheme == std::string::npos ? 0 : scheme + 3;
  size_t path = url.find('/', host_at);
  std::string authority = url.substr(host_at, path == std::string::npos ? path : path - host_at);
  e.origin = url.substr(0, path);
  if (path != std::string::npos) e.prefix = url.substr(path);
  while (!e.prefix.empty() && e.prefix.back() == '/') e.prefix.pop_back();
  size_t colon = authority.rfind(':');
  bool bracketed = !authority.empty() && authority.front() == '[';
  if (colon != std::string::npos && (!bracketed || authority[colon - 1] == ']')) {
    e.host = authority.substr(0, colon);
    e.port = authority.substr(colon + 1);
  } else {
    e.host = authority;
    e.port = e.tls ? "443" : "80";
  }
  if (bracketed && e.host.size() >= 2) e.host = e.host.substr(1, e.host.size() - 2);
  if (!e.port.empty() && e.port.size() <= 5 &&
      e.port.find_first_not_of("0123456789") == std::string::npos) {
    int n = std::stoi(e.port);
    if (n <= 65535) e.port_number = n;
  }
  return e;
}

std::unique_ptr<boost::asio::ssl::context> MakeClientTlsContext(const ServiceConfig& config,
                                                                std::string* error) {
  namespace ssl = boost::asio::ssl;
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  try {
    if (config.tls_verify) ctx->set_verify_mode(ssl::verify_peer);
    if (!config.ca_file.empty())
      ctx->load_verify_file(config.ca_file);
    else
      ctx->set_default_verify_paths();
    if (!config.client_cert_file.empty()) {
      ctx->use_certificate_chain_file(config.client_cert_file);
      ctx->use_private_key_file(config.client_key_file, ssl::context::pem);
    }
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return ctx;
}

}  // namespace sagad
