// weft-serve: loads a plan and its weights and serves them over an
// OpenAI-compatible HTTP API (see runtime/server), until SIGTERM or SIGINT,
// which drain the requests in flight before exiting 0.
#include "runtime/base/Progress.h"
#include "runtime/base/Subprocess.h"
#include "runtime/base/Text.h"
#include "runtime/io/ReadFile.h"
#include "runtime/chat/ChatTemplateSource.h"
#include "runtime/engine/Engine.h"
#include "runtime/server/Server.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include "runtime/plan/Fnv1a.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <pthread.h>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

int fail(const std::string &msg) {
  std::cerr << "weft-serve: error: " << msg << "\n";
  return 1;
}

bool parseInt(const std::string &text, long long lo, long long hi, long long &out) {
  std::optional<int64_t> v = weft::parseInteger(text, lo, hi);
  if (!v)
    return false;
  out = *v;
  return true;
}

// A plan for `model` on `topology`: from the plan cache
// ($XDG_CACHE_HOME/weft/plans, else ~/.cache/weft/plans), keyed by the
// checkpoint's config.json, its files' names, sizes and modification times,
// the topology, the options and the weft-compile binary; compiled by
// weft-compile (next to this binary, or in an absolute PATH entry) when
// missing.
bool compiledPlan(const char *self, const std::string &model, const std::string &topology,
                  const std::vector<std::string> &args, bool quiet, std::string &plan,
                  std::string &error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(model, ec)) {
    error = "--model " + model + ": not a directory";
    return false;
  }
  fs::path compiler;
  // This binary's own folder from the kernel, not from argv[0]: started
  // from PATH, argv[0] is a bare name that would resolve in the current
  // directory, where anyone could have left a weft-compile.
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty())
    exe = fs::weakly_canonical(fs::path(self), ec);
  fs::path here = exe.parent_path();
  for (fs::path c : {here / "weft-compile", here.parent_path() / "weft-compile" / "weft-compile"})
    if (fs::is_regular_file(c, ec)) {
      compiler = c;
      break;
    }
  if (compiler.empty())
    if (const char *path = std::getenv("PATH")) {
      std::stringstream ss(path);
      std::string dir;
      // Absolute entries only: an empty or relative one means the current
      // directory.
      while (compiler.empty() && std::getline(ss, dir, ':'))
        if (!dir.empty() && dir[0] == '/' && fs::is_regular_file(fs::path(dir) / "weft-compile", ec))
          compiler = fs::path(dir) / "weft-compile";
    }
  if (compiler.empty()) {
    error = "--model needs weft-compile (not found next to weft-serve or on PATH); on an edge "
            "box, serve a plan compiled elsewhere: weft-serve PLAN --weights DIR";
    return false;
  }
  uint64_t key = weft::plan::kFnv1a64Offset;
  auto mix = [&](const std::string &s) {
    key = weft::plan::fnv1a64(s.data(), s.size(), key);
    key = weft::plan::fnv1a64("\0", 1, key);
  };
  mix(fs::absolute(model, ec).string());
  mix(topology);
  for (const std::string &a : args)
    mix(a);
  std::vector<fs::path> files;
  for (const fs::directory_entry &e : fs::directory_iterator(model, ec))
    if (e.is_regular_file(ec))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path &f : files) {
    mix(f.filename().string());
    mix(std::to_string(fs::file_size(f, ec)));
    mix(std::to_string(fs::last_write_time(f, ec).time_since_epoch().count()));
  }
  mix(std::to_string(fs::file_size(compiler, ec)));
  mix(std::to_string(fs::last_write_time(compiler, ec).time_since_epoch().count()));
  const char *xdg = std::getenv("XDG_CACHE_HOME");
  const char *home = std::getenv("HOME");
  fs::path cache = xdg && *xdg ? fs::path(xdg) / "weft" / "plans"
                               : fs::path(home ? home : ".") / ".cache" / "weft" / "plans";
  fs::create_directories(cache, ec);
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.weft", (unsigned long long)key);
  plan = (cache / name).string();
  if (fs::is_regular_file(plan, ec)) {
    if (!quiet)
      std::fprintf(stderr, "weft-serve: plan from the cache: %s\n", plan.c_str());
    return true;
  }
  // weft-compile writes a plan for an output named *.weft. It starts from
  // an argument vector, never through a shell: quotes, `;` or `$(...)` in
  // a path, the topology or --compile-args are plain characters.
  std::string tmp = (cache / (std::string(name, 16) + ".partial" + std::to_string(::getpid()) +
                              ".weft")).string();
  std::vector<std::string> argv = {compiler.string(), "--model", model, "--topology", topology};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"-o", tmp});
  if (!quiet)
    std::fprintf(stderr, "weft-serve: compiling %s for %s (once; then cached)\n", model.c_str(),
                 topology.c_str());
  weft::StatusOr<int> rc =
      weft::runProgram(argv, quiet ? weft::ChildOutput::kDiscard : weft::ChildOutput::kToStderr);
  if (!rc) {
    fs::remove(tmp, ec);
    error = rc.status().message();
    return false;
  }
  if (*rc != 0 || !fs::is_regular_file(tmp, ec)) {
    fs::remove(tmp, ec);
    error = "weft-compile failed for --model " + model + " --topology " + topology +
            " (its error is above)";
    return false;
  }
  fs::rename(tmp, plan, ec);
  if (ec) {
    error = plan + ": " + ec.message();
    return false;
  }
  return true;
}

const char *kUsage =
    "usage: weft-serve PLAN (--weights DIR | --random-weights) [--host ADDR] [--port N]\n"
    "       weft-serve --model DIR --topology SPEC [--compile-args \"--max-batch 64 ...\"]\n"
    "                  (compiles once with weft-compile, caches the plan, serves DIR's weights;\n"
    "                  --compile-args splits at blanks, '...' and \"...\" quote, \\ escapes;\n"
    "                  no shell reads it)\n"
    "                  [--model-name NAME] [--api-key KEY] [--max-requests N]\n"
    "                  [--http-threads N] [--drain-seconds S] [--tokenizer tokenizer.json]\n"
    "                  [--chat-template FILE.jinja|tokenizer_config.json]\n"
    "                  [--devices 0,1] [--skip-header-checksums] [--no-nccl] [--quiet]\n"
    "                  [--micro-batches N] (pipeline plans; default: the plan's choice)\n"
    "                  [--no-prefix-cache] (prefill every prompt whole: no KV blocks\n"
    "                  shared between requests by content)\n"
    "                  [--trusted-keys FILE] (only plans signed by one of these keys)\n"
    "  Serves POST /v1/completions and /v1/chat/completions (and streams), GET\n"
    "  /v1/models, /health, /metrics.\n"
    "  WEFT_API_KEY in the environment sets --api-key.\n";

} // namespace

int main(int argc, char **argv) {
  std::string planPath, tokenizerPath, chatTemplatePath, modelDir, topology;
  std::optional<std::vector<std::string>> compileArgs;
  std::string trustedKeysPath;
  weft::engine::EngineOptions options;
  weft::server::ServerOptions server;
  server.port = 8000;
  server.scheduler.prefixCaching = true;
  bool quiet = false;
  if (const char *key = std::getenv("WEFT_API_KEY")) {
    // Set but empty would serve without authentication: refused, as
    // --api-key '' is.
    if (!*key)
      return fail("WEFT_API_KEY is set but empty: give a key, or unset it to serve without one");
    server.apiKey = key;
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc)
        return std::nullopt;
      return std::string(argv[++i]);
    };
    auto number = [&](long long lo, long long hi, long long &out) -> bool {
      std::optional<std::string> v = value();
      return v && parseInt(*v, lo, hi, out);
    };
    long long n = 0;
    if (a == "--model") {
      std::optional<std::string> v = value();
      if (!v) return fail("--model needs a checkpoint directory");
      modelDir = *v;
    } else if (a == "--topology") {
      std::optional<std::string> v = value();
      if (!v) return fail("--topology needs a topology (h200, rtx3090+rtx3060, FILE.json)");
      topology = *v;
    } else if (a == "--compile-args") {
      std::optional<std::string> v = value();
      if (!v) return fail("--compile-args needs the weft-compile options, in one argument");
      if (compileArgs)
        return fail("--compile-args given twice: put every weft-compile option in one");
      weft::StatusOr<std::vector<std::string>> split = weft::splitArguments(*v);
      if (!split)
        return fail("--compile-args: " + split.status().message());
      if (split->empty())
        return fail("--compile-args is empty: give weft-compile options, or leave it out");
      compileArgs = std::move(*split);
    } else if (a == "--weights") {
      std::optional<std::string> v = value();
      if (!v) return fail("--weights needs a directory");
      options.weightsDir = *v;
    } else if (a == "--random-weights") {
      options.randomWeights = true;
    } else if (a == "--skip-header-checksums") {
      options.skipHeaderChecksums = true;
    } else if (a == "--no-nccl") {
      options.allowNccl = false;
    } else if (a == "--micro-batches") {
      std::optional<std::string> v = value();
      long long n = 0;
      if (!v || !parseInt(*v, 1, 16, n))
        return fail("--micro-batches: expected an integer from 1 to 16");
      options.microBatches = int(n);
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--no-prefix-cache") {
      server.scheduler.prefixCaching = false;
    } else if (a == "--host") {
      std::optional<std::string> v = value();
      if (!v || v->empty()) return fail("--host needs an address");
      server.host = *v;
    } else if (a == "--port") {
      if (!number(0, 65535, n)) return fail("--port: expected 0 to 65535");
      server.port = int(n);
    } else if (a == "--model-name") {
      std::optional<std::string> v = value();
      if (!v || v->empty()) return fail("--model-name needs a name");
      server.modelName = *v;
    } else if (a == "--api-key") {
      std::optional<std::string> v = value();
      if (!v || v->empty()) return fail("--api-key needs a key");
      server.apiKey = *v;
    } else if (a == "--max-requests") {
      if (!number(1, 1 << 20, n)) return fail("--max-requests: expected a positive integer");
      server.maxRequests = int(n);
    } else if (a == "--http-threads") {
      if (!number(2, 1 << 14, n)) return fail("--http-threads: expected 2 to 16384");
      server.httpThreads = int(n);
    } else if (a == "--drain-seconds") {
      if (!number(0, 3600, n)) return fail("--drain-seconds: expected 0 to 3600");
      server.drainSeconds = double(n);
    } else if (a == "--chat-template") {
      std::optional<std::string> v = value();
      if (!v) return fail("--chat-template needs a file (.jinja or tokenizer_config.json)");
      chatTemplatePath = *v;
    } else if (a == "--tokenizer") {
      std::optional<std::string> v = value();
      if (!v) return fail("--tokenizer needs a file");
      tokenizerPath = *v;
    } else if (a == "--trusted-keys") {
      std::optional<std::string> v = value();
      if (!v) return fail("--trusted-keys needs a file of public keys");
      trustedKeysPath = *v;
    } else if (a == "--devices") {
      std::optional<std::string> v = value();
      if (!v) return fail("--devices needs GPU indices");
      std::stringstream ss(*v);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!parseInt(item, 0, 1024, n)) return fail("--devices: expected comma-separated GPU indices");
        options.deviceMap.push_back(int(n));
      }
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (!a.empty() && a[0] != '-' && planPath.empty()) {
      planPath = a;
    } else {
      return fail("unknown argument '" + a + "'\n" + kUsage);
    }
  }
  if (options.randomWeights && options.skipHeaderChecksums)
    return fail("--skip-header-checksums checks a checkpoint's headers: not with --random-weights");
  if (options.randomWeights && !options.weightsDir.empty())
    return fail("--weights and --random-weights: expected one of them");
  if (!modelDir.empty()) {
    if (!planPath.empty())
      return fail("give a plan or --model, not both");
    if (topology.empty())
      return fail("--model needs --topology (the GPUs to compile for)");
    if (options.weightsDir.empty() && !options.randomWeights)
      options.weightsDir = modelDir;
    std::string error;
    if (!compiledPlan(argv[0], modelDir, topology, compileArgs.value_or(std::vector<std::string>{}),
                      quiet, planPath, error))
      return fail(error);
  } else if (!topology.empty() || compileArgs) {
    return fail("--topology and --compile-args go with --model");
  }
  if (planPath.empty())
    return fail(std::string("no plan given\n") + kUsage);
  if (options.weightsDir.empty() && !options.randomWeights)
    return fail("no weights: give --weights DIR or --random-weights");

  // SIGTERM and SIGINT go to one thread that stops the server (blocked in
  // every other thread, which inherit this mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Only plans signed by a trusted key, when keys are given.
  weft::StatusOr<weft::plan::SealPolicy> sealPolicy = weft::plan::sealPolicyFor(trustedKeysPath);
  if (!sealPolicy.isOk())
    return fail("--trusted-keys: " + sealPolicy.status().message());
  weft::StatusOr<weft::plan::PlanFile> plan = weft::plan::PlanFile::open(planPath, *sealPolicy);
  if (!plan.isOk())
    return fail(plan.status().message());
  const auto *embedded = plan->plan().tokenizer_json();
  weft::StatusOr<weft::tokenizer::LoadedTokenizer> loaded = weft::tokenizer::loadTokenizer(
      tokenizerPath,
      embedded ? std::string_view(embedded->data(), embedded->size()) : std::string_view(),
      planPath + " (tokenizer_json)");
  if (!loaded.isOk())
    return fail(loaded.status().message());
  std::optional<weft::tokenizer::Tokenizer> tokenizer = std::move(loaded->tokenizer);
  if (!loaded->embeddedProblem.isOk())
    std::cerr << "weft-serve: warning: " << loaded->embeddedProblem.message()
              << "; prompts must be token ids\n";
  else if (!tokenizer)
    std::cerr << "weft-serve: warning: the plan carries no tokenizer; prompts must be token "
                 "ids (or give --tokenizer)\n";
  if (const auto *e = plan->plan().model()->eos_token_ids())
    server.stopTokens.assign(e->begin(), e->end());
  // The chat template: --chat-template, else the one the plan carries.
  auto str = [](const flatbuffers::String *s) { return s ? s->str() : std::string(); };
  weft::StatusOr<weft::chat::LoadedChatTemplate> chatTemplate = weft::chat::loadChatTemplate(
      chatTemplatePath, str(plan->plan().chat_template()), planPath + " (chat_template)",
      str(plan->plan().bos_token()), str(plan->plan().eos_token()));
  if (!chatTemplate.isOk())
    return fail(chatTemplate.status().message());
  if (chatTemplate->chatTemplate && !tokenizer && !chatTemplatePath.empty())
    return fail("--chat-template " + chatTemplatePath + ": chat requests need a tokenizer to "
                "encode the rendered text, and the plan carries none: give --tokenizer FILE");
  if (chatTemplate->chatTemplate)
    server.chat = &*chatTemplate;
  weft::Progress progress = weft::Progress::forStderr("weft-serve: ");
  progress.countBytes("loading weights");
  if (!quiet)
    options.progress = [&](const std::string &phase, uint64_t done, uint64_t total) {
      progress.update(phase, done, total);
    };
  weft::StatusOr<std::unique_ptr<weft::engine::Engine>> engine =
      weft::engine::Engine::create(std::move(plan.value()), options);
  if (!engine.isOk())
    return fail(engine.status().message());
  weft::StatusOr<std::unique_ptr<weft::server::Server>> s = weft::server::Server::create(
      **engine, tokenizer ? &*tokenizer : nullptr, server);
  if (!s.isOk())
    return fail(s.status().message());
  if (weft::Status st = (*s)->start(); !st.isOk())
    return fail(st.message());
  std::printf("weft-serve: serving '%s' on http://%s:%d (POST /v1/completions, GET "
              "/v1/models /health /metrics)\n",
              server.modelName.c_str(), server.host.c_str(), (*s)->port());
  if ((*engine)->microBatches() > 1)
    std::printf("weft-serve: pipeline: %d micro-batches in flight\n", (*engine)->microBatches());
  std::fflush(stdout);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "weft-serve: %s: draining (up to %.0f s)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", server.drainSeconds);
    (*s)->stop();
  });
  (*s)->wait();
  waiter.join();
  weft::Status engineStatus = (*s)->engineStatus();
  if (!engineStatus.isOk())
    return fail("the engine failed: " + engineStatus.message());
  return 0;
}
