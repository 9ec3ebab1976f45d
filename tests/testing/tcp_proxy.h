// TcpProxy: forwards loopback TCP connections to a target port, and can cut
// them (every open connection closed, new ones closed at once) and restore
// them: a network partition between one process and a server it uses. Or
// freeze them: bytes are held (connections stay open) until Thaw, as a
// frozen link or a paused server looks to the other side.
#pragma once

#include <atomic>
#include <mutex>
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

 private:
  void Pump(int a, int b);
  int target_;
  int listen_fd_ = -1;
  int port_ = -1;
  std::atomic<bool> stop_{false}, cut_{false}, frozen_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

}  // namespace sagad::testing
