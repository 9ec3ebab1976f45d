// The rule "a thread that serves everyone never waits" is an assertion that
// stays on: a blocking commit or downstream call on such a thread aborts,
// naming the thread's role.
#include "util/thread_role.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "coordinator/store/group_commit.h"

namespace sagad {
namespace {

// What /proc shows as the calling thread's name.
std::string ThisThreadsName() {
  std::ifstream f("/proc/self/task/" + std::to_string(::gettid()) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

TEST(ThreadRoleTest, ANamedThreadShowsItsNameCutTo15Bytes) {
  std::string seen, cut;
  std::thread([&] {
    NameThread("sagad-test");
    seen = ThisThreadsName();
    NameThread("sagad-a-name-longer-than-fifteen");
    cut = ThisThreadsName();
  }).join();
  EXPECT_EQ(seen, "sagad-test");
  EXPECT_EQ(cut, "sagad-a-name-lo");
}

TEST(ThreadRoleTest, AThreadIsUnmarkedUntilItIsMarked) {
  std::thread([] {
    EXPECT_EQ(CurrentThreadRole(), ThreadRole::kUnmarked);
    CheckMayBlock("a wait");  // allowed
    {
      ScopedThreadRole role(ThreadRole::kWorker);
      EXPECT_EQ(CurrentThreadRole(), ThreadRole::kWorker);
    }
    EXPECT_EQ(CurrentThreadRole(), ThreadRole::kUnmarked);
  }).join();
}

TEST(ThreadRoleDeathTest, ABlockingWaitOnAThreadThatMustNotBlockAbortsNamingTheRole) {
  for (ThreadRole role : {ThreadRole::kCommitter, ThreadRole::kHttpLoop, ThreadRole::kWorker}) {
    EXPECT_DEATH(
        {
          MarkThread(role);
          CheckMayBlock("a blocking store commit");
        },
        std::string("a blocking store commit on a thread that must not block \\(") +
            ThreadRoleName(role) + " thread\\)");
  }
}

TEST(ThreadRoleDeathTest, ABlockingCommitFromACommitsContinuationAborts) {
  // The keyed-wait hang: a continuation, on the committer thread, commits
  // with a blocking write that only the committer could lead.
  EXPECT_DEATH(
      {
        GroupCommit* group = nullptr;
        GroupCommit g([](const std::vector<GroupCommit::Write*>& batch) {
          for (auto* w : batch) w->result = Status::Ok();
        });
        group = &g;
        auto first = std::make_unique<GroupCommit::Write>();
        first->then = [group](Status) {
          GroupCommit::Write again;
          (void)group->Commit(again);
        };
        g.CommitAsync(std::move(first));
        g.Stop();
      },
      "a blocking store commit on a thread that must not block \\(store committer thread\\)");
}

TEST(ThreadRoleTest, ABlockingCommitOnAnUnmarkedThreadIsWritten) {
  GroupCommit g([](const std::vector<GroupCommit::Write*>& batch) {
    for (auto* w : batch) w->result = Status::Ok();
  });
  GroupCommit::Write w;
  EXPECT_TRUE(g.Commit(w).ok());
}

}  // namespace
}  // namespace sagad
