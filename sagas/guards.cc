#include "sagas/guards.h"

#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "sagas/settled.h"
#include "sagas/toolbox.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

constexpr size_t kMaxGuards = 32;

// 1-160 of [A-Za-z0-9_.-]: a guard's name is a metric label's value.
bool IsGuardName(const std::string& s) {
  if (s.empty() || s.size() > 160) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  return true;
}

std::string Number(double d) {
  std::ostringstream o;
  o << d;
  return o.str();
}

Status GuardFromJson(const nlohmann::json& j, size_t i, const std::vector<ToolDefinition>& tools,
                     Guard* g) {
  const std::string where = "guards[" + std::to_string(i) + "]";
  if (!j.is_object()) return InvalidArgument(where + " must be a JSON object");
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(
      j, {"name", "tool", "max_calls", "sum", "max", "per", "window_s", "then"}, where));
  if (!j.contains("tool") || !j["tool"].is_string())
    return InvalidArgument(where + ".tool must name one of the toolbox's tools");
  g->tool = j["tool"].get<std::string>();
  const ToolDefinition* tool = nullptr;
  for (const auto& t : tools)
    if (t.name() == g->tool) tool = &t;
  if (!tool)
    return InvalidArgument(where + ".tool: the toolbox has no tool '" + SanitizeUtf8(g->tool) +
                           "'");
  const bool counts = j.contains("max_calls"), sums = j.contains("sum");
  if (counts == sums)
    return InvalidArgument(where + " needs either max_calls or sum (with max), not " +
                           (counts ? "both" : "neither"));
  if (counts) {
    if (!j["max_calls"].is_number_integer() || j["max_calls"].get<int64_t>() < 1)
      return InvalidArgument(where + ".max_calls must be an integer >= 1");
    g->max_calls = j["max_calls"].get<int64_t>();
    if (j.contains("max")) return InvalidArgument(where + ".max goes with sum, not max_calls");
  } else {
    if (!j["sum"].is_string() || j["sum"].get<std::string>().empty())
      return InvalidArgument(where + ".sum must name a numeric argument of the tool");
    g->sum = j["sum"].get<std::string>();
    const nlohmann::json& schema = tool->arguments_schema;
    if (schema.is_object() && schema.contains("properties") &&
        !schema["properties"].contains(g->sum))
      return InvalidArgument(where + ".sum: tool '" + g->tool + "' declares no argument '" +
                             SanitizeUtf8(g->sum) + "'");
    if (!j.contains("max") || !j["max"].is_number() || !(j["max"].get<double>() >= 0))
      return InvalidArgument(where + ".max must be a number >= 0");
    g->max = j["max"].get<double>();
  }
  g->per = j.value("per", nlohmann::json("run")).is_string() ? j.value("per", "run") : "";
  if (g->per != "run" && g->per != "principal")
    return InvalidArgument(where + ".per must be \"run\" or \"principal\"");
  if (j.contains("window_s")) {
    if (!j["window_s"].is_number_integer() || j["window_s"].get<int64_t>() < 1 ||
        j["window_s"].get<int64_t>() > 366LL * 86400)
      return InvalidArgument(where + ".window_s must be an integer of seconds, 1..31622400");
    g->window_s = j["window_s"].get<int64_t>();
  }
  const nlohmann::json then = j.value("then", nlohmann::json("refuse"));
  if (then != "refuse" && then != "approval")
    return InvalidArgument(where + ".then must be \"refuse\" or \"approval\"");
  g->approval = then == "approval";
  if (j.contains("name")) {
    if (!j["name"].is_string() || !IsGuardName(j["name"].get<std::string>()))
      return InvalidArgument(where + ".name must be 1-160 of [A-Za-z0-9_.-]");
    g->name = j["name"].get<std::string>();
  } else {
    g->name = g->tool + "." + (counts ? "max_calls" : "sum_" + g->sum) + "." + g->per;
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json Guard::ToJson() const {
  nlohmann::json j = {{"name", name}, {"tool", tool}, {"per", per}};
  if (max_calls > 0) j["max_calls"] = max_calls;
  if (!sum.empty()) {
    j["sum"] = sum;
    j["max"] = max;
  }
  if (window_s > 0) j["window_s"] = window_s;
  j["then"] = approval ? "approval" : "refuse";
  return j;
}

Status GuardsFromJson(const nlohmann::json& toolbox, const std::vector<ToolDefinition>& tools,
                      std::vector<Guard>* out) {
  out->clear();
  if (!toolbox.contains("guards") || toolbox["guards"].is_null()) return Status::Ok();
  const nlohmann::json& list = toolbox["guards"];
  if (!list.is_array()) return InvalidArgument("guards must be an array of guards");
  if (list.size() > kMaxGuards)
    return InvalidArgument("guards: at most " + std::to_string(kMaxGuards) + " per toolbox");
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    Guard g;
    SAGAD_RETURN_IF_ERROR(GuardFromJson(list[i], i, tools, &g));
    if (!names.insert(g.name).second)
      return InvalidArgument("guards[" + std::to_string(i) + "]: another guard is named '" +
                             g.name + "' (give each a \"name\")");
    out->push_back(std::move(g));
  }
  return Status::Ok();
}

StatusOr<std::string> OverGuard(const Guard& g, const std::vector<GuardedCall>& made,
                                const std::string& tool, const nlohmann::json& arguments,
                                int64_t now_ms) {
  if (tool != g.tool) return std::string();
  const int64_t since = g.window_s > 0 ? now_ms - g.window_s * 1000 : INT64_MIN;
  auto amount = [&](const nlohmann::json& args) -> double {
    if (!args.is_object() || !args.contains(g.sum) || !args[g.sum].is_number()) return NAN;
    return args[g.sum].get<double>();
  };
  const double mine = g.sum.empty() ? 0 : amount(arguments);
  if (!g.sum.empty() && std::isnan(mine))
    return InvalidArgument("guard '" + g.name + "' sums argument '" + g.sum +
                           "': the call's must be a number");
  int64_t count = 0;
  double total = 0;
  for (const GuardedCall& c : made) {
    if (c.tool != g.tool || !CallCounted(c.status) || c.appended_at < since) continue;
    ++count;
    if (!g.sum.empty()) {
      double a = amount(c.arguments);
      if (!std::isnan(a)) total += a;
    }
  }
  const std::string scope =
      (g.per_principal() ? "this principal's runs" : "this run") +
      (g.window_s > 0 ? " in the last " + std::to_string(g.window_s) + " s" : std::string());
  if (g.max_calls > 0 && count + 1 > g.max_calls)
    return "guard '" + g.name + "': " + std::to_string(count) + " call" + (count == 1 ? "" : "s") +
           " of '" + g.tool + "' in " + scope +
           " (counting those in flight and unclear), at most " + std::to_string(g.max_calls);
  if (!g.sum.empty() && total + mine > g.max)
    return "guard '" + g.name + "': " + g.sum + " " + Number(mine) + " on top of " + Number(total) +
           " in " + scope + " (counting calls in flight and unclear) is over " + Number(g.max);
  return std::string();
}

}  // namespace sagad
