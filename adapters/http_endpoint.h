// HttpEndpoint: where a service's base URL points (scheme, host, port, path
// prefix), and the client TLS context its HTTPS connections use. Pure
// parsing and set-up, no I/O; used by AsyncHttpClient when a service is added.
#pragma once

#include <memory>
#include <string>

#include "adapters/adapter.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace sagad {

struct HttpEndpoint {
  bool tls = false;      // https://
  std::string host;      // without the brackets of an IPv6 literal
  std::string port;      // as written, else 443 or 80
  int port_number = -1;  // the port as a number (0-65535), -1 if it is not one
  std::string origin;    // scheme://authority, for messages
  std::string prefix;    // "" or "/prefix", without a trailing slash

  static HttpEndpoint Parse(const std::string& base_url);
};

// The TLS client context of a service: its CA bundle (else the system's),
// peer verification unless tls_verify is false, its client certificate for
// mutual TLS. A file that cannot be loaded leaves `*error` set (the service's
// calls then fail as not sent, naming it).
std::unique_ptr<boost::asio::ssl::context> MakeClientTlsContext(const ServiceConfig& config,
                                                                std::string* error);

}  // namespace sagad
