// libFuzzer: templates. The first line is a path template, the rest a JSON
// input (and the body template is that JSON itself). Never a crash; a
// rendered path never gains a segment that is empty, "." or "..".
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sagas/template.h"
#include "util/json_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t nl = text.find('\n');
  std::string path = text.substr(0, nl);
  std::string rest = nl == std::string::npos ? "" : text.substr(nl + 1);
  if (!sagad::JsonDepthWithin(rest)) return 0;
  nlohmann::json input = nlohmann::json::parse(rest, nullptr, false);
  if (input.is_discarded()) input = nlohmann::json::object();
  sagad::TemplateContext ctx;
  ctx.input = &input;
  sagad::TemplateRefs refs;
  (void)sagad::CollectRefs(path, &refs);
  (void)sagad::CollectRefs(input, &refs);
  auto rendered = sagad::RenderPath(path, ctx);
  if (rendered.ok()) {
    // A value never makes a segment "..", "." or empty that the template
    // did not have.
    for (const char* bad : {"/../", "/./", "//"}) {
      std::string padded = "/" + *rendered + "/", tmpl = "/" + path + "/";
      if (padded.find(bad) != std::string::npos && tmpl.find(bad) == std::string::npos)
        std::abort();
    }
  }
  auto body = sagad::RenderBody(input, ctx);
  if (body.ok()) (void)sagad::DumpJson(*body);
  return 0;
}
