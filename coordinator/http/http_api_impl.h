// ApiServer::Impl: the API's state and handlers. Private to
// coordinator/http/: http_api.cc holds the lifecycle, the route table and the
// small handlers (probes, metrics, console, definitions); api_instances.cc
// the handlers of instances (submit, read, wait, act).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/engine/engine.h"
#include "coordinator/http/api_auth.h"
#include "coordinator/http/api_router.h"
#include "coordinator/http/history_readers.h"
#include "coordinator/http/http_api.h"
#include "coordinator/http/http_server.h"
#include "util/mutex.h"

// A handler of ApiServer::Impl, as a route handler.
#define SAGAD_HANDLER(method) \
  [this](const HttpRequest& req, HttpResponse& res) { method(req, res); }

namespace sagad {

// Reads of the history waiting for a reader; one more answers 503.
constexpr size_t kMaxQueuedHistoryReads = 64;

// What a run keeps of its agent's words: its metadata, and a call's reason
// and evidence, at most this many bytes of JSON each (413 beyond).
constexpr size_t kMaxRunTextBytes = 16 * 1024;
// InvalidArgument naming `what` and its size when `j` is over the bound.
Status WithinRunBounds(const nlohmann::json& j, const std::string& what);

// What became of an agent's call: refused (with each schema error of its
// arguments, if that was why), or its view in the run (replayed: the same
// call was made before).
struct CallAnswer {
  Status refused;
  std::vector<SchemaError> errors;
  nlohmann::json call;
  bool replayed = false;
};

// A submission's answer while it is deferred (its creation's commit, then
// ?wait), or an agent call's: given once, from whichever continuation
// settles it. If the
// client goes away, the wait is cancelled and the key finished unanswered
// (`never_answered`), even when the wait began after the client left.
// Thread-safety: every method may be called from any thread.
class PendingSubmission {
 public:
  static std::shared_ptr<PendingSubmission> Start(HttpResponse& res,
                                                  std::function<void()> never_answered);
  const std::shared_ptr<DeferredAnswer>& answer() const { return answer_; }
  // The wait began; `cancel` ends it (true if it had not answered yet).
  void Waiting(std::function<bool()> cancel);

 private:
  void Abandoned();  // the client went away
  std::shared_ptr<DeferredAnswer> answer_;
  std::function<void()> never_answered_;
  Mutex mu_;
  bool gone_ GUARDED_BY(mu_) = false;
  std::function<bool()> cancel_ GUARDED_BY(mu_);
};

class ApiServer::Impl {
 public:
  Impl(Engine& engine, const ApiOptions& options);

  StatusOr<int> Bind(const std::string& host, int port);
  // Serves (blocks until Stop); the store's readiness is probed meanwhile.
  void Serve();
  HttpServer& server() { return server_; }
  ~Impl();
  // Drains: no new connection or request; the long polls still waiting are
  // answered 503 (Retry-After) and every answer owed is written (up to 2 s)
  // before the server stops.
  void Stop();
  void SetReady(bool r) { ready_ = r; }
  const std::vector<std::string>& routes() const { return router_.routes(); }
  void Exchange(HttpRequest& req, HttpResponse& res, std::shared_ptr<Abandonment> gone,
                std::function<void()> done);

 private:
  static HttpServerOptions ServerOptions(const ApiOptions& options, const ApiAuth& auth);
  // The probes answered on the event loop (HttpServerOptions::on_loop).
  bool OnLoop(const HttpRequest& req, HttpResponse& res);
  // /readyz from the last probe of the store (StartProbe), within
  // milliseconds whatever the store does; false when no probe runs (the
  // simulator: Readyz asks the store itself).
  bool ProbedReadiness(const HttpRequest& req, HttpResponse& res);
  // /readyz's answer: 503 while recovering or while the store is stalled,
  // else what `writable` (asked last) says.
  void AnswerReadiness(const HttpRequest& req, HttpResponse& res,
                       const std::function<Status()>& writable);
  // Asks the store whether it could take a write every kProbeEveryMs (on
  // the engine's housekeeping: Engine::Every) until this server is gone,
  // keeping the last answer and when it came.
  void StartProbe();
  // How long the store has been stalled, 0 while under watchdog_ms (no lock
  // held across a write).
  int64_t StalledMs() const;
  // 503 if the store watchdog sees a stall.
  bool StalledAnswer(const HttpRequest& req, HttpResponse& res);
  // The Host/Origin rule (api_tenancy.h), then the route table.
  void Dispatch(HttpRequest& req, HttpResponse& res);
  // The instance `id` when `caller` may see it; NotFound, as if it did not
  // exist, when it is another principal's (api_tenancy.h).
  StatusOr<nlohmann::json> VisibleInstance(const Caller& caller, const std::string& id);
  // The same rule on the instance's head (Engine::GetHead: no view built).
  StatusOr<Engine::Head> VisibleHead(const Caller& caller, const std::string& id);
  // Whether `caller` may read instance `id`, without a read when it sees
  // every instance (what it reads next answers for one that is missing).
  Status MayRead(const Caller& caller, const std::string& id);
  void Routes();
  void ProbeRoutes();
  void InstanceRoutes();
  void ServiceRoutes();
  void ConsoleRoutes();
  void RunRoutes();

  // http_api.cc
  void Readyz(const HttpRequest& req, HttpResponse& res);
  void Metrics(const HttpRequest& req, HttpResponse& res);
  void Sagas(const HttpRequest& req, HttpResponse& res);
  void WhoAmI(const HttpRequest& req, HttpResponse& res);
  static void ConsoleFile(const HttpRequest& req, HttpResponse& res);
  // POST /v1/services/{name}/pause|resume.
  void PauseOrResume(const HttpRequest& req, HttpResponse& res);
  // GET and PUT /v1/sagas/{saga}/versions/{version}.
  void GetDefinition(const HttpRequest& req, HttpResponse& res);
  void PutDefinition(const HttpRequest& req, HttpResponse& res);
  // Deploys `body` as {name}/`version` (a toolbox's when `toolbox`) and
  // answers 201, 200 (the same definition again) or 409 once it is durable.
  void DeployAndAnswer(const HttpRequest& req, HttpResponse& res, int version,
                       const nlohmann::json& body, const std::string& who, bool toolbox);
  // api_instances.cc
  void Submit(const HttpRequest& req, HttpResponse& res);
  // The version a submission asks for (0: the newest); false with a 400.
  bool SubmittedVersion(const HttpRequest& req, HttpResponse& res, const nlohmann::json& body,
                        int* version);
  // False with a 400/422 naming each error when the input does not match.
  bool InputMatches(const HttpRequest& req, HttpResponse& res, const std::string& saga, int version,
                    const nlohmann::json& input);
  // Defers a submission's answer (key `key`, may be empty): a client that
  // goes away leaves the key finished unanswered.
  std::shared_ptr<PendingSubmission> DeferSubmission(HttpResponse& res, const std::string& key);
  // A new instance (a submission, a run), once created: its problem, or its
  // Location and the stored answer of a replay, or AnswerSubmission.
  void AnswerCreated(const HttpRequest& req, const std::shared_ptr<PendingSubmission>& pending,
                     const std::string& key, const StatusOr<SubmitOutcome>& sub, double wait);
  // Answers a submission now or once settled (?wait); finishes its key.
  void AnswerSubmission(const HttpRequest& req, const std::shared_ptr<PendingSubmission>& pending,
                        const std::string& key, const std::string& id, bool replayed, double wait);
  void List(const HttpRequest& req, HttpResponse& res);
  void Get(const HttpRequest& req, HttpResponse& res);
  void Events(const HttpRequest& req, HttpResponse& res);
  void StepAction(const HttpRequest& req, HttpResponse& res);
  // Defers `res` until an operator action on instance `id` is done; what
  // to call with its outcome (a refusal, or Ok: the instance's view).
  Engine::ActionDone DeferAction(const HttpRequest& req, HttpResponse& res, const std::string& id);
  void CancelOrCompensate(const HttpRequest& req, HttpResponse& res);
  // api_runs.cc: toolboxes and agent runs (docs/agents.md).
  void GetToolbox(const HttpRequest& req, HttpResponse& res);
  void PutToolbox(const HttpRequest& req, HttpResponse& res);
  void OpenRun(const HttpRequest& req, HttpResponse& res);
  // POST /v1/instances/{id}/calls[?wait=S]: 202 with the call, 200 once it
  // settled (COMMITTED, FAILED, REJECTED, AWAITING_APPROVAL, NEEDS_REVIEW);
  // with &until=decided, 200 once decided (not AWAITING_APPROVAL) or when
  // the wait is over.
  void AppendCall(const HttpRequest& req, HttpResponse& res);
  // POST /v1/instances/{id}/decisions: 201 the decision recorded, 200 with
  // Idempotent-Replayed the one recorded before under its decision_id.
  void Decide(const HttpRequest& req, HttpResponse& res);
  // Appends `call` to run `id` as `who`; `give` answers once, with the call
  // as it is now (wait <= 0) or once the run settles (`decided`: the call
  // is decided) or `wait` seconds pass: a deferred answer, no thread waits
  // for it.
  void AppendAndWait(HttpResponse& res, const Caller& caller, const std::string& id,
                     const nlohmann::json& call, double wait, bool decided,
                     std::function<void(HttpResponse&, const CallAnswer&)> give);
  // Whether `caller` may open one more run (max_open_runs; a key that
  // opened one already replays it); false with its 429 answered.
  bool OpenRunAllowed(const HttpRequest& req, HttpResponse& res, const Caller& caller,
                      const std::string& key);
  // Why `caller` may not open one more run ("" when it may); `failed` when
  // the store could not tell.
  std::string TooManyOpenRuns(const Caller& caller, const std::string& key, Status* failed);
  // api_mcp.cc: POST /mcp, sagad as an MCP server (Streamable HTTP).
  void Mcp(const HttpRequest& req, HttpResponse& res);
  // tools/call on run `run` (the session's, or the handle the call names):
  // append the call and answer its outcome, or finish_run / abort_run.
  // `modern`: the 2026-07-28 revision (each result says so).
  // `tasks`: the client takes a task for a call not decided when the wait
  // ends (api_mcp_modern.cc).
  void McpToolCall(const HttpRequest& req, HttpResponse& res, const nlohmann::json& id,
                   const nlohmann::json& params, const std::string& run,
                   const ToolboxDefinition& tb, const Caller& caller, bool modern,
                   bool tasks = false);
  // tasks/get, tasks/cancel, tasks/update of the Tasks extension.
  void McpTask(HttpResponse& res, const nlohmann::json& id, const std::string& method,
               const nlohmann::json& params, const Caller& caller);
  void McpEndRun(HttpResponse& res, const nlohmann::json& id, const std::string& run,
                 const std::string& tool, const nlohmann::json& args, const Caller& caller,
                 bool modern);
  // api_mcp_modern.cc: a request of the 2026-07-28 revision (no session;
  // the run is a handle passed as a tool argument).
  void McpModern(const HttpRequest& req, HttpResponse& res, const nlohmann::json& m,
                 const Caller& caller);
  // A run of `toolbox` opened for an MCP client (both eras): its metadata
  // names the client and the revision; the caller's key, already scoped,
  // makes it the same run again. `opened` gets its id, or why not, from the
  // creation's continuation (the input checked there).
  void StartMcpRun(const Caller& caller, const std::string& toolbox, const nlohmann::json& input,
                   const std::string& key, const nlohmann::json& client, const std::string& version,
                   Completion<StatusOr<std::string>> opened);
  void McpOpenRun(HttpResponse& res, const nlohmann::json& id, const std::string& toolbox,
                  const nlohmann::json& args, const nlohmann::json& client, const Caller& caller);
  // initialize: a new run of ?toolbox=NAME, or the run the session names
  // (the caller's own: another principal's session does not exist).
  void McpInitialize(const HttpRequest& req, HttpResponse& res, const nlohmann::json& id,
                     const nlohmann::json& params, const Caller& caller);
  // POST /v1/instances/{id}/finish | abort.
  void EndRun(const HttpRequest& req, HttpResponse& res);
  // api_bulk.cc: POST /v1/instances/actions/{retry|cancel|approve|reject}
  // (approve: never an agent's call or an irreversible step).
  void Bulk(const HttpRequest& req, HttpResponse& res);
  // POST /v1/approvals/actions/approve: exactly the listed approvals whose
  // request digest still matches what the operator saw; the others 409.
  void ApproveSeen(const HttpRequest& req, HttpResponse& res);
  // One instance of a bulk action: `done` gets its outcome and what was
  // done, once its commits are (or at once when refused before any).
  using BulkDone = std::function<void(Status, std::string)>;
  // Approving in bulk never approves what must be seen one by one: an
  // agent's call or an irreversible step (ApproveSeen names each with the
  // digest the operator saw). Keeps the others in `steps`; how many it took.
  size_t HoldBackOneByOne(const nlohmann::json& view, std::vector<std::string>* steps);
  void BulkOne(const std::string& action, const std::string& id, const std::string& who,
               const std::string& text, BulkDone done);
  // An operator's request with an optional {"reason"}: false with its 401,
  // 403 or 400 answered.
  bool OperatorWithReason(const HttpRequest& req, HttpResponse& res, std::string* who,
                          std::string* reason);

  Engine& engine_;
  ApiOptions options_;
  ApiAuth auth_;
  ApiRouter router_;
  std::atomic<bool> ready_{false};
  // The readiness probe's last answer, shared with the probe's task (which
  // may outlive this server by one run).
  struct Probe {
    Mutex mu;
    bool probing GUARDED_BY(mu) = false;
    bool stop GUARDED_BY(mu) = false;
    Status probed GUARDED_BY(mu);
    std::chrono::steady_clock::time_point at GUARDED_BY(mu);
  };
  const std::shared_ptr<Probe> probe_ = std::make_shared<Probe>();
  // Lists and searches of the history run there, not on handler threads.
  HistoryReaders readers_;
  HttpServer server_;  // last: its threads call into the members above
};

}  // namespace sagad
