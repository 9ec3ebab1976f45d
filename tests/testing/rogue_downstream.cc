#include "tests/testing/rogue_downstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "tests/testing/subprocess.h"

namespace sagad::testing {

RawReply RawAnswer(int status, const std::string& body, const std::string& content_type) {
  return {"HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + content_type +
              "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
          false};
}

RogueDownstream::RogueDownstream(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ListenOnLoopback(&port_);
  acceptor_ = std::thread([this] {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      fds_.push_back(fd);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  });
}

RogueDownstream::~RogueDownstream() {
  stop_ = true;
  acceptor_.join();
  {
    std::lock_guard<std::mutex> l(mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : workers_) t.join();
  for (int fd : fds_) close(fd);
  close(listen_fd_);
}

void RogueDownstream::Serve(int fd) {
  std::string buf;
  char chunk[65536];
  while (!stop_) {
    size_t end = buf.find("\r\n\r\n");
    if (end == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      ssize_t n = read(fd, chunk, sizeof chunk);
      if (n <= 0) return;
      buf.append(chunk, n);
      continue;
    }
    RawRequest req;
    req.head = buf.substr(0, end);
    size_t sp1 = req.head.find(' '), sp2 = req.head.find(' ', sp1 + 1);
    req.method = req.head.substr(0, sp1);
    req.path = req.head.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t length = 0;
    size_t cl = req.head.find("Content-Length: ");
    if (cl != std::string::npos) length = std::stoul(req.head.substr(cl + 16));
    while (buf.size() < end + 4 + length) {
      ssize_t n = read(fd, chunk, sizeof chunk);
      if (n <= 0) return;
      buf.append(chunk, n);
    }
    req.body = buf.substr(end + 4, length);
    buf.erase(0, end + 4 + length);
    RawReply reply = handler_(req);
    {
      std::lock_guard<std::mutex> l(mu_);
      requests_.push_back(req);
    }
    size_t off = 0;
    while (off < reply.bytes.size()) {
      ssize_t n = write(fd, reply.bytes.data() + off, reply.bytes.size() - off);
      if (n <= 0) return;
      off += n;
    }
    if (reply.close) {
      shutdown(fd, SHUT_RDWR);
      return;
    }
  }
}

std::vector<RawRequest> RogueDownstream::Requests() {
  std::lock_guard<std::mutex> l(mu_);
  return requests_;
}

int RogueDownstream::Count(const std::string& prefix) {
  std::lock_guard<std::mutex> l(mu_);
  int n = 0;
  for (const auto& r : requests_) n += r.path.rfind(prefix, 0) == 0;
  return n;
}

std::string RawExchange(int port, const std::string& bytes, int timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return out;
  }
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0) break;
    off += n;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char chunk[65536];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    out.append(chunk, n);
  }
  close(fd);
  return out;
}

}  // namespace sagad::testing
