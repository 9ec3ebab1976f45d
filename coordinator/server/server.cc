#include "coordinator/server/server.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <thread>

#include "adapters/http_adapter.h"
#include "adapters/mcp_adapter.h"
#include "coordinator/engine/engine.h"
#include "coordinator/http/http_api.h"
#include "coordinator/server/definitions_dir.h"
#include "coordinator/server/stop_deadline.h"
#include "coordinator/server/stop_signals.h"
#include "coordinator/server/store_watchdog.h"
#include "coordinator/server/webhooks.h"
#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "util/crash_point.h"
#include "util/json_limits.h"
#include "util/log.h"
#include "util/mutex.h"

namespace sagad {

const char* const kSagadUsage =
    "usage: sagad [--config FILE] [--data-dir DIR] [--store postgresql://...] "
    "[--listen HOST:PORT] [--service NAME=URL]... [--definitions DIR] [--examples]\n"
    "             [--log-level debug|info|warn|error]\n"
    "       sagad check [--config FILE] [--definitions DIR] [--examples]";

StatusOr<Config> ConfigFromArgs(int argc, char** argv) {
  std::string config_path, data_dir, listen, definitions_dir, store, log_level;
  std::vector<std::string> services;
  bool examples = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      Config help;
      help.help = true;
      return help;
    }
    if (a == "--config" && value(&v))
      config_path = v;
    else if (a == "--data-dir" && value(&v))
      data_dir = v;
    else if (a == "--store" && value(&v))
      store = v;
    else if (a == "--listen" && value(&v))
      listen = v;
    else if (a == "--definitions" && value(&v))
      definitions_dir = v;
    else if (a == "--service" && value(&v))
      services.push_back(v);
    else if (a == "--examples")
      examples = true;
    else if (a == "--log-level" && value(&v))
      log_level = v;
    else
      return InvalidArgument("unknown or incomplete argument '" + a + "'\n" + kSagadUsage);
  }
  Config config;
  if (!config_path.empty()) {
    auto c = LoadConfigFile(config_path);
    if (!c.ok()) return c.status();
    config = *c;
  }
  if (!data_dir.empty()) config.data_dir = data_dir;
  if (!store.empty()) config.store = store;
  if (!config.store.empty() && !IsPostgresUri(config.store))
    return InvalidArgument(
        "store must be a postgresql:// URI (or absent for LMDB in data_dir), got '" +
        RedactUri(config.store) + "'");
  if (!definitions_dir.empty()) config.definitions_dir = definitions_dir;
  if (examples) config.examples = true;
  if (!log_level.empty()) {
    LogLevel level;
    if (!ParseLogLevel(log_level, &level))
      return InvalidArgument("--log-level must be one of debug, info, warn, error, got '" +
                             log_level + "'");
    config.log_level = log_level;
  }
  if (!listen.empty())
    SAGAD_RETURN_IF_ERROR(ParseListen(listen, &config.listen_host, &config.listen_port));
  for (const auto& s : services) SAGAD_RETURN_IF_ERROR(ApplyServiceOverride(s, &config));
  if (config.tokens.empty() && !IsLoopback(config.listen_host))
    return InvalidArgument(
        "no tokens are configured, so sagad only listens on loopback; refusing " +
        config.listen_host);
  return config;
}

int ReportUsageError(const Status& s) {
  std::cerr << "sagad: " << s.message() << "\n";
  return 2;
}

StatusOr<StorePtr> OpenStore(const Config& config) {
  if (IsPostgresUri(config.store)) {
    // A database that is restarting or failing over is waited for (30 s):
    // coordinators and their database often start together.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (true) {
      auto pg = PostgresStore::Open(config.store);
      if (pg.ok()) return StorePtr(std::move(*pg));
      if (pg.status().code() != StatusCode::kUnavailable ||
          std::chrono::steady_clock::now() >= deadline)
        return pg.status();
      std::cerr << DumpJson({{"msg", "waiting for the database"}, {"error", pg.status().message()}})
                << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  auto lmdb = LmdbStore::Open(config.data_dir, size_t(config.lmdb_map_size_mb) << 20);
  if (!lmdb.ok()) return lmdb.status();
  return StorePtr(std::move(*lmdb));
}

namespace {

bool Configured(const Config& config, const CallSpec& call) {
  return call.IsMcp() ? config.mcp_servers.count(call.service) > 0
                      : config.services.count(call.service) > 0;
}

std::string ConfigureHint(const CallSpec& call) {
  if (call.IsMcp()) return "add it to \"mcp_servers\"";
  return "add it to \"services\" or pass --service " + call.service + "=URL";
}

Status ToolboxesConfigured(const Config& config, const std::vector<ToolboxDefinition>& toolboxes) {
  for (const ToolboxDefinition& tb : toolboxes) {
    SAGAD_RETURN_IF_ERROR(Validate(tb));
    const ToolDefinition* t = nullptr;
    const CallSpec* c = FirstUnconfiguredCall(
        tb, [&](const CallSpec& call) { return Configured(config, call); }, &t);
    if (c)
      return InvalidArgument("toolbox '" + tb.name + "' tool '" + t->name() + "' calls " +
                             CalleeText(*c) + ", which is not configured (" + ConfigureHint(*c) +
                             ")");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<SagaDefinition>> CollectDefinitions(
    const Config& config, const std::vector<SagaDefinition>& sagas,
    std::vector<ToolboxDefinition>* toolboxes) {
  std::vector<SagaDefinition> all = sagas;
  std::vector<ToolboxDefinition> none;
  if (!toolboxes) toolboxes = &none;
  if (!config.definitions_dir.empty()) {
    auto defs = LoadDefinitionsDir(config.definitions_dir, toolboxes);
    if (!defs.ok()) return defs.status();
    all.insert(all.end(), defs->begin(), defs->end());
  }
  for (const SagaDefinition& def : all) {
    Status s = Validate(def);
    if (!s.ok()) return InvalidArgument("saga '" + def.name + "': " + s.message());
    const StepDefinition* st = nullptr;
    const CallSpec* c = FirstUnconfiguredCall(
        def, [&](const CallSpec& call) { return Configured(config, call); }, &st);
    if (c)
      return InvalidArgument("saga '" + def.name + "' step '" + st->name + "' calls " +
                             CalleeText(*c) + ", which is not configured (" + ConfigureHint(*c) +
                             ")");
  }
  SAGAD_RETURN_IF_ERROR(ToolboxesConfigured(config, *toolboxes));
  return all;
}

namespace {

// Every tool call of the definitions against its server's tool list: a tool
// it lacks or arguments its inputSchema refuses stop sagad; a server that
// does not answer is a warning (it may start later; the calls then wait).
Status CheckMcpCalls(McpAdapter& adapter, const std::vector<SagaDefinition>& sagas,
                     const std::vector<ToolboxDefinition>& toolboxes) {
  std::vector<std::pair<std::string, const StepDefinition*>> steps;
  for (const SagaDefinition& def : sagas)
    for (const StepDefinition& st : def.steps)
      steps.emplace_back("saga '" + def.name + "' step '" + st.name + "'", &st);
  for (const ToolboxDefinition& tb : toolboxes)
    for (const ToolDefinition& t : tb.tools)
      steps.emplace_back("toolbox '" + tb.name + "' tool '" + t.name() + "'", &t.step);
  std::map<std::string, StatusOr<nlohmann::json>> lists;  // by server, asked once
  for (const auto& [where, st] : steps) {
    std::vector<const CallSpec*> calls = {&st->forward};
    if (st->compensation) calls.push_back(&*st->compensation);
    if (st->reconcile) calls.push_back(&st->reconcile->read);
    for (const CallSpec* c : calls) {
      if (!c->IsMcp()) continue;
      auto it = lists.find(c->service);
      if (it == lists.end()) {
        it = lists.emplace(c->service, adapter.ListTools(c->service)).first;
        if (!it->second.ok())
          EngineLog(LogLevel::kWarn, {{"msg", "mcp server not checked"},
                                      {"server", c->service},
                                      {"error", it->second.status().message()}});
      }
      if (!it->second.ok()) continue;
      Status s = CheckToolCall(*it->second, c->service, c->path, c->body);
      if (!s.ok()) return InvalidArgument(where + ": " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace

static int PrintUsage() {
  std::cout << kSagadUsage << "\n";
  return 0;
}

namespace {

// "POST payments /charges; undo ...; reconcile ...; irreversible, ...".
std::string CallsText(const StepDefinition& st) {
  auto call = [](const CallSpec& c) { return c.method + " " + c.service + " " + c.path; };
  std::string out = call(st.forward);
  if (st.compensation) out += "; undo " + call(*st.compensation);
  if (st.reconcile) out += "; reconcile " + call(st.reconcile->read);
  if (st.irreversible) out += "; irreversible, waits for an operator";
  return out;
}

}  // namespace

int CheckMain(const Config& config, const std::vector<SagaDefinition>& sagas,
              std::vector<ToolboxDefinition> toolboxes) {
  if (config.help) return PrintUsage();
  auto all = CollectDefinitions(config, sagas, &toolboxes);
  if (!all.ok()) {
    std::cerr << "sagad check: " << all.status().message() << "\n";
    return 2;
  }
  for (const SagaDefinition& def : *all) {
    std::cout << def.name << " v" << def.version << "\n";
    for (size_t i = 0; i < def.steps.size(); ++i) {
      const StepDefinition& st = def.steps[i];
      std::cout << "  " << st.name << ": " << CallsText(st);
      std::vector<std::string> after = def.DependencyNames(i);
      if (!after.empty()) {
        std::cout << "; after";
        for (const auto& a : after) std::cout << " " << a;
      }
      std::cout << "\n";
    }
  }
  for (const ToolboxDefinition& tb : toolboxes) {
    std::cout << tb.name << " v" << tb.version << " (toolbox)\n";
    for (const ToolDefinition& t : tb.tools) {
      std::cout << "  " << t.name() << ": " << CallsText(t.step) << "\n";
    }
  }
  std::cout << "ok: " << all->size() << " saga(s), " << toolboxes.size() << " toolbox(es), "
            << config.services.size() << " service(s), " << config.mcp_servers.size()
            << " MCP server(s)\n";
  return 0;
}

namespace {

// Every API connection is a file descriptor: take the hard limit (the soft
// one is often 1,024), so the connection caps are what limits them.
void RaiseFileLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

void WarnAboutUnverifiedTls(const Config& config) {
  for (const auto& [name, svc] : config.services)
    if (!svc.tls_verify)
      std::cerr << DumpJson({{"msg", "warning: TLS certificate verification is OFF"},
                             {"service", name},
                             {"reason", "tls_verify: false in the config"}})
                << std::endl;
}

EngineOptions EngineOptionsOf(const Config& config, WebhookPublisher& publisher) {
  EngineOptions options;
  options.workers = config.workers;
  options.house_threads = config.api_threads;
  options.outbox = !config.webhooks.empty();
  options.on_outbox = [&publisher] { publisher.Notify(); };
  options.lease_ms = config.lease_ms;
  options.retention_ms = config.retention_ms;
  options.coordinator_id = config.coordinator_id;
  if (options.coordinator_id.empty()) {
    options.coordinator_id =
        "sagad@" + config.listen_host + ":" + std::to_string(config.listen_port);
    if (config.listen_port == 0) options.coordinator_id += "-" + std::to_string(::getpid());
  }
  return options;
}

int Fail(const std::string& msg) {
  std::cerr << "sagad: " << msg << "\n";
  return 1;
}

// A bad definition (an invalid graph, a misspelt key, a service nobody
// configured) stops sagad with exit 2.
int BadDefinition(const std::string& msg) {
  std::cerr << "sagad: " << msg << "\n";
  return 2;
}

// The stop's bound: the drain (answers owed: 2 s) plus 5 s.
constexpr std::chrono::milliseconds kStopLimit{7000};

// The start and the stop around the API's event loop, which the main thread
// runs: the recovery runs on a thread of its own while the API already
// answers (/healthz; /readyz "recovery in progress"); a stop signal, read on
// the loop, begins the drain on a thread of its own once the start ended
// (a signal during the recovery waits for its end, as it always did). Both
// threads live only through their part; the main thread joins them.
class Lifecycle {
 public:
  Lifecycle(ApiServer& api, StopDeadline& deadline) : api_(api), deadline_(deadline) {}
  ~Lifecycle() {
    if (starter_.joinable()) starter_.join();
    if (stopper_.joinable()) stopper_.join();
  }

  // `start` runs on the starter thread; an error stops the API (and Serve).
  void Start(std::function<Status()> start) {
    starter_ = std::thread([this, start = std::move(start)] {
      Status s = start();
      if (!s.ok()) {
        {
          MutexLock l(mu_);
          failure_ = s;
        }
        api_.Stop();  // outside the lock: the loop takes it for a signal
        return;
      }
      MutexLock l(mu_);
      started_ = true;
      if (signal_ != 0) BeginStopLocked();
    });
  }
  // On the loop: a stop signal arrived.
  void Signal(int sig) {
    MutexLock l(mu_);
    if (signal_ != 0) return;
    signal_ = sig;
    if (started_) BeginStopLocked();
  }
  // After the loop returned: what the start failed with (ok if it did not).
  Status Failure() {
    if (starter_.joinable()) starter_.join();
    if (stopper_.joinable()) stopper_.join();
    MutexLock l(mu_);
    return failure_;
  }

 private:
  void BeginStopLocked() REQUIRES(mu_) {
    stopper_ = std::thread([this, sig = signal_] {
      std::cerr << "{\"msg\":\"draining\",\"signal\":" << sig << "}" << std::endl;
      deadline_.Arm(kStopLimit);
      deadline_.Phase("HTTP server: answers owed");
      api_.Stop();
    });
  }

  ApiServer& api_;
  StopDeadline& deadline_;
  Mutex mu_;
  bool started_ GUARDED_BY(mu_) = false;
  int signal_ GUARDED_BY(mu_) = 0;
  Status failure_ GUARDED_BY(mu_);
  std::thread starter_, stopper_;
};

// Serves until SIGTERM/SIGINT, then drains, within kStopLimit (`deadline`
// also covers what the caller closes after: the engine, the store).
int Serve(const Config& config, Engine& engine, WebhookPublisher& publisher,
          StoreWatchdog& watchdog, StopDeadline& deadline) {
  StopSignals signals;
  if (signals.fd() < 0) return Fail(signals.error());
  ApiServer api(engine, ApiOptionsOf(config));
  auto port = api.Bind(config.listen_host, config.listen_port);
  if (!port.ok()) return Fail(port.status().message());
  Lifecycle life(api, deadline);
  api.OnReadable(signals.fd(), [&] {
    if (int sig = signals.Read()) life.Signal(sig);
  });
  // The store's watchdog looks from the loop: Look takes no lock a write holds.
  api.OnLoopEvery(watchdog.every(), [&] { watchdog.Look(); });
  life.Start([&, port = *port] {
    Status s = engine.Start();
    if (!s.ok()) return Status(s.code(), "recovery failed: " + s.message());
    publisher.Start();
    api.SetReady(true);
    std::cout << "LISTENING " << port << std::endl;
    return Status::Ok();
  });
  api.Serve();  // until the stopper (or a failed start) stops it
  if (Status s = life.Failure(); !s.ok()) return Fail(s.message());
  deadline.Phase("engine: steps under way");
  engine.Stop();
  deadline.Phase("webhook publisher");
  publisher.Stop();
  deadline.Phase("store: queued writes");
  return 0;
}

}  // namespace

int RunServer(const Config& config, const std::vector<SagaDefinition>& sagas,
              std::vector<ToolboxDefinition> toolboxes) {
  if (config.help) return PrintUsage();
  // Definitions (and the services they name) are checked before anything
  // is opened: nothing is touched when one is bad.
  auto collected = CollectDefinitions(config, sagas, &toolboxes);
  if (!collected.ok()) return BadDefinition(collected.status().message());
  LogLevel level = LogLevel::kInfo;
  ParseLogLevel(config.log_level, &level);  // checked when the config was read
  SetLogLevel(level);
  RaiseFileLimit();
  if (Status crash = InitCrashPointsFromEnv(); !crash.ok()) {
    std::cerr << "sagad: " << crash.message() << "\n";  // a test that would never crash
    return 2;
  }
  StopSignals::Block();
  StopDeadline deadline;  // destroyed last: it bounds the store's close too
  auto store = OpenStore(config);
  if (!store.ok()) return Fail(store.status().message());
  WarnAboutUnverifiedTls(config);
  StoreWatchdog watchdog(**store, config.watchdog_ms);
  // Replies are read on the client's loop threads and handed to their owners.
  const int loops = CallLoopsFor(config.workers);
  std::unique_ptr<Adapter> adapter_ptr;
  if (config.mcp_servers.empty())
    adapter_ptr = std::make_unique<HttpAdapter>(config.services, loops);
  else
    adapter_ptr = std::make_unique<McpAdapter>(config.services, config.mcp_servers, loops);
  Adapter& adapter = *adapter_ptr;
  SystemClock clock;
  WebhookPublisher publisher(**store, config.webhooks);
  Engine engine(**store, adapter, clock, EngineOptionsOf(config, publisher));
  if (auto* mcp = dynamic_cast<McpAdapter*>(adapter_ptr.get())) {
    Status s = CheckMcpCalls(*mcp, *collected, toolboxes);
    if (!s.ok()) return BadDefinition(s.message());
  }
  for (const SagaDefinition& def : *collected) {
    Status s = engine.Register(def);
    if (!s.ok()) return BadDefinition(s.message());
  }
  for (const ToolboxDefinition& tb : toolboxes) {
    Status s = engine.RegisterToolbox(tb);
    if (!s.ok()) return BadDefinition(s.message());
  }
  return Serve(config, engine, publisher, watchdog, deadline);
}

}  // namespace sagad
