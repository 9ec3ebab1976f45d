// soc_tools v1: the tools an incident agent may call (docs/agents.md),
// declared with the toolbox DSL. The JSON form is
// examples/definitions/soc_tools.json (a test keeps the two equal).
#include "examples/examples.h"
#include "util/check.h"

namespace sagad {

ToolboxDefinition SocTools() {
  auto object = [](nlohmann::json properties, std::vector<std::string> required) {
    return nlohmann::json{{"type", "object"},
                          {"properties", std::move(properties)},
                          {"required", std::move(required)},
                          {"additionalProperties", false}};
  };
  const nlohmann::json text = {{"type", "string"}, {"minLength", 1}};
  auto tb =
      ToolboxBuilder("soc_tools", 1)
          .Description("Incident response: ticket, block, disable, notify")
          .InputSchema(object({{"incident", text}}, {"incident"}))
          .IdleTimeout(3600, "review")
          .SearchAttributes({"incident", "metadata.agent"})
          .Tool("create_ticket",
                "Open an incident ticket; the answer says whether the source is "
                "internal or external",
                object({{"title", text},
                        {"severity", {{"enum", {"low", "medium", "high"}}}},
                        {"source_ip", text}},
                       {"title", "severity", "source_ip"}))
          .Call("ticketing", "POST", "/tickets",
                {{"title", "{{args.title}}"},
                 {"severity", "{{args.severity}}"},
                 {"source_ip", "{{args.source_ip}}"},
                 {"incident", "{{input.incident}}"}})
          .Compensate("ticketing", "POST", "/tickets/{{result.ref}}/close")
          .Tool("block_ip", "Block an IP address at the edge", object({{"ip", text}}, {"ip"}))
          .Call("edr", "POST", "/ips/block", {{"ip", "{{args.ip}}"}})
          .Compensate("edr", "POST", "/ips/unblock", {{"ip", "{{args.ip}}"}})
          .Tool("disable_account", "Disable a user's account", object({{"user", text}}, {"user"}))
          .Call("iam", "POST", "/accounts/disable", {{"user", "{{args.user}}"}})
          .Compensate("iam", "POST", "/accounts/restore", {{"user", "{{args.user}}"}})
          .Tool("notify_user", "E-mail the user (cannot be taken back: an operator approves it)",
                object({{"to", text}, {"body", text}}, {"to", "body"}))
          .Call("mail", "POST", "/messages", {{"to", "{{args.to}}"}, {"body", "{{args.body}}"}})
          .Irreversible()
          .Build();
  SAGAD_CHECK(tb.ok()) << tb.status().ToString();
  return *tb;
}

}  // namespace sagad
