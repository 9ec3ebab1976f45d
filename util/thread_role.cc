#include "util/thread_role.h"

#include <pthread.h>

#include <cstdio>

#include "util/check.h"

namespace sagad {
namespace {
thread_local ThreadRole current_role = ThreadRole::kUnmarked;
}

const char* ThreadRoleName(ThreadRole role) {
  switch (role) {
    case ThreadRole::kUnmarked:
      return "unmarked";
    case ThreadRole::kCommitter:
      return "store committer";
    case ThreadRole::kHttpLoop:
      return "HTTP event loop";
    case ThreadRole::kWorker:
      return "engine worker";
  }
  return "unknown";
}

bool MustNotBlock(ThreadRole role) { return role != ThreadRole::kUnmarked; }

void MarkThread(ThreadRole role) { current_role = role; }

void NameThread(const char* name) {
  char cut[16];
  std::snprintf(cut, sizeof cut, "%s", name);
  pthread_setname_np(pthread_self(), cut);
}

ThreadRole CurrentThreadRole() { return current_role; }

void CheckMayBlock(const char* what) {
  SAGAD_CHECK(!MustNotBlock(current_role))
      << what << " on a thread that must not block (" << ThreadRoleName(current_role) << " thread)";
}

}  // namespace sagad
