// HttpEndpoint::Parse: what a service's base URL says, with no I/O.
#include "adapters/http_endpoint.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

TEST(HttpEndpointTest, HostPortAndPrefixAreReadAsWritten) {
  HttpEndpoint e = HttpEndpoint::Parse("https://[::1]:8443/api/v1/");
  EXPECT_TRUE(e.tls);
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, "8443");
  EXPECT_EQ(e.port_number, 8443);
  EXPECT_EQ(e.origin, "https://[::1]:8443");
  EXPECT_EQ(e.prefix, "/api/v1");
  HttpEndpoint d = HttpEndpoint::Parse("http://payments.internal");
  EXPECT_EQ(d.host, "payments.internal");
  EXPECT_EQ(d.port, "80");
  EXPECT_EQ(d.port_number, 80);
  EXPECT_EQ(d.prefix, "");
}

// The client connects to an IP literal without a name lookup only when the
// port is a number it can connect to.
TEST(HttpEndpointTest, APortIsANumberOnlyWhenItIsOne) {
  EXPECT_EQ(HttpEndpoint::Parse("http://127.0.0.1:65535").port_number, 65535);
  EXPECT_EQ(HttpEndpoint::Parse("http://127.0.0.1:65536").port_number, -1);
  EXPECT_EQ(HttpEndpoint::Parse("http://127.0.0.1:http").port_number, -1);
  EXPECT_EQ(HttpEndpoint::Parse("http://127.0.0.1:").port_number, -1);
  EXPECT_EQ(HttpEndpoint::Parse("http://127.0.0.1:99999999999").port_number, -1);
}

}  // namespace
}  // namespace sagad
