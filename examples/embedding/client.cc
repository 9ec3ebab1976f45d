// An out-of-tree program that submits a saga with sagad::Client and waits for
// it: the same key twice gives the same instance.
//   submit_with_client URL SAGA INPUT_JSON KEY
#include "coordinator/client/client.h"

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: submit_with_client URL SAGA INPUT_JSON KEY\n";
    return 2;
  }
  sagad::ClientOptions options;
  options.url = argv[1];
  sagad::Client client(options);
  nlohmann::json input = nlohmann::json::parse(argv[3], nullptr, false);
  auto first = client.Submit(argv[2], input, argv[4], /*wait_s=*/10);
  if (!first.ok()) {
    std::cerr << first.status().ToString() << "\n";
    return 1;
  }
  auto again = client.Submit(argv[2], input, argv[4]);
  auto settled = client.Wait((*first)["id"].get<std::string>(), 10);
  if (!again.ok() || !settled.ok() || (*again)["id"] != (*first)["id"]) {
    std::cerr << "the same key gave another instance, or the wait failed\n";
    return 1;
  }
  auto refused = client.Approve((*first)["id"].get<std::string>(), "no_such_step");
  std::cout << (*settled)["status"].get<std::string>() << " "
            << sagad::StatusCodeName(refused.status().code()) << "\n";
  return 0;
}
