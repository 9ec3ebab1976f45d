// The names of a process's threads, as top -H shows them
// (/proc/PID/task/*/comm): "self" for this process, else a pid.
#pragma once

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace sagad {

inline std::multiset<std::string> ThreadNames(const std::string& pid = "self") {
  std::multiset<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + pid + "/task")) {
    std::ifstream f(task.path() / "comm");
    std::string name;
    if (std::getline(f, name)) names.insert(name);
  }
  return names;
}

}  // namespace sagad
