// RogueDownstream: a downstream that answers whatever bytes a test tells it
// to (bad UTF-8, garbage status lines, cut-off bodies, huge replies), on a
// real loopback socket. It is a stand-in for a broken service, never for
// sagad: sagad's HTTP client reads its replies as it would any service's.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sagad::testing {

struct RawRequest {
  std::string method;
  std::string path;
  std::string head;  // request line and headers
  std::string body;
};

struct RawReply {
  std::string bytes;   // written as is
  bool close = false;  // close the connection after writing
};

// Builds "HTTP/1.1 <status> X\r\nContent-Type: ...\r\nContent-Length: n\r\n\r\n<body>".
RawReply RawAnswer(int status, const std::string& body,
                   const std::string& content_type = "application/json");

class RogueDownstream {
 public:
  using Handler = std::function<RawReply(const RawRequest&)>;
  explicit RogueDownstream(Handler handler);
  ~RogueDownstream();
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Every request received so far.
  std::vector<RawRequest> Requests();
  // How many requests went to paths starting with `prefix`.
  int Count(const std::string& prefix);

 private:
  void Serve(int fd);
  Handler handler_;
  int listen_fd_ = -1;
  int port_ = -1;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<RawRequest> requests_;
  std::vector<std::thread> workers_;
  std::vector<int> fds_;
};

// Sends `bytes` on a new loopback connection to `port` and returns all that
// comes back until the peer closes, or `timeout_ms` passes.
std::string RawExchange(int port, const std::string& bytes, int timeout_ms = 5000);

}  // namespace sagad::testing
