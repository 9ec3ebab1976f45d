// sagad: the saga coordinator process (see coordinator/server.h).
//   sagad --config FILE [--data-dir DIR] [--listen HOST:PORT] [--service NAME=URL]...
//         [--definitions DIR]
// Prints "LISTENING <port>" on stdout once it serves. SIGTERM/SIGINT drain
// and exit 0; SIGKILL loses nothing (every transition is durable first).
#include "coordinator/server.h"
#include "examples/examples.h"

int main(int argc, char** argv) {
  auto config = sagad::ConfigFromArgs(argc, argv);
  if (!config.ok()) return sagad::ReportUsageError(config.status());
  return sagad::RunServer(*config, {sagad::IncidentResponse(), sagad::OrderFulfilment(), sagad::TripBooking()});
}
