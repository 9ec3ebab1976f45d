// A team's own coordinator: declares its saga in C++ and runs sagad's engine
// and HTTP API from its own main. Same command line as sagad.
#include <coordinator/server/server.h>
#include <sagas/definition.h>

#include <iostream>

int main(int argc, char** argv) {
  auto config = sagad::ConfigFromArgs(argc, argv);
  if (!config.ok()) return sagad::ReportUsageError(config.status());

  auto onboarding =
      sagad::SagaBuilder("onboard_customer", 1)
          .Step("open_ticket")
          .Call("ticketing", "POST", "/tickets",
                {{"title", "Onboard {{input.customer}}"}, {"severity", "low"}})
          .Compensate("ticketing", "POST", "/tickets/{{open_ticket.ref}}/close")
          .Step("reserve_kit")
          .Call("inventory", "POST", "/reservations", {{"sku", "welcome-kit"}, {"qty", 1}})
          .Compensate("inventory", "POST", "/reservations/{{reserve_kit.ref}}/release")
          .Build();
  if (!onboarding.ok()) {
    std::cerr << onboarding.status().ToString() << "\n";
    return 1;
  }
  return sagad::RunServer(*config, {*onboarding});
}
