#include "adapters/trace_context.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

TEST(TraceContextTest, AValidTraceparentIsContinuedWithItsState) {
  TraceContext t =
      TraceFromHeaders("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "v=1");
  EXPECT_EQ(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t.parent_span_id, "00f067aa0ba902b7");
  EXPECT_EQ(t.flags, "01");
  EXPECT_EQ(t.tracestate, "v=1");
  std::string a = OutgoingTraceparent(t), b = OutgoingTraceparent(t);
  EXPECT_EQ(a.substr(0, 36), "00-4bf92f3577b34da6a3ce929d0e0e4736-");
  EXPECT_EQ(a.size(), 55u);
  EXPECT_NE(a.substr(36, 16), b.substr(36, 16));  // a new span id per call
  EXPECT_NE(a.substr(36, 16), t.parent_span_id);
  EXPECT_EQ(a.substr(52), "-01");
  // A later version may carry more fields.
  EXPECT_EQ(
      TraceFromHeaders("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz", "").trace_id,
      "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(TraceContextTest, AMissingOrMalformedTraceparentStartsANewTrace) {
  for (const char* bad : {"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                          "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                          "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"}) {
    TraceContext t = TraceFromHeaders(bad, "dropped=1");
    EXPECT_EQ(t.trace_id.size(), 32u) << bad;
    EXPECT_NE(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736") << bad;
    EXPECT_TRUE(t.parent_span_id.empty()) << bad;
    EXPECT_TRUE(t.tracestate.empty()) << bad;
  }
  EXPECT_NE(TraceFromHeaders("", "").trace_id, TraceFromHeaders("", "").trace_id);
  TraceContext back = TraceContext::FromJson(TraceFromHeaders("", "").ToJson());
  EXPECT_EQ(back.trace_id.size(), 32u);
}

}  // namespace
}  // namespace sagad
