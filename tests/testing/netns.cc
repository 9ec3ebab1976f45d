#include "tests/testing/netns.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace sagad::testing {
namespace {

// Runs `cmd` quietly; whether it succeeded.
bool Quiet(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

void Must(const std::string& cmd) {
  if (!Quiet(cmd)) {
    std::cerr << "netns: failed: " << cmd << "\n";
    std::abort();
  }
}

// The hardware address of interface `dev` (in the namespace `prefix` runs in).
std::string Mac(const std::string& prefix, const std::string& dev) {
  FILE* f = popen((prefix + "cat /sys/class/net/" + dev + "/address").c_str(), "r");
  char buf[64] = {0};
  if (!f || !fgets(buf, sizeof buf, f)) {
    std::cerr << "netns: no address for " << dev << "\n";
    std::abort();
  }
  pclose(f);
  std::string mac(buf);
  while (!mac.empty() && (mac.back() == '\n' || mac.back() == ' ')) mac.pop_back();
  return mac;
}

}  // namespace

bool NetNs::Available() {
  // Tried once for real (a namespace and a veth pair made and removed): a
  // container may have `ip` and root and still refuse either.
  static const bool available = [] {
    if (getuid() != 0) return false;
    const std::string tag = std::to_string(static_cast<int>(getpid()) % 100000);
    const std::string ns = "sagad-probe-" + tag, dev = "sgp" + tag;
    const bool ok = Quiet("ip netns add " + ns) &&
                    Quiet("ip link add " + dev + " type veth peer name " + dev + "n") &&
                    Quiet("ip link set " + dev + "n netns " + ns);
    Quiet("ip link del " + dev);
    Quiet("ip netns del " + ns);
    return ok;
  }();
  return available;
}

NetNs::NetNs() {
  static std::atomic<int> made{0};
  const int n = made++;
  const int pid = static_cast<int>(getpid());
  const std::string tag = std::to_string(pid % 100000) + "x" + std::to_string(n % 100);
  name_ = "sagad-" + tag;
  host_if_ = "sgh" + tag;  // at most 15 characters
  inner_if_ = "sgn" + tag;
  // A /30 of its own: processes and namespaces of one process apart.
  const int a = 200 + (n % 50), b = pid % 64, c = 4 * ((pid / 64) % 64);
  const std::string net = "10." + std::to_string(a) + "." + std::to_string(b) + ".";
  outer_ = net + std::to_string(c + 1);
  inner_ = net + std::to_string(c + 2);
  Quiet("ip netns del " + name_);  // a leftover
  Must("ip netns add " + name_);
  Must("ip link add " + host_if_ + " type veth peer name " + inner_if_);
  Must("ip link set " + inner_if_ + " netns " + name_);
  Must("ip addr add " + outer_ + "/30 dev " + host_if_);
  Must("ip link set " + host_if_ + " up");
  Must(Prefix() + "ip addr add " + inner_ + "/30 dev " + inner_if_);
  Must(Prefix() + "ip link set " + inner_if_ + " up");
  Must(Prefix() + "ip link set lo up");
  // Each end knows the other's address for good: a cut link drops packets
  // and nothing more (no ARP failure turned into "host unreachable").
  Must("ip neigh replace " + inner_ + " lladdr " + Mac(Prefix(), inner_if_) + " dev " + host_if_ +
       " nud permanent");
  Must(Prefix() + "ip neigh replace " + outer_ + " lladdr " + Mac("", host_if_) + " dev " +
       inner_if_ + " nud permanent");
}

NetNs::~NetNs() {
  Quiet("ip link del " + host_if_);
  Quiet("ip netns del " + name_);
}

void NetNs::Cut() { Must(Prefix() + "ip link set " + inner_if_ + " down"); }

void NetNs::Restore() { Must(Prefix() + "ip link set " + inner_if_ + " up"); }

}  // namespace sagad::testing
