// TcpProxy: forwards loopback TCP connections to a target port, and can cut
// them (every open connection closed, new ones closed at once) and restore
// them: a network partition between one process and a server it uses. Or
// freeze them: bytes are held (connections stay open) until Thaw, as a
// frozen link or a paused server looks to the other side. Or break one
// connection at the moment a request goes by (DropOn): a connection lost
// during a commit.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sagad::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  int port() const { return port_; }
  void Cut();
  void Restore();
  void Freeze() { frozen_ = true; }
  void Thaw() { frozen_ = false; }
  // Once: the first client-to-server bytes that contain `marker` end their
  // connection (both sides closed). With `deliver`, they reach the server
  // first and its reply is awaited (a PostgreSQL ReadyForQuery: the
  // transaction has ended) and dropped: the client never hears that its
  // commit happened. Without, they are dropped: the server never sees them.
  void DropOn(const std::string& marker, bool deliver);
  // Once: the first client-to-server bytes that contain `marker` reach the
  // server, then the link freezes (Freeze): the request was received, its
  // answer and everything after are held, nothing is reset. Packets
  // dropped mid-call, as a host that vanished looks.
  void FreezeOn(const std::string& marker);
  // How many connections DropOn broke.
  int dropped() const { return dropped_; }

 private:
  void Pump(int a, int b);
  int target_;
  int listen_fd_ = -1;
  int port_ = -1;
  // Handles bytes read from the client; false if the connection is dropped.
  bool FromClient(int a, int b, const char* buf, ssize_t n);
  std::atomic<bool> stop_{false}, cut_{false}, frozen_{false};
  std::mutex drop_mu_;
  std::string marker_;         // armed when not empty (drop_mu_)
  std::string freeze_marker_;  // armed when not empty (drop_mu_)
  bool deliver_ = false;
  std::atomic<int> dropped_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

}  // namespace sagad::testing
