// sagad: the saga coordinator process (see coordinator/server/server.h).
//   sagad --config FILE [--data-dir DIR] [--listen HOST:PORT] [--service NAME=URL]...
//         [--definitions DIR] [--examples]
//   sagad check [--config FILE] [--definitions DIR] [--examples]
// Prints "LISTENING <port>" on stdout once it serves. SIGTERM/SIGINT drain
// and exit 0; SIGKILL loses nothing (every transition is durable first).
// The built-in example sagas are registered only with --examples (config
// "examples": true): a production coordinator runs only what it was given.
#include <cstring>

#include "coordinator/server/server.h"
#include "examples/examples.h"

int main(int argc, char** argv) {
  const bool check = argc > 1 && std::strcmp(argv[1], "check") == 0;
  if (check) {
    argv[1] = argv[0];
    ++argv;
    --argc;
  }
  auto config = sagad::ConfigFromArgs(argc, argv);
  if (!config.ok()) return sagad::ReportUsageError(config.status());
  std::vector<sagad::SagaDefinition> sagas;
  std::vector<sagad::ToolboxDefinition> toolboxes;
  if (config->examples) {
    sagas = {sagad::IncidentResponse(), sagad::OrderFulfilment(), sagad::TripBooking()};
    toolboxes = {sagad::SocTools()};
  }
  return check ? sagad::CheckMain(*config, sagas, toolboxes)
               : sagad::RunServer(*config, sagas, toolboxes);
}
