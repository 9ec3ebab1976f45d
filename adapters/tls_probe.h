// TlsHandshakeAlert: opens a fresh TLS connection to a service, as its
// calls do (the same CA, verification and client certificate), completes
// the handshake, sends nothing, and waits briefly for what the server says
// first. Returns the alert it sent (RFC 8446 6: 42 bad_certificate, 48
// unknown_ca, 116 certificate_required, ...), or 0 when it sent none (it
// accepted the handshake, or the connection failed before any alert).
//
// Why: with TLS 1.3 a server judges the client certificate after the
// client's Finished, so a client has already written its request when the
// refusal arrives, and the server's close may reset the connection before
// the alert is read. A call that failed that way on a connection it opened
// itself is re-judged with this probe: a server that refuses the handshake
// never read the request.
// Thread-safety: may be called from any thread.
#pragma once

#include <boost/system/error_code.hpp>
#include <string>

#include "adapters/adapter.h"

namespace sagad {

// `origin` is "https://host:port"; waits at most `timeout_ms` in all.
int TlsHandshakeAlert(const ServiceConfig& config, const std::string& origin, int timeout_ms);

// The last TLS alert a peer sent, from this thread's OpenSSL error queue
// (which it empties); 0 if none.
int TakeTlsAlert();

// Whether `alert` is one a server sends only while refusing a handshake
// (RFC 8446 6.2: handshake_failure, bad/unsupported/revoked/expired/unknown
// certificate, unknown_ca, access_denied, protocol_version,
// insufficient_security, certificate_required): it never read a request.
bool RefusesTheHandshake(int alert);

// The alert a TLS error of a client stream carries (0 if none).
int TlsAlertOf(const boost::system::error_code& ec);
// Whether the error is the server's certificate failing verification.
bool TlsVerifyFailed(const boost::system::error_code& ec);
// "not sent: ORIGIN refused the TLS handshake (alert N: ...)".
std::string HandshakeRefusal(const std::string& origin, int alert);

}  // namespace sagad
