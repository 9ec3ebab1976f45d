// sagad: the saga coordinator process.
//   sagad --config FILE [--data-dir DIR] [--listen HOST:PORT] [--service NAME=URL]...
// Prints "LISTENING <port>" on stdout once it serves. SIGTERM/SIGINT drain
// and exit 0; SIGKILL loses nothing (every transition is durable first).
#include <signal.h>

#include <cstring>
#include <iostream>
#include <thread>

#include "adapters/http_adapter.h"
#include "coordinator/config.h"
#include "coordinator/definitions_dir.h"
#include "coordinator/crash_point.h"
#include "coordinator/engine.h"
#include "coordinator/http_api.h"
#include "coordinator/lmdb_store.h"
#include "examples/examples.h"

namespace {

constexpr const char* kUsage =
    "usage: sagad [--config FILE] [--data-dir DIR] [--listen HOST:PORT] "
    "[--service NAME=URL]... [--definitions DIR]";

int Fail(const std::string& msg, int code = 2) {
  std::cerr << "sagad: " << msg << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sagad;
  InitCrashPointsFromEnv();
  std::string config_path, data_dir, listen, definitions_dir;
  std::vector<std::string> services;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage << "\n";
      return 0;
    } else if (a == "--config" && value(&v)) {
      config_path = v;
    } else if (a == "--data-dir" && value(&v)) {
      data_dir = v;
    } else if (a == "--listen" && value(&v)) {
      listen = v;
    } else if (a == "--definitions" && value(&v)) {
      definitions_dir = v;
    } else if (a == "--service" && value(&v)) {
      services.push_back(v);
    } else {
      return Fail("unknown or incomplete argument '" + a + "'\n" + kUsage);
    }
  }

  Config config;
  if (!config_path.empty()) {
    auto c = LoadConfigFile(config_path);
    if (!c.ok()) return Fail(c.status().message());
    config = *c;
  }
  if (!data_dir.empty()) config.data_dir = data_dir;
  if (!listen.empty()) {
    Status s = ParseListen(listen, &config.listen_host, &config.listen_port);
    if (!s.ok()) return Fail(s.message());
  }
  for (const auto& s : services) {
    Status st = ApplyServiceOverride(s, &config);
    if (!st.ok()) return Fail(st.message());
  }
  if (config.tokens.empty() && !IsLoopback(config.listen_host))
    return Fail("no tokens are configured, so sagad only listens on loopback; refusing " +
                config.listen_host);

  // Signals are handled by a sigwait below; block them before threads start.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto store = LmdbStore::Open(config.data_dir);
  if (!store.ok()) return Fail(store.status().message());
  HttpAdapter adapter(config.services);
  SystemClock clock;
  WebhookPublisher publisher(**store, config.webhooks);
  EngineOptions options;
  options.workers = config.workers;
  options.outbox = !config.webhooks.empty();
  options.on_outbox = [&publisher] { publisher.Notify(); };
  Engine engine(**store, adapter, clock, options);
  for (const SagaDefinition& def : {IncidentResponse(), OrderFulfilment()}) {
    Status s = engine.Register(def);
    if (!s.ok()) return Fail(s.message());
  }
  if (!definitions_dir.empty()) {
    auto defs = LoadDefinitionsDir(definitions_dir);
    if (!defs.ok()) return Fail(defs.status().message());
    for (const SagaDefinition& def : *defs) {
      Status s = engine.Register(def);
      if (!s.ok()) return Fail(s.message());
    }
  }

  ApiServer api(engine, config);
  auto port = api.Bind(config.listen_host, config.listen_port);
  if (!port.ok()) return Fail(port.status().message());
  std::thread server([&] { api.Serve(); });

  Status s = engine.Start();
  if (!s.ok()) {
    api.Stop();
    server.join();
    return Fail("recovery failed: " + s.message(), 1);
  }
  publisher.Start();
  api.SetReady(true);
  std::cout << "LISTENING " << *port << std::endl;

  int sig = 0;
  sigwait(&sigs, &sig);
  std::cerr << "{\"msg\":\"draining\",\"signal\":" << sig << "}" << std::endl;
  api.Stop();
  server.join();
  engine.Stop();
  publisher.Stop();
  return 0;
}
