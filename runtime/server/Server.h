// weft-serve's HTTP layer: OpenAI-compatible routes over a scheduler that
// one engine thread steps, server-sent event streams, Prometheus metrics,
// an API key, a bounded queue, cancellation of requests whose client left,
// and a drain on shutdown.
#ifndef WEFT_RUNTIME_SERVER_SERVER_H_
#define WEFT_RUNTIME_SERVER_SERVER_H_

#include "runtime/base/Status.h"
#include "runtime/chat/ChatTemplateSource.h"
#include "runtime/server/OpenAi.h"
#include "runtime/serve/Scheduler.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace weft::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;               // 0: any free port (see Server::port)
  std::string modelName = "weft"; // what /v1/models lists and requests name
  std::string apiKey;            // empty: no authentication
  // Requests admitted (running or waiting in the scheduler) before new ones
  // get 429.
  int maxRequests = 1024;
  int httpThreads = 320;         // connections served at once (streams hold one)
  double drainSeconds = 30;      // on stop: finish in-flight requests this long
  RequestLimits limits;
  std::vector<int32_t> stopTokens; // end of sequence ids
  // /v1/chat/completions renders messages with this template (the plan's,
  // or weft-serve --chat-template); without one the route answers 400.
  const chat::LoadedChatTemplate *chat = nullptr;
  serve::SchedulerOptions scheduler;
};

// The options of the listening socket: SO_REUSEADDR (not SO_REUSEPORT:
// a second server must fail on a busy port) and TCP_NODELAY, which the
// connections it accepts inherit (streams write one small event a token).
void setListenSocketOptions(int socket);

class Server {
public:
  // `runner` and `tokenizer` must outlive the server; without a tokenizer,
  // prompts must be token ids and answers carry no text.
  static StatusOr<std::unique_ptr<Server>> create(serve::StepRunner &runner,
                                                  const tokenizer::Tokenizer *tokenizer,
                                                  ServerOptions options);
  ~Server();

  // Binds and serves on background threads; returns once listening.
  Status start();
  int port() const;
  // Stops accepting connections; requests in flight finish within
  // drainSeconds, then the rest are cancelled; returns when all threads
  // have stopped. Safe to call more than once and from any thread.
  void stop();
  // Blocks until stop() has completed.
  void wait();
  // The engine thread's error, if a step failed (the server stops serving).
  Status engineStatus() const;

  struct Impl;

private:
  Server();
  std::unique_ptr<Impl> impl_;
};

} // namespace weft::server

#endif // WEFT_RUNTIME_SERVER_SERVER_H_
