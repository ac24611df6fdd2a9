// weft-serve's HTTP layer (see Server.h): routes, the engine thread,
// streams, metrics and shutdown.
#include "runtime/server/Server.h"

#include "runtime/server/Metrics.h"
#include "runtime/tokenizer/TextStream.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace weft::server {

namespace {

using Clock = std::chrono::steady_clock;
using tokenizer::TextState;
using tokenizer::updateText;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t unixTime() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the engine thread tells one request's HTTP handler.
struct Channel {
  std::mutex m;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs; // with each token, when asked for
  int cachedPromptTokens = 0;         // from the prefix cache, with the first token
  serve::Finish finish = serve::Finish::None;
  bool ended = false;
  Clock::time_point submitted, last;
};

} // namespace

struct Server::Impl {
  serve::StepRunner &runner;
  const tokenizer::Tokenizer *tok;
  ServerOptions opt;
  std::unique_ptr<serve::Scheduler> scheduler;
  httplib::Server http;
  std::thread httpThread, engineThread;
  int boundPort = 0;
  int listenSocket = -1;

  std::mutex workMutex;
  std::condition_variable workCv;
  bool engineStop = false;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};

  std::mutex activeMutex;
  std::map<uint64_t, std::shared_ptr<Channel>> active; // requests not yet ended
  std::condition_variable activeCv;

  mutable std::mutex errorMutex;
  Status engineError = Status::ok();
  // The scheduler's latest state, for /metrics.
  mutable std::mutex statsMutex;
  serve::SchedulerStats stats;
  std::atomic<uint64_t> serial{0};
  Metrics metrics;

  std::mutex stopMutex;
  bool stopped = false, done = false;
  std::condition_variable stoppedCv;

  Impl(serve::StepRunner &r, const tokenizer::Tokenizer *t, ServerOptions o)
      : runner(r), tok(t), opt(std::move(o)) {}

  bool engineFailed() const { return !engineStatus().isOk(); }

  // The engine thread: steps while there is work, sleeps otherwise.
  void engineLoop() {
    while (true) {
      {
        std::unique_lock<std::mutex> l(workMutex);
        workCv.wait(l, [&] { return engineStop || !scheduler->idle(); });
        if (engineStop && scheduler->idle())
          return;
      }
      Status s = scheduler->step();
      {
        std::lock_guard<std::mutex> l(statsMutex);
        stats = scheduler->stats();
      }
      if (!s.isOk()) {
        std::lock_guard<std::mutex> l(errorMutex);
        engineError = s;
        return; // every request heard Cancelled; new ones get 503
      }
    }
  }

  void wake() {
    std::lock_guard<std::mutex> l(workMutex);
    workCv.notify_all();
  }

  static void sendError(httplib::Response &res, const ApiError &e) {
    res.status = e.status;
    res.set_content(e.json(), "application/json");
  }

  static ApiError error(int status, std::string message, std::string type,
                        std::string code = "") {
    ApiError e;
    e.status = status;
    e.message = std::move(message);
    e.type = std::move(type);
    e.code = std::move(code);
    return e;
  }
  // A 400 for one request field: OpenAI's invalid_request_error naming it.
  static ApiError fieldError(std::string message, std::string param, std::string code = "") {
    ApiError e = error(400, std::move(message), "invalid_request_error", std::move(code));
    e.param = std::move(param);
    return e;
  }


  bool authorized(const httplib::Request &req, httplib::Response &res) {
    if (opt.apiKey.empty())
      return true;
    std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + opt.apiKey)
      return true;
    sendError(res, error(401, auth.empty() ? "missing API key (Authorization: Bearer ...)"
                                           : "invalid API key",
                         "authentication_error", "invalid_api_key"));
    return false;
  }

  void completions(const httplib::Request &req, httplib::Response &res, bool chat) {
    if (!authorized(req, res))
      return;
    if (stopping || engineFailed()) {
      sendError(res, error(503, stopping ? "the server is shutting down"
                                         : "the engine failed: " + engineStatus().message(),
                           "server_error", "unavailable"));
      return;
    }
    auto parsed = std::make_shared<CompletionRequest>();
    if (std::optional<ApiError> e = parseCompletionRequest(req.body, chat, opt.limits, *parsed))
      return sendError(res, *e);
    CompletionRequest &r = *parsed;
    if (r.model != opt.modelName) {
      return sendError(res, fieldError("model '" + r.model +
                                           "' is not served here; this server has '" +
                                           opt.modelName + "'",
                                       "model", "model_not_found"));
    }
    std::vector<int32_t> prompt;
    if (chat) {
      if (!opt.chat || !opt.chat->chatTemplate || !tok) {
        sendError(res, error(400, std::string("this server has no ") +
                                      (tok ? "chat template" : "tokenizer") +
                                      " (weft-serve --chat-template FILE): use /v1/completions",
                             "invalid_request_error"));
        return;
      }
      std::vector<chat::ChatTurn> turns;
      for (const ChatMessage &m : r.messages)
        turns.push_back({m.role, m.content});
      StatusOr<std::string> text = chat::renderConversation(*opt.chat, turns);
      if (!text.isOk()) {
        return sendError(res, fieldError("the chat template refused the conversation: " +
                                             text.status().message(),
                                         "messages"));
      }
      // The template writes the special tokens itself.
      StatusOr<std::vector<int32_t>> ids = tok->encode(*text, false);
      if (!ids.isOk()) {
        return sendError(res, fieldError("messages: " + ids.status().message(), "messages"));
      }
      prompt = std::move(ids.value());
      if (r.maxTokens == 0) // up to the end of the context
        r.maxTokens = std::max(1, runner.kvLayout().maxContext() - int(prompt.size()) + 1);
    } else if (r.promptIsIds) {
      prompt = r.promptIds;
    } else {
      if (!tok) {
        return sendError(res, fieldError("this plan carries no tokenizer: give the prompt as "
                                         "token ids",
                                         "prompt"));
      }
      StatusOr<std::vector<int32_t>> ids = tok->encode(r.promptText, true);
      if (!ids.isOk()) {
        return sendError(res, fieldError("prompt: " + ids.status().message(), "prompt"));
      }
      prompt = std::move(ids.value());
    }
    int context = runner.kvLayout().maxContext();
    const std::string promptParam = chat ? "messages" : "prompt";
    if (prompt.empty()) {
      return sendError(res, fieldError("the prompt is empty", promptParam));
    }
    if (int64_t(prompt.size()) > context) { // the prompt alone, whatever max_tokens is
      return sendError(res, fieldError("the prompt has " + std::to_string(prompt.size()) +
                                           " tokens, more than the context of " +
                                           std::to_string(context),
                                       promptParam, "context_length_exceeded"));
    }
    if (int64_t(prompt.size()) + r.maxTokens - 1 > context) {
      return sendError(res, fieldError("the prompt has " + std::to_string(prompt.size()) +
                                           " tokens; with " + r.maxTokensParam + " " +
                                           std::to_string(r.maxTokens) +
                                           " that is more than the context of " +
                                           std::to_string(context),
                                       r.maxTokensParam, "context_length_exceeded"));
    }
    if (!r.stop.empty() && !tok) {
      return sendError(res, fieldError("'stop' needs a tokenizer to see the text, and this "
                                       "plan carries none (weft-serve --tokenizer FILE)",
                                       "stop"));
    }
    // At temperature 0 the token is the argmax whatever top_k and top_p
    // say (it is always inside both cuts): clients that send their usual
    // top_p with temperature 0 get greedy decoding, on any plan.
    if (r.sampling.temperature == 0) {
      r.sampling.topK = 0;
      r.sampling.topP = 1;
    }
    if (!r.sampling.greedy() && !runner.samples()) {
      return sendError(res, fieldError("this plan picks tokens by argmax (weft-compile "
                                       "--sampling=false) and cannot sample: send temperature 0 "
                                       "(when left out it is 1)",
                                       "temperature"));
    }
    {
      std::lock_guard<std::mutex> l(activeMutex);
      if (int(active.size()) >= opt.maxRequests) {
        res.set_header("Retry-After", "1");
        sendError(res, error(429, "the server is at its limit of " +
                                      std::to_string(opt.maxRequests) +
                                      " requests in flight; try again later",
                             "rate_limit_error", "too_many_requests"));
        return;
      }
    }
    auto channel = std::make_shared<Channel>();
    channel->submitted = Clock::now();
    serve::Request sr;
    sr.prompt = prompt;
    sr.maxTokens = r.maxTokens;
    sr.sampling = r.sampling;
    sr.stopTokens = opt.stopTokens;
    sr.stopStrings = r.stop;
    sr.topLogprobs = r.logprobs;
    bool wantLogprobs = r.logprobs >= 0;
    int promptTokens = int(prompt.size());
    sr.onEvent = [this, channel, promptTokens, wantLogprobs](const serve::Event &e) {
      auto now = Clock::now();
      std::lock_guard<std::mutex> l(channel->m);
      if (e.token >= 0) {
        if (channel->tokens.empty()) {
          metrics.observeFirstToken(seconds(now - channel->submitted));
          channel->cachedPromptTokens = e.cachedPromptTokens;
        }
        else
          metrics.observeInterToken(seconds(now - channel->last));
        channel->tokens.push_back(e.token);
        if (wantLogprobs)
          channel->logprobs.push_back({e.token, e.logprob, e.topLogprobs});
        channel->last = now;
      }
      if (e.finish != serve::Finish::None) {
        channel->finish = e.finish;
        channel->ended = true;
        metrics.observeEnd(seconds(now - channel->submitted), promptTokens,
                           int(channel->tokens.size()), finishReasonName(e.finish));
      }
      channel->cv.notify_all();
    };
    StatusOr<uint64_t> id = scheduler->submit(std::move(sr));
    if (!id.isOk()) {
      // The request's fault, or the engine's (it failed since the check
      // above: no step will run anything).
      const StatusCode code = id.status().code();
      if (code == StatusCode::kInvalidArgument || code == StatusCode::kFailedPrecondition)
        return sendError(res, error(400, id.status().message(), "invalid_request_error"));
      return sendError(res, error(503, id.status().message(), "server_error", "unavailable"));
    }
    {
      std::lock_guard<std::mutex> l(activeMutex);
      active[*id] = channel;
    }
    wake();
    std::string cid = completionId(chat, ++serial);
    int64_t created = unixTime();
    uint64_t requestId = *id;

    if (!r.stream) {
      {
        std::unique_lock<std::mutex> l(channel->m);
        channel->cv.wait(l, [&] { return channel->ended; });
      }
      finished(requestId);
      if (channel->finish == serve::Finish::Cancelled && engineFailed())
        return sendError(res, error(500, "the engine failed: " + engineStatus().message(),
                                    "server_error", "engine_failed"));
      TextState t;
      t.tokens = channel->tokens;
      updateText(tok, r.stop, true, t);
      Usage u{promptTokens, int(channel->tokens.size()), channel->cachedPromptTokens};
      nlohmann::json lp = wantLogprobs ? logprobsJson(r, channel->logprobs, tokenText(), 0)
                                       : nlohmann::json(nullptr);
      res.set_content(completionJson(r, cid, created, opt.modelName, t.text,
                                     finishReasonName(channel->finish), u, lp),
                      "application/json");
      return;
    }

    // The stream's state, touched only by the content provider.
    struct StreamState {
      TextState text;
      bool first = true;
      size_t logprobsSent = 0, textOffset = 0;
    };
    auto state = std::make_shared<StreamState>();
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, parsed, channel, state, cid, created, promptTokens,
         wantLogprobs](size_t, httplib::DataSink &sink) {
          bool ended;
          serve::Finish finish;
          int cached = 0;
          std::vector<TokenLogprob> newLogprobs;
          TextState &text = state->text;
          {
            std::unique_lock<std::mutex> l(channel->m);
            channel->cv.wait_for(l, std::chrono::milliseconds(200), [&] {
              return channel->ended || channel->tokens.size() > text.tokens.size();
            });
            // Only what is new is copied.
            text.tokens.insert(text.tokens.end(),
                               channel->tokens.begin() + long(text.tokens.size()),
                               channel->tokens.end());
            newLogprobs.assign(channel->logprobs.begin() + long(state->logprobsSent),
                               channel->logprobs.end());
            ended = channel->ended;
            finish = channel->finish;
            cached = channel->cachedPromptTokens;
          }
          size_t tokens = text.tokens.size();
          updateText(tok, parsed->stop, ended, text);
          std::string out;
          if (text.ready > text.sent || state->first || !newLogprobs.empty()) {
            nlohmann::json lp = nullptr;
            if (wantLogprobs) {
              lp = logprobsJson(*parsed, newLogprobs, tokenText(), state->textOffset,
                                &state->textOffset, lastTokens(text.tokens, state->logprobsSent));
              state->logprobsSent += newLogprobs.size();
            }
            out += streamChunk(*parsed, cid, created, opt.modelName,
                               text.text.substr(text.sent, text.ready - text.sent), nullptr,
                               state->first, lp);
            text.sent = text.ready;
            state->first = false;
          }
          if (ended && finish == serve::Finish::Cancelled && engineFailed()) {
            // The status line is sent: the failure goes as an error event,
            // which OpenAI clients raise.
            out += "data: " +
                   error(500, "the engine failed: " + engineStatus().message(), "server_error",
                         "engine_failed")
                       .json() +
                   "\n\n" + streamDone();
          } else if (ended) {
            out += streamChunk(*parsed, cid, created, opt.modelName, "",
                               finishReasonName(finish), false);
            if (parsed->includeUsage)
              out += usageChunk(*parsed, cid, created, opt.modelName,
                                {promptTokens, int(tokens), cached});
            out += streamDone();
          }
          if (!out.empty() && !sink.write(out.data(), out.size()))
            return false; // the client left: the releaser cancels
          if (ended) {
            sink.done();
            return true;
          }
          // Wait for more only once the tokens seen here are sent.
          std::unique_lock<std::mutex> l(channel->m);
          channel->cv.wait_for(l, std::chrono::milliseconds(200), [&] {
            return channel->ended || channel->tokens.size() > tokens;
          });
          return sink.is_writable ? sink.is_writable() : true;
        },
        [this, requestId](bool success) {
          if (!success) {
            // A vanished client: its request ends now and frees its pages.
            scheduler->cancel(requestId);
            metrics.countDisconnect();
            wake();
          }
          finished(requestId);
        });
  }

  // A token's text for log-probabilities: what it adds to the tokens
  // before it as the scheduler's stop strings read it (alone where it
  // respells them); its id in brackets without a tokenizer.
  TokenText tokenText() const {
    if (const serve::DecodeTokens &decode = opt.scheduler.decode)
      return [decode](const std::vector<int32_t> &before, int32_t id) {
        std::vector<int32_t> with = before;
        with.push_back(id);
        std::optional<std::string> added = serve::textAdded(decode, with.data(), with.size());
        return added ? *added : decode(&id, 1);
      };
    return [](const std::vector<int32_t> &, int32_t id) { return "[" + std::to_string(id) + "]"; };
  }

  // The up to serve::kTextContext tokens of `tokens` before index `end`.
  static std::vector<int32_t> lastTokens(const std::vector<int32_t> &tokens, size_t end) {
    end = std::min(end, tokens.size());
    const size_t begin = end > serve::kTextContext ? end - serve::kTextContext : 0;
    return std::vector<int32_t>(tokens.begin() + long(begin), tokens.begin() + long(end));
  }

  void finished(uint64_t id) {
    std::lock_guard<std::mutex> l(activeMutex);
    active.erase(id);
    activeCv.notify_all();
  }

  // The engine loop records a failed step after the scheduler has ended
  // every request; the scheduler knows before, so a handler woken by the
  // Cancelled of a failure asks it.
  Status engineStatus() const {
    {
      std::lock_guard<std::mutex> l(errorMutex);
      if (!engineError.isOk())
        return engineError;
    }
    return scheduler ? scheduler->failure() : Status::ok();
  }

  void routes() {
    http.Post("/v1/completions", [this](const httplib::Request &q, httplib::Response &s) {
      completions(q, s, false);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request &q, httplib::Response &s) {
      completions(q, s, true);
    });
    http.Get("/v1/models", [this](const httplib::Request &q, httplib::Response &s) {
      if (!authorized(q, s))
        return;
      nlohmann::json model = {{"id", opt.modelName},
                              {"object", "model"},
                              {"created", unixTime()},
                              {"owned_by", "weft"},
                              {"max_model_len", runner.kvLayout().maxContext()}};
      s.set_content(nlohmann::json{{"object", "list"}, {"data", {model}}}.dump(),
                    "application/json");
    });
    http.Get("/health", [this](const httplib::Request &, httplib::Response &s) {
      bool ok = !stopping && !engineFailed();
      s.status = ok ? 200 : 503;
      s.set_content(ok ? R"({"status":"ok"})" : R"({"status":"unavailable"})",
                    "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request &, httplib::Response &s) {
      size_t inFlight;
      {
        std::lock_guard<std::mutex> l(activeMutex);
        inFlight = active.size();
      }
      serve::SchedulerStats st;
      {
        std::lock_guard<std::mutex> l(statsMutex);
        st = stats;
      }
      s.set_content(metrics.render(st, int(inFlight)),
                    "text/plain; version=0.0.4");
    });
    // Every error without a body of its own (no route, body too large, a
    // bad request line) answers in OpenAI's shape.
    http.set_error_handler([](const httplib::Request &q, httplib::Response &s) {
      if (!s.body.empty())
        return;
      std::string message = s.status == 404   ? "no route " + q.method + " " + q.path
                            : s.status == 413 ? "the request body is too large"
                            : s.status == 405 ? "method not allowed"
                                              : "bad request";
      ApiError e = error(s.status, message,
                         s.status == 404 ? "not_found_error" : "invalid_request_error");
      s.set_content(e.json(), "application/json");
    });
    http.set_exception_handler(
        [](const httplib::Request &, httplib::Response &s, std::exception_ptr) {
          s.status = 500;
          s.set_content(error(500, "internal error", "server_error").json(), "application/json");
        });
  }
};

void setListenSocketOptions(int socket) {
  int yes = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
}

Server::Server() = default;

Server::~Server() {
  if (impl_)
    stop();
}

StatusOr<std::unique_ptr<Server>> Server::create(serve::StepRunner &runner,
                                                 const tokenizer::Tokenizer *tokenizer,
                                                 ServerOptions options) {
  if (options.port < 0 || options.port > 65535)
    return invalidArgument("port " + std::to_string(options.port) + ": expected 0 to 65535");
  if (options.maxRequests < 1 || options.httpThreads < 2)
    return invalidArgument("max requests and HTTP threads must be positive");
  std::unique_ptr<Server> s(new Server());
  s->impl_ = std::make_unique<Impl>(runner, tokenizer, std::move(options));
  Impl &impl = *s->impl_;
  impl.opt.limits.maxContext = runner.kvLayout().maxContext();
  if (tokenizer && !impl.opt.scheduler.decode)
    impl.opt.scheduler.decode = [tokenizer](const int32_t *tokens, size_t count) {
      return tokenizer->decode(std::vector<int32_t>(tokens, tokens + count), true);
    };
  impl.scheduler = std::make_unique<serve::Scheduler>(runner, impl.opt.scheduler);
  impl.http.set_payload_max_length(impl.opt.limits.maxBodyBytes);
  int threads = impl.opt.httpThreads;
  impl.http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  // SO_REUSEADDR only (httplib's default adds SO_REUSEPORT, which would let
  // a second server share a busy port instead of failing); the socket is
  // kept so that start() can raise the listen backlog above httplib's 5.
  // TCP_NODELAY, which accepted connections inherit: a stream writes one
  // small event per token, and Nagle's algorithm would hold each behind the
  // client's delayed ACK of the one before (40 ms on Linux: measured as
  // 40-80 ms of time to first token at one user).
  Impl *raw = &impl;
  impl.http.set_socket_options([raw](socket_t sock) {
    setListenSocketOptions(sock);
    raw->listenSocket = sock;
  });
  impl.http.set_keep_alive_max_count(1000);
  impl.http.set_read_timeout(30);
  impl.http.set_write_timeout(30);
  impl.routes();
  return s;
}

Status Server::start() {
  Impl &impl = *impl_;
  impl.boundPort = impl.opt.port == 0
                       ? impl.http.bind_to_any_port(impl.opt.host)
                       : (impl.http.bind_to_port(impl.opt.host, impl.opt.port) ? impl.opt.port
                                                                               : -1);
  if (impl.boundPort <= 0)
    return failedPrecondition("cannot listen on " + impl.opt.host + ":" + std::to_string(impl.opt.port) +
                       " (in use, or not an address of this machine)");
  // A burst of clients (hundreds of streams opening at once) must not
  // overflow the accept queue: listen() again with a deep backlog.
  if (impl.listenSocket >= 0)
    ::listen(impl.listenSocket, 4096);
  impl.engineThread = std::thread([&impl] { impl.engineLoop(); });
  impl.httpThread = std::thread([&impl] { impl.http.listen_after_bind(); });
  impl.started = true;
  return Status::ok();
}

int Server::port() const { return impl_->boundPort; }

Status Server::engineStatus() const { return impl_->engineStatus(); }

void Server::stop() {
  Impl &impl = *impl_;
  {
    std::lock_guard<std::mutex> l(impl.stopMutex);
    if (impl.stopped)
      return;
    impl.stopped = true;
  }
  impl.stopping = true; // new requests get 503
  if (impl.started) {
    // Drain: in-flight requests may finish for a while, then are cancelled.
    std::unique_lock<std::mutex> l(impl.activeMutex);
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(impl.opt.drainSeconds));
    if (!impl.activeCv.wait_until(l, deadline, [&] { return impl.active.empty(); })) {
      for (auto &[id, channel] : impl.active)
        impl.scheduler->cancel(id);
      impl.wake();
      impl.activeCv.wait_for(l, std::chrono::seconds(10), [&] { return impl.active.empty(); });
    }
  }
  impl.http.stop();
  if (impl.httpThread.joinable())
    impl.httpThread.join();
  {
    std::lock_guard<std::mutex> l(impl.workMutex);
    impl.engineStop = true;
    impl.workCv.notify_all();
  }
  if (impl.engineThread.joinable())
    impl.engineThread.join();
  std::lock_guard<std::mutex> l(impl.stopMutex);
  impl.done = true;
  impl.stoppedCv.notify_all();
}

void Server::wait() {
  Impl &impl = *impl_;
  std::unique_lock<std::mutex> l(impl.stopMutex);
  impl.stoppedCv.wait(l, [&] { return impl.done; });
}

} // namespace weft::server
