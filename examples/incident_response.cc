#include <stdexcept>

#include "examples/examples.h"

namespace sagad {

SagaDefinition IncidentResponse() {
  auto def = SagaBuilder("incident_response", 1)
                 .SearchAttributes({"user", "host"})
                 .Step("create_ticket")
                 .Call("ticketing", "POST", "/tickets",
                       {{"title", "{{input.title}}"}, {"severity", "{{input.severity}}"}})
                 .Compensate("ticketing", "POST", "/tickets/{{create_ticket.ref}}/close")
                 .Step("isolate_host")
                 .Call("edr", "POST", "/hosts/isolate", {{"host", "{{input.host}}"}})
                 .Compensate("edr", "POST", "/hosts/release", {{"host", "{{input.host}}"}})
                 .Step("disable_account")
                 .Call("iam", "POST", "/accounts/disable", {{"user", "{{input.user}}"}})
                 .Compensate("iam", "POST", "/accounts/restore", {{"user", "{{input.user}}"}})
                 .Step("notify_user")
                 .Call("mail", "POST", "/messages",
                       {{"to", "{{input.email}}"},
                        {"body",
                         "Security incident {{create_ticket.ref}} ({{input.title}}): "
                         "account {{input.user}} disabled, host {{input.host}} isolated."}})
                 .Irreversible()
                 .Build();
  if (!def.ok()) throw std::logic_error("incident_response: " + def.status().ToString());
  return *def;
}

}  // namespace sagad
