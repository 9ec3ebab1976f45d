#include "adapters/http_loops.h"

#include <algorithm>

#include "util/check.h"
#include "util/thread_role.h"

namespace sagad {

HttpLoops::HttpLoops(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    own_.push_back(std::make_unique<Own>());
    Own& l = *own_.back();
    loops_.push_back(&l.io);
    l.thread = std::thread([&l] {
      MarkThread(ThreadRole::kHttpLoop);
      NameThread("sagad-calls");
      l.io.run();
    });
  }
}

HttpLoops::HttpLoops(std::vector<boost::asio::io_context*> lent) : loops_(std::move(lent)) {
  SAGAD_CHECK(!loops_.empty()) << "an HTTP client needs at least one loop";
}

HttpLoops::~HttpLoops() { Stop(); }

boost::asio::io_context* HttpLoops::Here() const {
  for (boost::asio::io_context* io : loops_)
    if (io->get_executor().running_in_this_thread()) return io;
  return nullptr;
}

boost::asio::io_context& HttpLoops::Next() {
  if (boost::asio::io_context* here = Here()) return *here;
  return *loops_[next_++ % loops_.size()];
}

void HttpLoops::Stop() {
  for (auto& l : own_) {
    if (!l->thread.joinable()) continue;
    l->work.reset();
    l->io.stop();
    l->thread.join();
  }
}

}  // namespace sagad
