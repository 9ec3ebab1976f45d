#include "tests/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

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

bool WriteAll(int fd, const char* buf, ssize_t n) {
  for (ssize_t off = 0; off < n;) {
    ssize_t w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
    if (w <= 0) return false;
    off += w;
  }
  return true;
}

// Reads the server's answer until it ends with ReadyForQuery ('Z', length
// 5, a status byte): the transaction is over. False on end of stream.
bool AwaitReadyForQuery(int server) {
  std::string got;
  char buf[65536];
  while (true) {
    pollfd p{server, POLLIN, 0};
    if (poll(&p, 1, 30000) <= 0) return false;
    ssize_t n = read(server, buf, sizeof buf);
    if (n <= 0) return false;
    got.append(buf, n);
    if (got.size() >= 6 && got[got.size() - 6] == 'Z' &&
        got.compare(got.size() - 5, 4, std::string("\0\0\0\5", 4)) == 0)
      return true;
  }
}

}  // namespace

void TcpProxy::DropOn(const std::string& marker, bool deliver) {
  std::lock_guard<std::mutex> l(drop_mu_);
  marker_ = marker;
  deliver_ = deliver;
}

void TcpProxy::FreezeOn(const std::string& marker) {
  std::lock_guard<std::mutex> l(drop_mu_);
  freeze_marker_ = marker;
}

bool TcpProxy::FromClient(int a, int b, const char* buf, ssize_t n) {
  bool drop = false, deliver = false, freeze = false;
  {
    std::lock_guard<std::mutex> l(drop_mu_);
    if (!freeze_marker_.empty() && std::string(buf, n).find(freeze_marker_) != std::string::npos) {
      freeze = true;
      freeze_marker_.clear();
    }
    if (!marker_.empty() && std::string(buf, n).find(marker_) != std::string::npos) {
      drop = true;
      deliver = deliver_;
      marker_.clear();
    }
  }
  if (freeze) {  // delivered, then nothing more moves either way
    const bool ok = WriteAll(b, buf, n);
    frozen_ = true;
    return ok;
  }
  if (!drop) return WriteAll(b, buf, n);
  if (deliver && WriteAll(b, buf, n)) AwaitReadyForQuery(b);
  ++dropped_;
  shutdown(a, SHUT_RDWR);
  shutdown(b, SHUT_RDWR);
  return false;
}

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
      if (i == 0 && !FromClient(a, b, buf, n)) return;
      if (i == 1 && !WriteAll(a, buf, n)) return;
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
