// A stdio MCP server as a McpSession (mcp_session.h): one thread per server
// owns the child (spawn, initialize, restart with backoff), its pipes and
// every request in flight; Request only hands a request to that thread.
// Messages are one JSON text a line, both ways (the MCP stdio transport).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <map>
#include <thread>

#include "adapters/mcp_session.h"
#include "util/log.h"
#include "util/mutex.h"
#include "util/thread_role.h"

extern char** environ;

namespace sagad {
namespace {

using Steady = std::chrono::steady_clock;
constexpr int64_t kInitializeId = 0;

struct Outgoing {
  int64_t id = 0;
  std::string line;  // the request as written, newline included
  McpSession::Done done;
  Steady::time_point deadline;
  bool written = false;  // a byte of it reached the pipe: it may be acted on
};

// A line to write to the child.
struct Line {
  int64_t id;        // its request's (awaited while in sent_), or -1: a notification or answer
  std::string text;  // the message, newline included
};

// The program to run: a name with a '/' as it is, else searched in PATH
// (before the fork: nothing that allocates runs between fork and exec).
std::string Resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string full = (dir.empty() ? "." : dir) + "/" + program;
    if (access(full.c_str(), X_OK) == 0) return full;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return program;
}

class StdioSession : public McpSession {
 public:
  explicit StdioSession(McpServerConfig config) : config_(std::move(config)) {
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    thread_ = std::thread([this] { Loop(); });
  }

  ~StdioSession() override {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    Wake();
    thread_.join();
    for (int fd : wake_)
      if (fd >= 0) close(fd);
  }

  void Request(const std::string& method, nlohmann::json params, Done done) override {
    Outgoing o;
    o.done = std::move(done);
    o.deadline = Steady::now() + std::chrono::milliseconds(config_.service.timeout_ms);
    {
      MutexLock l(mu_);
      o.id = next_id_++;
      o.line =
          nlohmann::json{{"jsonrpc", "2.0"}, {"id", o.id}, {"method", method}, {"params", params}}
              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
          "\n";
      incoming_.push_back(std::move(o));
    }
    Wake();
  }

 private:
  void Wake() {
    char b = 1;
    if (wake_[1] >= 0) (void)!write(wake_[1], &b, 1);
  }

  void Loop() {
    NameThread(("sagad-mcp-" + config_.service.name).c_str());
    sigset_t pipe_sig;
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_sig, nullptr);  // a dead child's pipe: EPIPE
    while (true) {
      {
        MutexLock l(mu_);
        if (stop_) break;
        while (!incoming_.empty()) {
          queued_.push_back(std::move(incoming_.front()));
          incoming_.pop_front();
        }
      }
      const Steady::time_point now = Steady::now();
      if (child_ < 0 && now >= next_start_) Spawn(now);
      if (ready_) Flush();
      WriteOut();
      Expire(now);
      Poll();
    }
    Stop();
  }

  void Spawn(Steady::time_point now) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return Backoff(now, "pipe failed");
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]);
      close(in[1]);
      return Backoff(now, "pipe failed");
    }
    const std::string program = Resolve(config_.command[0]);
    std::vector<std::string> env;  // sagad's, each variable the config sets replaced
    for (char** e = environ; *e; ++e) {
      const std::string var(*e);
      const std::string name = var.substr(0, var.find('='));
      bool replaced = false;
      for (const auto& kv : config_.env) replaced = replaced || kv.first == name;
      if (!replaced) env.push_back(var);
    }
    for (const auto& [k, v] : config_.env) env.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (const auto& a : config_.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // sagad killed: the server goes too
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      dup2(in[0], 0);
      dup2(out[1], 1);
      close_range(3, ~0U, 0);  // none of sagad's sockets, store files or pipes
      execve(program.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
      close(in[1]);
      close(out[0]);
      return Backoff(now, "fork failed");
    }
    child_ = pid;
    in_ = in[1];
    out_ = out[0];
    fcntl(in_, F_SETFL, O_NONBLOCK);
    fcntl(out_, F_SETFL, O_NONBLOCK);
    EngineLog(LogLevel::kInfo,
              {{"msg", "mcp server started"}, {"server", config_.service.name}, {"pid", pid}});
    Outgoing init;
    init.id = kInitializeId;
    init.line = nlohmann::json{{"jsonrpc", "2.0"},
                               {"id", kInitializeId},
                               {"method", "initialize"},
                               {"params", McpInitializeParams()}}
                    .dump() +
                "\n";
    init.deadline = now + std::chrono::milliseconds(config_.service.timeout_ms);
    outq_.push_back({kInitializeId, init.line});
    sent_[kInitializeId] = std::move(init);
  }

  void Backoff(Steady::time_point now, const std::string& why) {
    EngineLog(LogLevel::kWarn, {{"msg", "mcp server down"},
                                {"server", config_.service.name},
                                {"error", why},
                                {"restart_in_ms", backoff_ms_}});
    next_start_ = now + std::chrono::milliseconds(backoff_ms_);
    backoff_ms_ = std::min<int64_t>(backoff_ms_ * 2, 5000);
  }

  // Requests waiting for the server, in order, into the pipe's line.
  void Flush() {
    while (!queued_.empty()) {
      Outgoing o = std::move(queued_.front());
      queued_.pop_front();
      outq_.push_back({o.id, o.line});
      sent_[o.id] = std::move(o);
    }
  }

  // Every line to the child goes through here, whole and in order: a line
  // begun is finished (its request was reported sent), one that expired
  // before its first byte is dropped.
  void WriteOut() {
    while (in_ >= 0 && !outq_.empty()) {
      const Line& line = outq_.front();
      auto it = line.id < 0 ? sent_.end() : sent_.find(line.id);
      if (line.id >= 0 && it == sent_.end() && out_off_ == 0) {  // expired in line
        outq_.pop_front();
        continue;
      }
      const std::string& text = line.text;
      ssize_t n = write(in_, text.data() + out_off_, text.size() - out_off_);
      if (n <= 0) return;  // full (POLLOUT later) or broken (EOF on out_ follows)
      if (it != sent_.end()) it->second.written = true;
      out_off_ += static_cast<size_t>(n);
      if (out_off_ < text.size()) return;
      out_off_ = 0;
      outq_.pop_front();
    }
  }

  // A notification or an answer to the server, after what is in line.
  void Say(const nlohmann::json& message) {
    outq_.push_back({-1, message.dump() + "\n"});
    WriteOut();
  }

  void Finish(Outgoing& o, McpReply r) {
    if (o.id == kInitializeId) return;
    auto done = std::move(o.done);
    done(std::move(r));
  }

  // Past their deadline: unsent ones never left; sent ones are in doubt
  // (and the server is told to drop them, which it may or may not do).
  void Expire(Steady::time_point now) {
    for (auto it = queued_.begin(); it != queued_.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      McpReply r;
      r.error = "MCP server '" + config_.service.name + "' not ready within timeout_ms";
      Outgoing o = std::move(*it);
      it = queued_.erase(it);
      Finish(o, std::move(r));
    }
    for (auto it = sent_.begin(); it != sent_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      Outgoing o = std::move(it->second);
      it = sent_.erase(it);
      if (o.id == kInitializeId) {
        Exited("no answer to initialize within timeout_ms");
        return;
      }
      McpReply r;
      r.sent = o.written;
      r.error = o.written ? "no reply within timeout_ms" : "not written within timeout_ms";
      if (o.written && in_ >= 0)
        Say({{"jsonrpc", "2.0"},
             {"method", "notifications/cancelled"},
             {"params", {{"requestId", o.id}}}});
      Finish(o, std::move(r));
    }
  }

  void Poll() {
    pollfd fds[3];
    nfds_t n = 0;
    fds[n++] = {wake_[0], POLLIN, 0};
    int out_at = -1;
    if (out_ >= 0) {
      out_at = static_cast<int>(n);
      fds[n++] = {out_, POLLIN, 0};
    }
    if (in_ >= 0 && !outq_.empty()) fds[n++] = {in_, POLLOUT, 0};
    if (::poll(fds, n, NextTimeoutMs()) < 0) return;
    if (fds[0].revents) {
      char buf[64];
      while (read(wake_[0], buf, sizeof buf) > 0) {
      }
    }
    if (out_at >= 0 && fds[out_at].revents) ReadIn();
  }

  int NextTimeoutMs() const {
    Steady::time_point next = Steady::now() + std::chrono::seconds(1);
    if (child_ < 0) next = std::min(next, next_start_);
    for (const auto& o : queued_) next = std::min(next, o.deadline);
    for (const auto& [id, o] : sent_) next = std::min(next, o.deadline);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Steady::now()).count();
    return static_cast<int>(std::max<int64_t>(0, ms + 1));
  }

  void ReadIn() {
    char buf[65536];
    while (out_ >= 0) {
      ssize_t n = read(out_, buf, sizeof buf);
      if (n == 0) return Exited("the server closed its output (exited)");
      if (n < 0) return;  // EAGAIN: all read
      inbuf_.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = inbuf_.find('\n')) != std::string::npos) {
        std::string line = inbuf_.substr(0, nl);
        inbuf_.erase(0, nl + 1);
        Handle(line);
        if (out_ < 0) return;
      }
      if (inbuf_.size() > (size_t(64) << 20)) return Exited("a line over 64 MiB");
    }
  }

  void Handle(const std::string& line) {
    nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
    if (!m.is_object()) return;  // a log line on stdout: not a message
    if (m.contains("method")) {
      if (!m.contains("id")) return;  // a notification
      // A request from the server (ping, roots, sampling): sagad offers none
      // but ping.
      nlohmann::json answer = {{"jsonrpc", "2.0"}, {"id", m["id"]}};
      if (m["method"] == "ping")
        answer["result"] = nlohmann::json::object();
      else
        answer["error"] = {{"code", -32601}, {"message", "sagad offers no client features"}};
      return Say(answer);
    }
    if (!m.contains("id") || !m["id"].is_number_integer()) return;
    auto it = sent_.find(m["id"].get<int64_t>());
    if (it == sent_.end()) return;  // expired meanwhile
    Outgoing o = std::move(it->second);
    sent_.erase(it);
    McpReply r;
    r.sent = true;
    r.replied = true;
    if (m.contains("error") && m["error"].is_object()) {
      r.error_code = m["error"].value("code", 0);
      r.error = m["error"].value("message", std::string("error"));
    } else {
      r.result = m.value("result", nlohmann::json::object());
    }
    if (o.id == kInitializeId) return Initialized(r);
    Finish(o, std::move(r));
  }

  void Initialized(const McpReply& r) {
    if (!r.error.empty()) return Exited("initialize refused: " + r.error);
    Say({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    ready_ = true;
    backoff_ms_ = 100;
    EngineLog(LogLevel::kInfo, {{"msg", "mcp server ready"}, {"server", config_.service.name}});
  }

  // The child is gone or useless: what it was sent is in doubt, what it
  // was not goes to the next child.
  void Exited(const std::string& why) {
    EndChild();
    std::deque<Outgoing> unsent;
    for (auto& [id, o] : sent_) {
      if (o.id == kInitializeId) continue;
      if (!o.written) {
        unsent.push_back(std::move(o));
        continue;
      }
      McpReply r;
      r.sent = true;
      r.error = "MCP server '" + config_.service.name + "': " + why;
      Finish(o, std::move(r));
    }
    sent_.clear();
    outq_.clear();
    out_off_ = 0;
    for (auto it = unsent.rbegin(); it != unsent.rend(); ++it) queued_.push_front(std::move(*it));
    Backoff(Steady::now(), why);
  }

  void EndChild() {
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    in_ = out_ = -1;
    inbuf_.clear();
    ready_ = false;
    if (child_ > 0) {
      kill(child_, SIGTERM);
      for (int i = 0; i < 200; ++i) {  // 2 s, then SIGKILL
        if (waitpid(child_, nullptr, WNOHANG) == child_) {
          child_ = -1;
          return;
        }
        usleep(10000);
      }
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    child_ = -1;
  }

  void Stop() {
    EndChild();  // callbacks are dropped: the engine ended its calls first
  }

  const McpServerConfig config_;
  int wake_[2] = {-1, -1};
  Mutex mu_;
  std::deque<Outgoing> incoming_ GUARDED_BY(mu_);
  int64_t next_id_ GUARDED_BY(mu_) = 1;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
  // The loop thread's alone:
  pid_t child_ = -1;
  int in_ = -1, out_ = -1;
  bool ready_ = false;
  Steady::time_point next_start_;
  int64_t backoff_ms_ = 100;
  std::deque<Outgoing> queued_;       // waiting for the server: never written
  std::map<int64_t, Outgoing> sent_;  // handed to the pipe's line (written or not yet)
  std::deque<Line> outq_;             // still to write, in order
  size_t out_off_ = 0;                // bytes of outq_.front() already written
  std::string inbuf_;
};

}  // namespace

std::unique_ptr<McpSession> NewStdioMcpSession(const McpServerConfig& config) {
  return std::make_unique<StdioSession>(config);
}

}  // namespace sagad
