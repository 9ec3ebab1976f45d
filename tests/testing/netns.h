// A network namespace of the test's own, joined to the host by a veth pair
// (host 10.A.B.1, namespace 10.A.B.2, a /30 per namespace): a server started
// inside it (Prefix()) is reached from the host over a real link, and Cut()
// drops every packet on that link, both ways, with no reset and no ICMP
// answer: a host that vanished (power lost, a partition), as the kernel of
// its peers sees it (TCP retransmits into the void, ARP fails). Restore()
// brings the link back. Needs root and iproute2 (`ip netns`), as CI has;
// Available() says whether this machine can.
#pragma once

#include <string>

namespace sagad::testing {

class NetNs {
 public:
  // True when namespaces can be made here (root, `ip` present).
  static bool Available();
  // Creates the namespace and its link; aborts the test binary if it cannot.
  NetNs();
  ~NetNs();
  NetNs(const NetNs&) = delete;
  NetNs& operator=(const NetNs&) = delete;

  // The namespace's address on the link, and the host's.
  const std::string& inner() const { return inner_; }
  const std::string& outer() const { return outer_; }
  const std::string& name() const { return name_; }
  // What runs a command inside the namespace: "ip netns exec NAME ".
  std::string Prefix() const { return "ip netns exec " + name_ + " "; }
  // Every packet on the link is dropped from now on (both ends stay up for
  // the processes: no socket is told anything).
  void Cut();
  void Restore();

 private:
  std::string name_, host_if_, inner_if_, inner_, outer_;
};

}  // namespace sagad::testing
