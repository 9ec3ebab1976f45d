// StepMark: one step of one instance marked as under way in this process's
// RunTable, held by the step action that may send it. The action that holds
// it is the only one that sends, reconciles or undoes that step; the mark is
// released when the action lets go of it: Release(), a move-assignment over
// it, or its destructor. No path unmarks a step by its id and index, so none
// can unmark another action's step or forget its own.
//
// Contract:
// - Obtained only from RunTable::TryMarkStep (empty when refused).
// - Move-only; released at most once. Its RunTable outlives every held mark
//   (RunTable::StopAndWait returns only when none is held, and refuses new
//   ones from then on).
// Thread-safety: one owner at a time (the action), like any value; Release
// may run on any thread (RunTable is thread-safe).
#pragma once

#include <string>

namespace sagad {

class RunTable;

class StepMark {
 public:
  StepMark() = default;
  StepMark(StepMark&& other) noexcept;
  // Releases what this one held, then takes other's.
  StepMark& operator=(StepMark&& other) noexcept;
  StepMark(const StepMark&) = delete;
  StepMark& operator=(const StepMark&) = delete;
  ~StepMark() { Release(); }

  bool held() const { return table_ != nullptr; }
  explicit operator bool() const { return held(); }
  // The marked step (-1 when empty).
  int step() const { return held() ? step_ : -1; }
  const std::string& instance_id() const { return id_; }
  // Unmarks the step (nothing if empty); the mark is empty afterwards.
  void Release();

 private:
  friend class RunTable;
  StepMark(RunTable* table, std::string id, int step)
      : table_(table), id_(std::move(id)), step_(step) {}

  RunTable* table_ = nullptr;
  std::string id_;
  int step_ = -1;
};

}  // namespace sagad
