// The saga lifecycle as a Boost.MSM transition table. Read the table.
#include "sagas/saga_machine.h"

#include <boost/msm/back/state_machine.hpp>
#include <boost/msm/front/functor_row.hpp>
#include <boost/msm/front/state_machine_def.hpp>

#include "util/check.h"

namespace sagad {
namespace {

namespace msm = boost::msm;
namespace mpl = boost::mpl;
using msm::front::none;
using msm::front::Row;

// --- events ---
struct WaitForApproval {};
struct Resume {};
struct Complete {};
struct StartCompensation {};
struct FinishCompensation {};
struct Escalate {};

// --- states ---
template <SagaStatus S, bool kCompReview = false>
struct StatusState : msm::front::state<> {
  template <class Event, class Fsm>
  void on_entry(const Event&, Fsm& fsm) {
    fsm.status = S;
    fsm.comp_review = kCompReview;
  }
};
struct Running : StatusState<SagaStatus::kRunning> {};
struct AwaitingApproval : StatusState<SagaStatus::kAwaitingApproval> {};
struct Completed : StatusState<SagaStatus::kCompleted> {};
struct Compensating : StatusState<SagaStatus::kCompensating> {};
struct Compensated : StatusState<SagaStatus::kCompensated> {};
struct NeedsReview : StatusState<SagaStatus::kNeedsReview> {};
struct CompensationReview : StatusState<SagaStatus::kNeedsReview, true> {};

struct SagaFsmDef : msm::front::state_machine_def<SagaFsmDef> {
  using initial_state = Running;

  // clang-format off
  struct transition_table : mpl::vector<
  //    Start               Event                Next                Action  Guard
  Row<  Running,            WaitForApproval,     AwaitingApproval,   none,   none >,
  Row<  AwaitingApproval,   Resume,              Running,            none,   none >,
  Row<  Running,            Complete,            Completed,          none,   none >,
  Row<  Running,            StartCompensation,   Compensating,       none,   none >,
  Row<  AwaitingApproval,   StartCompensation,   Compensating,       none,   none >,
  Row<  Compensating,       FinishCompensation,  Compensated,        none,   none >,
  Row<  Compensating,       Resume,              Running,            none,   none >,
  Row<  Running,            Escalate,            NeedsReview,        none,   none >,
  Row<  AwaitingApproval,   Escalate,            NeedsReview,        none,   none >,
  Row<  Compensating,       Escalate,            CompensationReview, none,   none >,
  Row<  NeedsReview,        Resume,              Running,            none,   none >,
  Row<  NeedsReview,        StartCompensation,   Compensating,       none,   none >,
  Row<  CompensationReview, Resume,              Compensating,       none,   none >,
  Row<  CompensationReview, StartCompensation,   Compensating,       none,   none >
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

  SagaStatus status = SagaStatus::kRunning;
  bool comp_review = false;
  bool refused = false;
};

using SagaFsm = msm::back::state_machine<SagaFsmDef>;

template <class E>
bool Fire(SagaFsm& fsm) {
  fsm.refused = false;
  fsm.process_event(E{});
  return !fsm.refused;
}

constexpr SagaStatus kAllStatuses[] = {SagaStatus::kRunning,     SagaStatus::kAwaitingApproval,
                                       SagaStatus::kCompleted,   SagaStatus::kCompensating,
                                       SagaStatus::kCompensated, SagaStatus::kNeedsReview};
constexpr SagaEvent kAllEvents[] = {SagaEvent::kWaitForApproval,    SagaEvent::kResume,
                                    SagaEvent::kComplete,           SagaEvent::kStartCompensation,
                                    SagaEvent::kFinishCompensation, SagaEvent::kEscalate};

}  // namespace

struct SagaMachine::Impl {
  SagaFsm fsm;
  Impl() { fsm.start(); }
};

// The status each event may lead to (saga_machine.h); checked after every
// accepted event, so an edit of the table that breaks the contract stops the
// tests, not a production instance's history.
static bool TargetAllowed(SagaEvent e, SagaStatus to) {
  switch (e) {
    case SagaEvent::kWaitForApproval:
      return to == SagaStatus::kAwaitingApproval;
    case SagaEvent::kResume:
      return to == SagaStatus::kRunning || to == SagaStatus::kCompensating;
    case SagaEvent::kComplete:
      return to == SagaStatus::kCompleted;
    case SagaEvent::kStartCompensation:
      return to == SagaStatus::kCompensating;
    case SagaEvent::kFinishCompensation:
      return to == SagaStatus::kCompensated;
    case SagaEvent::kEscalate:
      return to == SagaStatus::kNeedsReview;
  }
  return false;
}

SagaMachine::SagaMachine() : impl_(new Impl) {}
SagaMachine::~SagaMachine() = default;
SagaMachine::SagaMachine(const SagaMachine& o) : impl_(new Impl(*o.impl_)) {}
SagaMachine& SagaMachine::operator=(const SagaMachine& o) {
  impl_.reset(new Impl(*o.impl_));
  return *this;
}

Status SagaMachine::Process(SagaEvent e) {
  SagaFsm& f = impl_->fsm;
  bool ok = false;
  switch (e) {
    case SagaEvent::kWaitForApproval:
      ok = Fire<WaitForApproval>(f);
      break;
    case SagaEvent::kResume:
      ok = Fire<Resume>(f);
      break;
    case SagaEvent::kComplete:
      ok = Fire<Complete>(f);
      break;
    case SagaEvent::kStartCompensation:
      ok = Fire<StartCompensation>(f);
      break;
    case SagaEvent::kFinishCompensation:
      ok = Fire<FinishCompensation>(f);
      break;
    case SagaEvent::kEscalate:
      ok = Fire<Escalate>(f);
      break;
  }
  if (ok) {
    SAGAD_CHECK(TargetAllowed(e, f.status))
        << "saga event " << SagaEventName(e) << " led to " << SagaStatusName(f.status);
    return Status::Ok();
  }
  return FailedPrecondition(std::string("saga event ") + SagaEventName(e) +
                            " is not allowed in state " + SagaStatusName(f.status));
}

SagaStatus SagaMachine::status() const { return impl_->fsm.status; }
bool SagaMachine::reviewing_compensation() const { return impl_->fsm.comp_review; }

const char* SagaStatusName(SagaStatus s) {
  switch (s) {
    case SagaStatus::kRunning:
      return "RUNNING";
    case SagaStatus::kAwaitingApproval:
      return "AWAITING_APPROVAL";
    case SagaStatus::kCompleted:
      return "COMPLETED";
    case SagaStatus::kCompensating:
      return "COMPENSATING";
    case SagaStatus::kCompensated:
      return "COMPENSATED";
    case SagaStatus::kNeedsReview:
      return "NEEDS_REVIEW";
  }
  return "?";
}

bool ParseSagaStatus(const std::string& name, SagaStatus* out) {
  for (SagaStatus s : kAllStatuses) {
    if (name == SagaStatusName(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

bool IsTerminal(SagaStatus s) {
  return s == SagaStatus::kCompleted || s == SagaStatus::kCompensated;
}

const char* SagaEventName(SagaEvent e) {
  switch (e) {
    case SagaEvent::kWaitForApproval:
      return "saga_awaiting_approval";
    case SagaEvent::kResume:
      return "saga_resumed";
    case SagaEvent::kComplete:
      return "saga_completed";
    case SagaEvent::kStartCompensation:
      return "saga_compensating";
    case SagaEvent::kFinishCompensation:
      return "saga_compensated";
    case SagaEvent::kEscalate:
      return "saga_needs_review";
  }
  return "?";
}

bool ParseSagaEvent(const std::string& name, SagaEvent* out) {
  for (SagaEvent e : kAllEvents) {
    if (name == SagaEventName(e)) {
      *out = e;
      return true;
    }
  }
  return false;
}

}  // namespace sagad
