#include "adapters/tls_probe.h"

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ssl/error.hpp>
#include <chrono>
#include <memory>

namespace sagad {
namespace {

// A TCP connection to host:port within `timeout_ms`; -1 if none.
int ConnectWithin(const std::string& host, const std::string& port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return -1;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0 && errno != EINPROGRESS) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return -1;
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
      err != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int TakeTlsAlert() {
  int alert = 0;
  while (unsigned long e = ERR_get_error()) {
    int reason = ERR_GET_REASON(e);
    if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
      alert = reason - SSL_AD_REASON_OFFSET;
  }
  return alert;
}

bool RefusesTheHandshake(int alert) {
  switch (alert) {
    case 40:
    case 42:
    case 43:
    case 44:
    case 45:
    case 46:
    case 48:
    case 49:
    case 70:
    case 71:
    case 116:
      return true;
    default:
      return false;
  }
}

int TlsHandshakeAlert(const ServiceConfig& config, const std::string& origin, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    return static_cast<int>(ms > 0 ? ms : 0);
  };
  size_t start = origin.find("://");
  if (origin.rfind("https://", 0) != 0) return 0;
  std::string hostport = origin.substr(start + 3), host = hostport, port = "443";
  if (size_t colon = hostport.rfind(':');
      colon != std::string::npos && hostport.find(']', colon) == std::string::npos) {
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
  }
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);

  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  if (!ctx) return 0;
  if (!config.ca_file.empty())
    SSL_CTX_load_verify_locations(ctx.get(), config.ca_file.c_str(), nullptr);
  else
    SSL_CTX_set_default_verify_paths(ctx.get());
  SSL_CTX_set_verify(ctx.get(), config.tls_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  if (!config.client_cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx.get(), config.client_cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx.get(), config.client_key_file.c_str(), SSL_FILETYPE_PEM) !=
           1))
    return 0;
  int fd = ConnectWithin(host, port, left());
  if (fd < 0) return 0;
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  SSL_set_tlsext_host_name(ssl.get(), host.c_str());
  ERR_clear_error();
  int alert = 0;
  // The handshake, then a read that only an alert (or a session ticket,
  // which is not one) can answer: nothing is ever written.
  for (bool handshaken = false;;) {
    char byte;
    int rc = handshaken ? SSL_read(ssl.get(), &byte, 1) : SSL_connect(ssl.get());
    if (rc == 1 && !handshaken) {
      handshaken = true;
      continue;
    }
    if (rc > 0) break;  // data unasked for: not a refusal
    int err = SSL_get_error(ssl.get(), rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      alert = TakeTlsAlert();
      break;
    }
    pollfd p{fd, static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    int wait = handshaken ? std::min(left(), 1000) : left();
    if (wait <= 0 || poll(&p, 1, wait) != 1) break;  // quiet: accepted
  }
  ERR_clear_error();
  close(fd);
  return alert;
}

int TlsAlertOf(const boost::system::error_code& ec) {
  if (ec.category() != boost::asio::error::get_ssl_category()) return 0;
  int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
    return reason - SSL_AD_REASON_OFFSET;
  return 0;
}

bool TlsVerifyFailed(const boost::system::error_code& ec) {
  return ec.category() == boost::asio::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_CERTIFICATE_VERIFY_FAILED;
}

std::string HandshakeRefusal(const std::string& origin, int alert) {
  return "not sent: " + origin + " refused the TLS handshake (alert " + std::to_string(alert) +
         ": " + SSL_alert_desc_string_long(alert) + "; is the client certificate right?)";
}

}  // namespace sagad
