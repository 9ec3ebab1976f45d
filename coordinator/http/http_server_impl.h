// HttpServer::Impl: the server's listener, connection caps, handlers' runner
// and loop chores
// (internal to coordinator/http; Boost.Beast stays behind http_server.h).
// http_server.cc holds the listener and the refusal of connections over the
// caps, http_session.cc one connection's life (HttpServer::Impl::Session).
#pragma once

#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "coordinator/http/http_server.h"
#include "util/in_flight.h"
#include "util/mutex.h"
#include "util/thread_role.h"

namespace sagad {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, Handler handler, ErrorHandler errors)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        errors_(std::move(errors)),
        acceptor_(io_),
        retry_(io_) {
    if (!options_.run_handler)
      pool_.emplace(static_cast<size_t>(std::max(1, options_.handler_threads)));
  }

  ~Impl() { Stop(); }

  Status Init() {
    if (options_.tls_cert_file.empty()) return Status::Ok();
    error_code ec;
    ssl_.emplace(net::ssl::context::tls_server);
    ssl_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                          net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                          net::ssl::context::no_tlsv1_1,
                      ec);
    ssl_->use_certificate_chain_file(options_.tls_cert_file, ec);
    if (!ec) ssl_->use_private_key_file(options_.tls_key_file, net::ssl::context::pem, ec);
    if (ec)
      return InvalidArgument("cannot serve HTTPS with tls.cert_file " + options_.tls_cert_file +
                             " and tls.key_file " + options_.tls_key_file +
                             " (not a certificate and its private key in PEM?): " + ec.message());
    tls_ = true;
    return Status::Ok();
  }

  StatusOr<int> Bind(const std::string& host, int port) {
    error_code ec;
    auto addr = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    if (ec) {
      tcp::resolver resolver(io_);
      auto results = resolver.resolve(host, std::to_string(port), ec);
      if (ec || results.empty()) return Unavailable("cannot resolve " + host);
      addr = results.begin()->endpoint().address();
    }
    tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(options_.backlog, ec);
    if (ec)
      return Unavailable("cannot bind " + host + ":" + std::to_string(port) + ": " + ec.message());
    auto bound = acceptor_.local_endpoint(ec);
    if (ec) return Unavailable("cannot bind " + host + ": " + ec.message());
    loopback_ =
        bound.address().is_loopback() ||
        (bound.address().is_v6() && bound.address().to_v6().is_v4_mapped() &&
         net::ip::make_address_v4(net::ip::v4_mapped, bound.address().to_v6()).is_loopback());
    return static_cast<int>(bound.port());
  }

  bool BoundToLoopback() const { return loopback_; }

  void StopAccepting() {
    draining_ = true;
    net::post(io_, [this] {
      error_code ec;
      acceptor_.close(ec);
      retry_.cancel();
    });
  }

  bool WaitIdle(std::chrono::milliseconds timeout) {
    MutexLock l(conn_mu_);
    return idle_cv_.WaitFor(conn_mu_, timeout,
                            [this]() REQUIRES(conn_mu_) { return serving_ == 0; });
  }

  void OnLoopEvery(std::chrono::milliseconds every, std::function<void()> fn) {
    chores_.push_back(std::make_unique<net::steady_timer>(io_));
    Chore(*chores_.back(), every, std::make_shared<std::function<void()>>(std::move(fn)));
  }

  void OnReadable(int fd, std::function<void()> readable) {
    // A copy of the descriptor: the stream closes its own, the caller keeps fd.
    watched_.push_back(std::make_unique<net::posix::stream_descriptor>(io_, ::dup(fd)));
    Watch(*watched_.back(), std::make_shared<std::function<void()>>(std::move(readable)));
  }

  void Serve() {
    Accept();
    std::vector<std::thread> extra;
    for (int i = 1; i < options_.io_threads; ++i)
      extra.emplace_back([this] {
        MarkThread(ThreadRole::kHttpLoop);
        NameThread("sagad-api");
        io_.run();
      });
    ScopedThreadRole role(ThreadRole::kHttpLoop);
    // The process's main thread keeps the process's name (ps, pidof).
    if (::getpid() != static_cast<pid_t>(::gettid())) NameThread("sagad-api");
    io_.run();
    for (auto& t : extra) t.join();
  }

  void Stop() {
    draining_ = true;
    if (stopped_.exchange(true)) return;
    net::post(io_, [this] {
      error_code ec;
      acceptor_.close(ec);
      retry_.cancel();
    });
    io_.stop();
    // The handlers under way end before anything they use goes.
    in_handlers_.WaitNone();
    if (pool_) pool_->join();
  }

  size_t open_connections() const {
    MutexLock l(conn_mu_);
    return total_;
  }

  // ---- used by sessions ----
  const HttpServerOptions& options() const { return options_; }
  void RunHandler(HttpRequest& req, HttpResponse& res) { handler_(req, res); }
  void Error(const HttpRequest& req, HttpResponse& res, int status, const std::string& detail) {
    errors_(req, res, status, detail);
  }
  // Runs `task` (a request's handler) where handlers run, never inside.
  void Handle(std::function<void()> task) {
    in_handlers_.Begin();
    auto counted = [this, task = std::move(task)] {
      task();
      in_handlers_.End();
    };
    if (pool_) return net::post(*pool_, std::move(counted));
    options_.run_handler(std::move(counted));
  }
  bool draining() const { return draining_; }
  // A request is being served from dispatch until its answer is written.
  void Serving(bool begin) {
    MutexLock l(conn_mu_);
    serving_ += begin ? 1 : -1;
    if (serving_ == 0) idle_cv_.NotifyAll();
  }
  void Release(const std::string& remote) {
    MutexLock l(conn_mu_);
    --total_;
    auto it = per_client_.find(remote);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
  }

 private:
  template <class Stream>
  class Session;

  void Chore(net::steady_timer& timer, std::chrono::milliseconds every,
             std::shared_ptr<std::function<void()>> fn) {
    timer.expires_after(every);
    timer.async_wait([this, &timer, every, fn](error_code ec) {
      if (ec || stopped_) return;
      (*fn)();
      Chore(timer, every, fn);
    });
  }

  void Watch(net::posix::stream_descriptor& fd, std::shared_ptr<std::function<void()>> fn) {
    fd.async_wait(net::posix::stream_descriptor::wait_read, [this, &fd, fn](error_code ec) {
      if (ec || stopped_) return;
      (*fn)();
      Watch(fd, fn);
    });
  }

  void Accept() {
    acceptor_.async_accept(net::make_strand(io_), [this](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || stopped_) return;
      if (ec) {  // out of file descriptors or the like: try again shortly, do not spin
        retry_.expires_after(std::chrono::milliseconds(50));
        retry_.async_wait([this](error_code e) {
          if (!e) Accept();
        });
        return;
      }
      OnAccept(std::move(socket));
      Accept();
    });
  }

  void OnAccept(tcp::socket socket) {
    error_code ec;
    auto remote = socket.remote_endpoint(ec);
    if (ec) return;
    socket.set_option(tcp::no_delay(true), ec);
    std::string addr = remote.address().to_string();
    bool over = false;
    {
      MutexLock l(conn_mu_);
      size_t& mine = per_client_[addr];
      if (total_ >= options_.max_connections || mine >= options_.max_connections_per_client) {
        over = true;
        if (mine == 0) per_client_.erase(addr);
      } else {
        ++total_;
        ++mine;
      }
    }
    if (over) return Busy(std::move(socket));
    StartSession(std::move(socket), addr);
  }

  // Too many connections: a short 503, then close (http_server.cc).
  void Busy(tcp::socket socket);

  void StartSession(tcp::socket socket, const std::string& addr);

  HttpServerOptions options_;
  Handler handler_;
  ErrorHandler errors_;
  std::optional<net::ssl::context> ssl_;  // with TLS only (Init): costly to make
  bool tls_ = false;
  // Before io_: sessions still queued in io_ are destroyed with it and
  // give their connection back here.
  mutable Mutex conn_mu_;
  size_t total_ GUARDED_BY(conn_mu_) = 0;
  int64_t serving_ GUARDED_BY(conn_mu_) = 0;
  CondVar idle_cv_;
  std::unordered_map<std::string, size_t> per_client_ GUARDED_BY(conn_mu_);
  std::atomic<bool> stopped_{false};
  std::atomic<bool> draining_{false};
  bool loopback_ = false;
  net::io_context io_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_;
  // The loop's chores (OnLoopEvery, OnReadable): set before Serve.
  std::vector<std::unique_ptr<net::steady_timer>> chores_;
  std::vector<std::unique_ptr<net::posix::stream_descriptor>> watched_;
  InFlight in_handlers_;                  // handlers begun and not ended
  std::optional<net::thread_pool> pool_;  // without run_handler
};

}  // namespace sagad
