// HttpLoops: the event loops AsyncHttpClient's connections live on, where
// their handlers (and each exchange's `done`) run. Either loops of its own,
// each run by a thread of its own (named sagad-calls), or loops it is lent
// and does not run: sagad lends the engine's shard loops, so a reply is read
// on the thread that owns its instance, with no hand-off between threads.
//
// Contract:
// - Here(): the loop the calling thread runs, if it runs one of these
//   (whether the client's own or lent); else null.
// - Next(): Here(), else the next loop in turn (a step chained on a reply
//   stays on its loop).
// - Stop(): own loops stop (handlers not yet run never run) and their
//   threads are joined; lent loops are left to their owner, who stops them
//   before the client that uses them is destroyed.
// Thread-safety: Here and Next from any thread; Stop once, from the owner.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <thread>
#include <vector>

namespace sagad {

class HttpLoops {
 public:
  explicit HttpLoops(int threads);
  explicit HttpLoops(std::vector<boost::asio::io_context*> lent);
  ~HttpLoops();
  HttpLoops(const HttpLoops&) = delete;
  HttpLoops& operator=(const HttpLoops&) = delete;

  boost::asio::io_context* Here() const;
  boost::asio::io_context& Next();
  void Stop();
  bool lent() const { return own_.empty(); }

 private:
  struct Own {
    boost::asio::io_context io{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{
        boost::asio::make_work_guard(io)};
    std::thread thread;
  };
  std::vector<std::unique_ptr<Own>> own_;
  std::vector<boost::asio::io_context*> loops_;  // own or lent
  std::atomic<size_t> next_{0};
};

}  // namespace sagad
