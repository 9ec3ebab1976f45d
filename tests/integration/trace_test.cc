// W3C trace context: a submission's traceparent continues into every
// downstream call (a new span id per attempt, tracestate passed through);
// without one, sagad starts a trace per instance. Checked against
// example-services, which records the headers it received.
#include <gtest/gtest.h>

#include <set>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

const std::string kTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
const std::string kParent = "00f067aa0ba902b7";

TEST(TraceTest, EveryDownstreamCallContinuesTheSubmissionsTrace) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"webhooks", {{{"url", downstream.url() + "/_webhooks"}}}}});
  ASSERT_GT(sagad.Start(), 0);
  // The charge fails before it takes effect (500: unknown), is asked about
  // (never happened) and sent again: two attempts, two spans.
  downstream.Fault({{"path", "/charges"}, {"action", "fail_before_commit"}});
  Reply r =
      Http(sagad.port(), "POST", "/v1/sagas/order_fulfilment/instances?wait=10",
           json{{"input", OrderInput()}}.dump(),
           {{"traceparent", "00-" + kTrace + "-" + kParent + "-01"}, {"tracestate", "acme=7"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["status"], "COMPLETED");
  EXPECT_EQ(r.body["trace"]["trace_id"], kTrace);
  std::string id = r.body["id"];
  json traces = Http(downstream.port(), "GET", "/_traces").body;
  std::set<std::string> spans;
  int requests = 0;
  for (const char* step : {"reserve_inventory", "charge_payment", "create_shipment"}) {
    const json& got = traces[id + ":" + step];
    ASSERT_TRUE(got.is_array() && !got.empty()) << step << ": " << traces.dump();
    for (const auto& h : got) {
      std::string tp = h["traceparent"];
      ASSERT_EQ(tp.size(), 55u) << tp;
      EXPECT_EQ(tp.substr(0, 36), "00-" + kTrace + "-") << tp;
      EXPECT_EQ(tp.substr(52), "-01");
      EXPECT_NE(tp.substr(36, 16), kParent);
      spans.insert(tp.substr(36, 16));
      EXPECT_EQ(h["tracestate"], "acme=7");
      ++requests;
    }
  }
  EXPECT_EQ(traces[id + ":charge_payment"].size(), 2u);  // refused once, then sent again
  EXPECT_EQ(spans.size(), size_t(requests));             // a new span id per attempt
  // Webhook messages carry the trace id.
  EXPECT_TRUE(WaitFor([&] {
    json d = Http(downstream.port(), "GET", "/_webhooks").body["deliveries"];
    for (const auto& x : d)
      if (json::parse(x["body"].get<std::string>()).value("trace_id", "") == kTrace) return true;
    return false;
  }));
}

TEST(TraceTest, WithoutATraceparentEachInstanceGetsATraceOfItsOwn) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  Reply a = sagad.Submit("order_fulfilment", OrderInput(), 10);
  Reply b = Http(sagad.port(), "POST", "/v1/sagas/order_fulfilment/instances?wait=10",
                 json{{"input", OrderInput()}}.dump(), {{"traceparent", "00-bogus-01"}});
  ASSERT_EQ(a.body["status"], "COMPLETED");
  ASSERT_EQ(b.body["status"], "COMPLETED");
  std::string ta = a.body["trace"]["trace_id"], tb = b.body["trace"]["trace_id"];
  EXPECT_EQ(ta.size(), 32u);
  EXPECT_NE(ta, tb);
  json traces = Http(downstream.port(), "GET", "/_traces").body;
  std::string tp = traces[a.body["id"].get<std::string>() + ":create_shipment"][0]["traceparent"];
  EXPECT_EQ(tp.substr(3, 32), ta);
}

}  // namespace
}  // namespace sagad::testing
