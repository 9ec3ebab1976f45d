#include "tests/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "tests/testing/subprocess.h"

namespace sagad::testing {
namespace {

int ConnectTo(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

TcpProxy::TcpProxy(int target_port) : target_(target_port) {
  listen_fd_ = ListenOnLoopback(&port_);
  acceptor_ = std::thread([this] {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int in = accept(listen_fd_, nullptr, nullptr);
      if (in < 0) continue;
      int out = cut_ ? -1 : ConnectTo(target_);
      if (out < 0) {
        close(in);
        continue;
      }
      std::lock_guard<std::mutex> l(mu_);
      fds_.push_back(in);
      fds_.push_back(out);
      pumps_.emplace_back([this, in, out] { Pump(in, out); });
    }
  });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  Cut();
  acceptor_.join();
  for (auto& t : pumps_) t.join();
  for (int fd : fds_) close(fd);
  close(listen_fd_);
}

void TcpProxy::Pump(int a, int b) {
  char buf[65536];
  while (!stop_ && !cut_) {
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    if (frozen_) {  // bytes stay in the sockets' buffers until Thaw
      poll(nullptr, 0, 20);
      continue;
    }
    if (poll(p, 2, 50) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n <= 0) {
        shutdown(a, SHUT_RDWR);
        shutdown(b, SHUT_RDWR);
        return;
      }
      int to = i == 0 ? b : a;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, n - off);
        if (w <= 0) return;
        off += w;
      }
    }
  }
  shutdown(a, SHUT_RDWR);
  shutdown(b, SHUT_RDWR);
}

void TcpProxy::Cut() {
  cut_ = true;
  std::lock_guard<std::mutex> l(mu_);
  for (int fd : fds_) shutdown(fd, SHUT_RDWR);
}

void TcpProxy::Restore() { cut_ = false; }

}  // namespace sagad::testing
