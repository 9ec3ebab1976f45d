// A Streamable HTTP MCP server as a McpSession (mcp_session.h): each
// request a POST of one JSON-RPC message to the server's URL, answered with
// JSON or an event stream that carries the response; the session the server
// mints at initialize (Mcp-Session-Id) sent with every later request, and
// opened again when the server forgets it (404). The exchanges run on the
// adapter's AsyncHttpClient, which gives the rule for "not sent".
#include <deque>

#include "adapters/http_client.h"
#include "adapters/mcp_session.h"
#include "util/json_limits.h"
#include "util/log.h"
#include "util/mutex.h"

namespace sagad {
namespace {

// The JSON-RPC response with `id` in a reply body: a JSON message (or a
// batch), or the data of a text/event-stream's events.
nlohmann::json FindResponse(const std::string& body, bool event_stream, int64_t id) {
  auto match = [id](const nlohmann::json& m) {
    return m.is_object() && m.contains("id") && m["id"] == id &&
           (m.contains("result") || m.contains("error"));
  };
  auto scan = [&](const std::string& text) -> nlohmann::json {
    if (!JsonDepthWithin(text)) return nullptr;
    nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
    if (match(m)) return m;
    if (m.is_array())
      for (const auto& e : m)
        if (match(e)) return e;
    return nullptr;
  };
  if (!event_stream) return scan(body);
  std::string data;
  size_t start = 0;
  while (start <= body.size()) {
    size_t nl = body.find('\n', start);
    std::string line = body.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {  // the end of an event
      if (!data.empty()) {
        nlohmann::json m = scan(data);
        if (!m.is_null()) return m;
      }
      data.clear();
    } else if (line.rfind("data:", 0) == 0) {
      std::string d = line.substr(5);
      if (!d.empty() && d[0] == ' ') d.erase(0, 1);
      data += (data.empty() ? "" : "\n") + d;
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return data.empty() ? nlohmann::json() : scan(data);
}

std::string Header(const HttpExchangeResult& r, const std::string& name) {
  for (const auto& [k, v] : r.reply_headers)
    if (k == name) return v;
  return "";
}

class HttpSession : public McpSession {
 public:
  HttpSession(McpServerConfig config, AsyncHttpClient& client)
      : config_(std::move(config)), client_(client), target_(client.Prefix(config_.service.name)) {
    if (target_.empty()) target_ = "/";
  }

  void Request(const std::string& method, nlohmann::json params, Done done) override {
    Waiting w{method, std::move(params), std::move(done)};
    bool queued = false, open = false;
    {
      MutexLock l(mu_);
      if (!opened_) {
        waiting_.push_back(std::move(w));
        queued = true;
        open = !opening_;
        opening_ = true;
      }
    }
    if (open) Open();
    if (!queued) Send(std::move(w));
  }

 private:
  struct Waiting {
    std::string method;
    nlohmann::json params;
    Done done;
  };

  HttpExchangeRequest Post(const nlohmann::json& message) {
    HttpExchangeRequest x;
    x.service = config_.service.name;
    x.method = "POST";
    x.target = target_;
    x.headers = {{"Content-Type", "application/json"},
                 {"Accept", "application/json, text/event-stream"}};
    for (const auto& [k, v] : config_.service.headers) x.headers.emplace_back(k, v);
    {
      MutexLock l(mu_);
      if (!session_.empty()) x.headers.emplace_back("Mcp-Session-Id", session_);
      if (!version_.empty()) x.headers.emplace_back("MCP-Protocol-Version", version_);
    }
    x.body = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    x.reply_headers = {"Content-Type", "Mcp-Session-Id"};
    return x;
  }

  void Open() {
    nlohmann::json init = {
        {"jsonrpc", "2.0"}, {"id", 0}, {"method", "initialize"}, {"params", McpInitializeParams()}};
    client_.Send(Post(init), [this](HttpExchangeResult r) {
      McpReply reply = ToReply(r, 0);
      std::deque<Waiting> waiting;
      {
        MutexLock l(mu_);
        opening_ = false;
        if (reply.replied && reply.error.empty()) {
          opened_ = true;
          session_ = Header(r, "Mcp-Session-Id");
          version_ = reply.result.value("protocolVersion", std::string(kMcpClientVersion));
        }
        waiting.swap(waiting_);
      }
      if (!reply.replied || !reply.error.empty()) {
        EngineLog(LogLevel::kWarn, {{"msg", "mcp server unreachable"},
                                    {"server", config_.service.name},
                                    {"error", reply.error}});
        for (auto& w : waiting) {
          McpReply none;  // never sent: the session could not be opened
          none.error =
              "MCP server '" + config_.service.name + "' did not open a session: " + reply.error;
          w.done(std::move(none));
        }
        return;
      }
      client_.Send(Post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}),
                   [](HttpExchangeResult) {});
      for (auto& w : waiting) Send(std::move(w));
    });
  }

  void Send(Waiting w) {
    int64_t id;
    {
      MutexLock l(mu_);
      id = next_id_++;
    }
    nlohmann::json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", w.method}, {"params", w.params}};
    client_.Send(Post(m), [this, id, done = std::move(w.done)](HttpExchangeResult r) {
      McpReply reply = ToReply(r, id);
      if (r.replied && r.status == 404) {
        MutexLock l(mu_);
        opened_ = false;  // the server forgot the session: the next request opens one
        session_.clear();
      }
      done(std::move(reply));
    });
  }

  McpReply ToReply(const HttpExchangeResult& r, int64_t id) {
    McpReply out;
    if (!r.replied) {
      out.sent = r.sent && !r.withheld;
      out.error = r.error;
      return out;
    }
    const bool stream = Header(r, "Content-Type").find("text/event-stream") != std::string::npos;
    nlohmann::json m = FindResponse(r.body, stream, id);
    if (m.is_object()) {
      out.sent = out.replied = true;
      if (m.contains("error") && m["error"].is_object()) {
        out.error_code = m["error"].value("code", 0);
        out.error = m["error"].value("message", std::string("error"));
      } else {
        out.result = m.value("result", nlohmann::json::object());
      }
      return out;
    }
    // No response in the reply: 404 (an unknown session) and 429 were never
    // acted on; another 4xx is a refusal; anything else is in doubt.
    const int s = r.status;
    out.sent = !(s == 404 || s == 429);
    out.error = "HTTP " + std::to_string(s) + " without a JSON-RPC response";
    if (s >= 400 && s < 500 && s != 404 && s != 408 && s != 409 && s != 429) {
      out.replied = true;
      out.error_code = -32600;
    }
    return out;
  }

  const McpServerConfig config_;
  AsyncHttpClient& client_;
  std::string target_;
  Mutex mu_;
  bool opened_ GUARDED_BY(mu_) = false;
  bool opening_ GUARDED_BY(mu_) = false;
  std::string session_ GUARDED_BY(mu_);
  std::string version_ GUARDED_BY(mu_);
  std::deque<Waiting> waiting_ GUARDED_BY(mu_);
  int64_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace

std::unique_ptr<McpSession> NewHttpMcpSession(const McpServerConfig& config,
                                              AsyncHttpClient& client) {
  return std::make_unique<HttpSession>(config, client);
}

}  // namespace sagad
