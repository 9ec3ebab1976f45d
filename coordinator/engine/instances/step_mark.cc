#include "coordinator/engine/instances/step_mark.h"

#include "coordinator/engine/instances/run_table.h"

namespace sagad {

StepMark::StepMark(StepMark&& other) noexcept
    : table_(other.table_), id_(std::move(other.id_)), step_(other.step_) {
  other.table_ = nullptr;
  other.step_ = -1;
}

StepMark& StepMark::operator=(StepMark&& other) noexcept {
  if (this == &other) return *this;
  Release();
  table_ = other.table_;
  id_ = std::move(other.id_);
  step_ = other.step_;
  other.table_ = nullptr;
  other.step_ = -1;
  return *this;
}

void StepMark::Release() {
  RunTable* table = table_;
  if (!table) return;
  table_ = nullptr;
  table->UnmarkStep(id_, step_);
  step_ = -1;
}

}  // namespace sagad
