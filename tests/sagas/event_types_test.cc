// The log's event types besides the machines' own: one text each, parsed
// back, and frozen (stored logs hold them).
#include "sagas/event_types.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "sagas/saga_machine.h"
#include "sagas/step_machine.h"

namespace sagad {
namespace {

TEST(EventTypesTest, EveryStepNoteHasOneTextThatParsesBack) {
  std::set<std::string> seen;
  for (int k = 0; k <= static_cast<int>(kLastStepNote); ++k) {
    auto n = static_cast<StepNote>(k);
    std::string text = StepNoteName(n);
    EXPECT_TRUE(seen.insert(text).second) << text << " twice";
    StepNote back;
    ASSERT_TRUE(ParseStepNote(text, &back)) << text;
    EXPECT_EQ(back, n);
    // Never a machine event's text: Apply tells them apart by the text.
    StepEvent se;
    SagaEvent ge;
    EXPECT_FALSE(ParseStepEvent(text, &se)) << text;
    EXPECT_FALSE(ParseSagaEvent(text, &ge)) << text;
  }
  StepNote none;
  EXPECT_FALSE(ParseStepNote("started", &none));
  EXPECT_FALSE(ParseStepNote(kInstanceCreatedEvent, &none));
}

// Stored logs hold these texts: changing one would make every stored
// instance unreadable.
TEST(EventTypesTest, TheTextsAreThoseOfStoredLogs) {
  EXPECT_STREQ(StepNoteName(StepNote::kReconciled), "reconciled");
  EXPECT_STREQ(StepNoteName(StepNote::kRetryDeferred), "retry_deferred");
  EXPECT_STREQ(StepNoteName(StepNote::kRetryRequested), "retry_requested");
  EXPECT_STREQ(kInstanceCreatedEvent, "instance_created");
  EXPECT_STREQ(kCallAppendedEvent, "call_appended");
}

}  // namespace
}  // namespace sagad
