// The sagad process in a few calls, for the stock binary and for teams that
// embed the coordinator in their own main():
//
//   int main(int argc, char** argv) {
//     auto config = sagad::ConfigFromArgs(argc, argv);   // --config, --listen, ...
//     if (!config.ok()) return sagad::ReportUsageError(config.status());
//     auto saga = sagad::SagaBuilder("greet", 1).Step(...)...Build();
//     return sagad::RunServer(*config, {*saga});
//   }
#pragma once

#include <vector>

#include "coordinator/server/config.h"
#include "coordinator/store/store.h"
#include "sagas/definition.h"
#include "sagas/toolbox.h"

namespace sagad {

// Parses the sagad command line: --config FILE, --data-dir DIR,
// --store postgresql://..., --listen HOST:PORT, --service NAME=URL (repeatable), --definitions DIR
// (flags override the file). InvalidArgument with a one-line reason. For
// --help, a Config with `help` set and nothing else (RunServer and CheckMain
// then print kSagadUsage and return 0).
StatusOr<Config> ConfigFromArgs(int argc, char** argv);
extern const char* const kSagadUsage;

// Prints the error on stderr and returns the exit code (2).
int ReportUsageError(const Status& s);

// The store the config names: PostgreSQL for a postgresql:// URI in
// config.store (an unreachable database is retried for 30 s), else LMDB in
// config.data_dir.
StatusOr<StorePtr> OpenStore(const Config& config);

// `sagas` and the JSON ones of config.definitions_dir, each validated, with
// every service they call configured; InvalidArgument naming the file, or
// the saga, step and service. The toolboxes of that dir are added to
// *toolboxes (if given), which are checked the same way.
StatusOr<std::vector<SagaDefinition>> CollectDefinitions(
    const Config& config, const std::vector<SagaDefinition>& sagas,
    std::vector<ToolboxDefinition>* toolboxes = nullptr);

// `sagad check`: validates the config and every definition and service
// reference, prints each saga's steps and each toolbox's tools; 0, or 2 with
// the problem on stderr. Opens no store, listens on nothing, writes nothing.
int CheckMain(const Config& config, const std::vector<SagaDefinition>& sagas,
              std::vector<ToolboxDefinition> toolboxes = {});

// Opens the store, registers `sagas` and `toolboxes` (and the JSON ones of
// config.definitions_dir), recovers, serves the HTTP API, prints
// "LISTENING <port>", and runs until SIGTERM/SIGINT; then drains and returns
// 0. Returns 1 (with a message on stderr) if it cannot start.
int RunServer(const Config& config, const std::vector<SagaDefinition>& sagas,
              std::vector<ToolboxDefinition> toolboxes = {});

}  // namespace sagad
