// The step lifecycle as a Boost.MSM transition table. Read the table.
#define BOOST_MPL_CFG_NO_PREPROCESSED_HEADERS
#define BOOST_MPL_LIMIT_VECTOR_SIZE 40
#define BOOST_MPL_LIMIT_MAP_SIZE 40

#include "sagas/step_machine.h"

#include <boost/msm/back/state_machine.hpp>
#include <boost/msm/front/functor_row.hpp>
#include <boost/msm/front/state_machine_def.hpp>
#include <string>

#include "util/check.h"

namespace sagad {
namespace {

namespace msm = boost::msm;
namespace mpl = boost::mpl;
using msm::front::none;
using msm::front::Row;

// --- events ---
struct RequestApproval {};
struct Approve {};
struct Reject {};
struct Start {};
struct Commit {};
struct Fail {};
struct ConfirmRefused {};
struct OutcomeUnknown {};
struct NotExecuted {};
struct Escalate {};
struct BeginCompensation {};
struct CompensationDone {};
struct CompensationUnknown {};
struct Skip {};

struct StepFsmDef;

// --- states: each records the status it stands for on entry ---
template <StepStatus S, bool kCompInDoubt = false, bool kCompReview = false>
struct StatusState : msm::front::state<> {
  template <class Event, class Fsm>
  void on_entry(const Event&, Fsm& fsm) {
    fsm.status = S;
    fsm.comp_in_doubt = kCompInDoubt;
    fsm.comp_review = kCompReview;
  }
};
struct Planned : StatusState<StepStatus::kPlanned> {};
struct AwaitingApproval : StatusState<StepStatus::kAwaitingApproval> {};
struct Started : StatusState<StepStatus::kStarted> {};
struct Committed : StatusState<StepStatus::kCommitted> {};
struct Failed : StatusState<StepStatus::kFailed> {};
struct Unknown : StatusState<StepStatus::kUnknown> {};
struct Rejected : StatusState<StepStatus::kRejected> {};
struct Compensating : StatusState<StepStatus::kCompensating, true> {};
struct CompensationInDoubt : StatusState<StepStatus::kCompensating, true> {};
struct Compensated : StatusState<StepStatus::kCompensated> {};
struct NeedsReview : StatusState<StepStatus::kNeedsReview> {};
struct CompensationReview : StatusState<StepStatus::kNeedsReview, false, true> {};

// --- actions ---
struct MarkApproved {
  template <class Evt, class Fsm, class Src, class Tgt>
  void operator()(const Evt&, Fsm& fsm, Src&, Tgt&) {
    fsm.approved = true;
  }
};

struct StepFsmDef : msm::front::state_machine_def<StepFsmDef> {
  using initial_state = Planned;

  // clang-format off
  struct transition_table : mpl::vector<
  //    Start                 Event                 Next                  Action        Guard
  Row<  Planned,              RequestApproval,      AwaitingApproval,     none,         none >,
  Row<  AwaitingApproval,     Approve,              Planned,              MarkApproved, none >,
  Row<  AwaitingApproval,     Reject,               Rejected,             none,         none >,
  Row<  Planned,              Start,                Started,              none,         none >,
  Row<  Started,              Start,                Started,              none,         none >,
  Row<  Started,              Commit,               Committed,            none,         none >,
  Row<  Started,              Fail,                 Failed,               none,         none >,
  Row<  Started,              OutcomeUnknown,       Unknown,              none,         none >,
  Row<  Started,              NotExecuted,          Planned,              none,         none >,
  Row<  Started,              Escalate,             NeedsReview,          none,         none >,
  Row<  Unknown,              Start,                Started,              none,         none >,
  Row<  Unknown,              Commit,               Committed,            none,         none >,
  Row<  Started,              ConfirmRefused,       Failed,               none,         none >,
  Row<  Unknown,              ConfirmRefused,       Failed,               none,         none >,
  Row<  Unknown,              NotExecuted,          Planned,              none,         none >,
  Row<  Unknown,              Escalate,             NeedsReview,          none,         none >,
  Row<  NeedsReview,          Commit,               Committed,            none,         none >,
  Row<  NeedsReview,          NotExecuted,          Planned,              none,         none >,
  Row<  Planned,              Skip,                 Committed,            none,         none >,
  Row<  NeedsReview,          Skip,                 Committed,            none,         none >,
  Row<  Committed,            BeginCompensation,    Compensating,         none,         none >,
  Row<  Compensating,         BeginCompensation,    Compensating,         none,         none >,
  Row<  Compensating,         CompensationDone,     Compensated,          none,         none >,
  Row<  Compensating,         CompensationUnknown,  CompensationInDoubt,  none,         none >,
  Row<  Compensating,         NotExecuted,          Committed,            none,         none >,
  Row<  Compensating,         Escalate,             CompensationReview,   none,         none >,
  Row<  CompensationInDoubt,  BeginCompensation,    Compensating,         none,         none >,
  Row<  CompensationInDoubt,  CompensationUnknown,  CompensationInDoubt,  none,         none >,
  Row<  CompensationInDoubt,  CompensationDone,     Compensated,          none,         none >,
  Row<  CompensationInDoubt,  Escalate,             CompensationReview,   none,         none >,
  Row<  CompensationReview,   CompensationDone,     Compensated,          none,         none >,
  Row<  CompensationReview,   NotExecuted,          Committed,            none,         none >
  > {};
  // clang-format on

  template <class Fsm, class Event>
  void no_transition(const Event&, Fsm&, int) {
    refused = true;
  }
  template <class Fsm, class Event>
  void exception_caught(const Event&, Fsm&, std::exception&) {
    refused = true;
  }

  StepStatus status = StepStatus::kPlanned;
  bool approved = false;
  bool comp_in_doubt = false;
  bool comp_review = false;
  bool refused = false;
};

using StepFsm = msm::back::state_machine<StepFsmDef>;

template <class E>
bool Fire(StepFsm& fsm) {
  fsm.refused = false;
  fsm.process_event(E{});
  return !fsm.refused;
}

}  // namespace

struct StepMachine::Impl {
  StepFsm fsm;
  Impl() { fsm.start(); }
};

// The statuses each event may lead to (step_machine.h); checked after every
// accepted event. Above all: only kStart makes a step STARTED (no request
// leaves without its durable STARTED record), and only kCommit and kSkip
// make it COMMITTED.
static bool TargetAllowed(StepEvent e, StepStatus to) {
  using S = StepStatus;
  switch (e) {
    case StepEvent::kRequestApproval:
      return to == S::kAwaitingApproval;
    case StepEvent::kApprove:
      return to == S::kPlanned;
    case StepEvent::kReject:
      return to == S::kRejected;
    case StepEvent::kStart:
      return to == S::kStarted;
    case StepEvent::kCommit:
      return to == S::kCommitted;
    case StepEvent::kFail:
      return to == S::kFailed;
    case StepEvent::kOutcomeUnknown:
      return to == S::kUnknown;
    case StepEvent::kNotExecuted:
      return to == S::kPlanned || to == S::kCommitted;
    case StepEvent::kEscalate:
      return to == S::kNeedsReview;
    case StepEvent::kBeginCompensation:
      return to == S::kCompensating;
    case StepEvent::kCompensationDone:
      return to == S::kCompensated;
    case StepEvent::kCompensationUnknown:
      return to == S::kCompensating;  // in doubt
    case StepEvent::kSkip:
      return to == S::kCommitted;
    case StepEvent::kConfirmRefused:
      return to == S::kFailed;
  }
  return false;
}

StepMachine::StepMachine() : impl_(new Impl) {}
StepMachine::~StepMachine() = default;
StepMachine::StepMachine(const StepMachine& o) : impl_(new Impl(*o.impl_)) {}
StepMachine& StepMachine::operator=(const StepMachine& o) {
  impl_.reset(new Impl(*o.impl_));
  return *this;
}

Status StepMachine::Process(StepEvent e) {
  StepFsm& f = impl_->fsm;
  bool ok = false;
  switch (e) {
    case StepEvent::kRequestApproval:
      ok = Fire<RequestApproval>(f);
      break;
    case StepEvent::kApprove:
      ok = Fire<Approve>(f);
      break;
    case StepEvent::kReject:
      ok = Fire<Reject>(f);
      break;
    case StepEvent::kStart:
      ok = Fire<Start>(f);
      break;
    case StepEvent::kCommit:
      ok = Fire<Commit>(f);
      break;
    case StepEvent::kFail:
      ok = Fire<Fail>(f);
      break;
    case StepEvent::kOutcomeUnknown:
      ok = Fire<OutcomeUnknown>(f);
      break;
    case StepEvent::kNotExecuted:
      ok = Fire<NotExecuted>(f);
      break;
    case StepEvent::kEscalate:
      ok = Fire<Escalate>(f);
      break;
    case StepEvent::kBeginCompensation:
      ok = Fire<BeginCompensation>(f);
      break;
    case StepEvent::kCompensationDone:
      ok = Fire<CompensationDone>(f);
      break;
    case StepEvent::kCompensationUnknown:
      ok = Fire<CompensationUnknown>(f);
      break;
    case StepEvent::kSkip:
      ok = Fire<Skip>(f);
      break;
    case StepEvent::kConfirmRefused:
      ok = Fire<ConfirmRefused>(f);
      break;
  }
  if (ok) {
    SAGAD_CHECK(TargetAllowed(e, f.status))
        << "step event " << StepEventName(e) << " led to " << StepStatusName(f.status);
    return Status::Ok();
  }
  return FailedPrecondition(std::string("step event ") + StepEventName(e) +
                            " is not allowed in state " + StepStatusName(f.status));
}

StepStatus StepMachine::status() const { return impl_->fsm.status; }
bool StepMachine::approved() const { return impl_->fsm.approved; }
bool StepMachine::compensation_in_doubt() const { return impl_->fsm.comp_in_doubt; }
bool StepMachine::reviewing_compensation() const { return impl_->fsm.comp_review; }

const char* StepStatusName(StepStatus s) {
  switch (s) {
    case StepStatus::kPlanned:
      return "PLANNED";
    case StepStatus::kAwaitingApproval:
      return "AWAITING_APPROVAL";
    case StepStatus::kStarted:
      return "STARTED";
    case StepStatus::kCommitted:
      return "COMMITTED";
    case StepStatus::kFailed:
      return "FAILED";
    case StepStatus::kUnknown:
      return "UNKNOWN";
    case StepStatus::kRejected:
      return "REJECTED";
    case StepStatus::kCompensating:
      return "COMPENSATING";
    case StepStatus::kCompensated:
      return "COMPENSATED";
    case StepStatus::kNeedsReview:
      return "NEEDS_REVIEW";
  }
  return "?";
}

namespace {
constexpr StepEvent kAllStepEvents[] = {StepEvent::kRequestApproval,
                                        StepEvent::kApprove,
                                        StepEvent::kReject,
                                        StepEvent::kStart,
                                        StepEvent::kCommit,
                                        StepEvent::kFail,
                                        StepEvent::kOutcomeUnknown,
                                        StepEvent::kNotExecuted,
                                        StepEvent::kEscalate,
                                        StepEvent::kBeginCompensation,
                                        StepEvent::kCompensationDone,
                                        StepEvent::kCompensationUnknown,
                                        StepEvent::kSkip,
                                        StepEvent::kConfirmRefused};
}

const char* StepEventName(StepEvent e) {
  switch (e) {
    case StepEvent::kRequestApproval:
      return "approval_requested";
    case StepEvent::kApprove:
      return "approved";
    case StepEvent::kReject:
      return "rejected";
    case StepEvent::kStart:
      return "started";
    case StepEvent::kCommit:
      return "committed";
    case StepEvent::kFail:
      return "failed";
    case StepEvent::kOutcomeUnknown:
      return "outcome_unknown";
    case StepEvent::kNotExecuted:
      return "not_executed";
    case StepEvent::kEscalate:
      return "escalated";
    case StepEvent::kBeginCompensation:
      return "compensation_started";
    case StepEvent::kCompensationDone:
      return "compensated";
    case StepEvent::kCompensationUnknown:
      return "compensation_unknown";
    case StepEvent::kSkip:
      return "skipped";
    case StepEvent::kConfirmRefused:
      return "refusal_confirmed";
  }
  return "?";
}

bool ParseStepEvent(const std::string& name, StepEvent* out) {
  for (StepEvent e : kAllStepEvents) {
    if (name == StepEventName(e)) {
      *out = e;
      return true;
    }
  }
  return false;
}

}  // namespace sagad
