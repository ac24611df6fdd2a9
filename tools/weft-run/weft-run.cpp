// weft-run: loads a plan and its weights and generates tokens (greedily, or
// sampled) for one prompt or a file of prompts run together through the
// scheduler, printing the tokens and the speed.
#include "runtime/base/Progress.h"
#include "runtime/base/Text.h"
#include "runtime/chat/ChatTemplateSource.h"
#include "runtime/detect/Nvml.h"
#include "runtime/engine/Generate.h"
#include "runtime/io/ReadFile.h"
#include "runtime/serve/Scheduler.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "tools/weft-run/BenchCalibration.h"
#include "tools/weft-run/Interactive.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

std::string fmtSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

int fail(const std::string &msg) {
  std::cerr << "weft-run: error: " << msg << "\n";
  return 1;
}

// Comma-separated integers in [0, 2^31), strictly (weft::parseIntegerList).
bool parseInts(const std::string &text, std::vector<int32_t> &out) {
  std::optional<std::vector<int64_t>> v = weft::parseIntegerList(text, 0, INT32_MAX);
  if (!v)
    return false;
  for (int64_t x : *v)
    out.push_back(int32_t(x));
  return true;
}

// --prompts FILE: one prompt a line, comma-separated token ids or text
// (encoded with the tokenizer); empty lines are skipped.
struct PromptLine {
  std::vector<int32_t> ids;
  std::string text;
  bool isText = false;
};

bool readPrompts(const std::string &path, std::vector<PromptLine> &out, std::string &error) {
  // A regular file of at most 256 MiB, checked before reading.
  weft::StatusOr<std::string> text = weft::io::readRegularFile(path, 256u << 20, "the prompt list");
  if (!text.isOk()) {
    error = text.status().message();
    return false;
  }
  std::istringstream f(*text);
  std::string line;
  int number = 0;
  while (std::getline(f, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    PromptLine p;
    std::string compact;
    for (char c : line)
      if (c != ' ' && c != '\t')
        compact += c;
    if (compact.find_first_not_of("0123456789,") == std::string::npos) {
      if (!parseInts(compact, p.ids)) {
        error = path + ":" + std::to_string(number) + ": expected comma-separated token ids";
        return false;
      }
    } else {
      p.text = line;
      p.isText = true;
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) {
    error = path + ": no prompts";
    return false;
  }
  return true;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t i = size_t(q * double(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

const char *kUsage =
    "usage: weft-run PLAN (--weights DIR | --random-weights)\n"
    "                (--prompt-ids 1,2,3 | --prompt TEXT | --prompts FILE | --chat) [options]\n"
    "       weft-run PLAN --random-weights --bench BUCKET[,BUCKET...] [options]\n"
    "       weft-run --help\n";

const char *kHelp =
    "weft-run: run a Weft plan on this machine's GPUs.\n"
    "\n"
    "usage: weft-run PLAN (--weights DIR | --random-weights)\n"
    "                (--prompt-ids 1,2,3 | --prompt TEXT | --prompts FILE | --chat) [options]\n"
    "       weft-run PLAN --random-weights --bench BUCKET[,BUCKET...] [options]\n"
    "\n"
    "Weights (one of):\n"
    "  --weights DIR            the checkpoint the plan was compiled from\n"
    "  --random-weights         random values (benchmarks, plans of built-in models)\n"
    "  --skip-header-checksums  accept a checkpoint whose safetensors headers differ,\n"
    "                           if every tensor's name, dtype and shape match\n"
    "Prompt (one of):\n"
    "  --prompt-ids 1,2,3       token ids\n"
    "  --prompt TEXT            text, encoded with the plan's tokenizer (or --tokenizer)\n"
    "  --prompts FILE           one prompt of ids per line, run together (batched)\n"
    "  --tokenizer FILE         a tokenizer.json instead of the plan's\n"
    "  --chat                   a conversation in the terminal: each line read from stdin\n"
    "                           is a user turn, rendered with the chat template; the\n"
    "                           answer streams back (/reset starts over, /exit or EOF ends)\n"
    "  --system TEXT            with --chat: the system message\n"
    "  --chat-template FILE     with --chat: a .jinja template or tokenizer_config.json\n"
    "                           instead of the plan's\n"
    "  --no-prefix-cache        with --prompts or --chat: prefill every prompt whole (by\n"
    "                           default, whole KV blocks of tokens an earlier prompt or\n"
    "                           turn began with are shared, not computed again)\n"
    "Output:\n"
    "  --stream, --no-stream    print each token as it is produced (the text, or ids\n"
    "                           without a tokenizer; the speed goes to stderr) or all at\n"
    "                           the end as 'tokens:' and 'text:' lines (default: stream\n"
    "                           when stdout is a terminal)\n"
    "Generation:\n"
    "  --max-tokens N           new tokens per sequence (default 32; with --chat, up to\n"
    "                           the end of the plan's context)\n"
    "  --temperature T          0 is greedy (default 0); needs a sampling plan\n"
    "  --top-k K                keep the K most likely tokens (default 0: all)\n"
    "  --top-p P                keep the smallest set with probability P (default 1)\n"
    "  --seed S                 sampling seed (default 0)\n"
    "  --dump-logits FILE       write the last prompt token's logits (f32) to FILE\n"
    "Benchmark:\n"
    "  --bench B1,B2            time these buckets (e.g. decode_b32; 'all': every one) with\n"
    "                           synthetic inputs, beside the plan's predicted step time\n"
    "  --bench-steps N          runs per bucket (default 20)\n"
    "  --bench-context N,M      context positions per decode sequence (default 128)\n"
    "  --write-calibration FILE write measured/predicted step scales into the topology\n"
    "                           JSON FILE the plan was compiled for (its devices'\n"
    "                           \"calibration\" blocks); measure two contexts per decode\n"
    "                           bucket so weight streaming and attention scale apart\n"
    "Devices and runtime:\n"
    "  --devices 0,1            physical GPU of each declared device (default: in order,\n"
    "                           or all on GPU 0 when there is one)\n"
    "  --micro-batches N        pipeline plans: micro-batches in flight (default: the\n"
    "                           plan's choice)\n"
    "  --no-cuda-graphs         launch each step instead of replaying bucket graphs\n"
    "  --no-programmatic-launch no programmatic dependent launch (sm_90+)\n"
    "  --no-nccl                tensor-parallel all-reduces without NCCL\n"
    "  --trusted-keys FILE      accept only plans signed by one of these ed25519 keys\n"
    "  --quiet                  no progress display\n"
    "\n"
    "Prints the generated ids (and text), the load phases, and the speed.\n"
    "See docs/runtime.md.\n";

// Times `steps` runs of one bucket with synthetic inputs: a decode bucket
// as that many sequences, each at position `context` with its own pages; a
// prefill bucket as one sequence's chunk. Only sequences and pages the
// plan's cache has are used: a shape that does not fit is an error.
int bench(weft::engine::Engine &engine, const std::string &name, int steps, int context,
          std::vector<weft::benchcal::Measurement> &measured) {
  int bucket = engine.bucketIndex(name);
  if (bucket < 0)
    return fail("--bench: the plan has no bucket '" + name + "'");
  int tokens = engine.bucketTokens(bucket);
  bool prefill = name.rfind("prefill", 0) == 0;
  const weft::engine::KvLayout &kv = engine.kvLayout();
  int sequences = prefill ? 1 : tokens;
  int64_t length = prefill ? tokens : int64_t(context) + 1; // positions each sequence holds
  if (sequences > kv.maxSequences)
    return fail("--bench " + name + ": " + std::to_string(sequences) +
                " sequences, but the plan holds " + std::to_string(kv.maxSequences) +
                " (weft-compile --max-batch / --batch)");
  if (length > kv.maxContext())
    return fail("--bench " + name + ": " + std::to_string(length) +
                " positions per sequence, beyond the plan's context of " +
                std::to_string(kv.maxContext()));
  int64_t perSequence = (length + kv.blockTokens - 1) / kv.blockTokens;
  if (perSequence * sequences > kv.pages)
    return fail("--bench " + name + " --bench-context " + std::to_string(context) + ": " +
                std::to_string(sequences) + " sequences of " + std::to_string(length) +
                " positions need " + std::to_string(perSequence * sequences) +
                " KV pages; the plan's cache has " + std::to_string(kv.pages) +
                " (weft-compile --batch N --context C sizes it for N x C tokens)");
  for (int s = 0; s < sequences; ++s) {
    std::vector<int32_t> pages(static_cast<size_t>(perSequence));
    for (int64_t i = 0; i < perSequence; ++i)
      pages[size_t(i)] = int32_t(s * perSequence + i);
    if (weft::Status st = engine.setBlockTable(s, pages); !st.isOk())
      return fail(st.message());
  }
  int vocab = engine.plan().model()->vocab_size();
  weft::engine::StepInputs in;
  for (int i = 0; i < tokens; ++i) {
    in.ids.push_back(vocab > 1 ? 1 + i % (vocab - 1) : 0);
    in.positions.push_back(prefill ? i : context);
    in.slots.push_back(prefill ? 0 : i);
  }
  weft::engine::StepOutputs out;
  for (int i = 0; i < 3; ++i) // warm up: graph recording, cuBLASLt algorithms
    if (weft::Status s = engine.run(bucket, in, out); !s.isOk())
      return fail(s.message());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i)
    if (weft::Status s = engine.run(bucket, in, out); !s.isOk())
      return fail(s.message());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double perStep = seconds / steps;
  std::printf("bucket %s: %d tokens, %.3f ms/step, %.1f tokens/s (%d steps, context %d)",
              name.c_str(), tokens, perStep * 1e3, tokens / perStep, steps,
              prefill ? tokens : context);
  // Beside the cost model's prediction, when the plan holds one.
  const weft::plan::fb::Bucket *b = engine.plan().buckets()->Get(uint32_t(bucket));
  if (std::optional<weft::benchcal::Predicted> p =
          weft::benchcal::predictionFor(*b, prefill ? 0 : context)) {
    std::printf("; predicted %.3f ms, measured/predicted %.3f", p->seconds * 1e3,
                p->seconds > 0 ? perStep / p->seconds : 0.0);
    measured.push_back({prefill, tokens, prefill ? 0 : context, perStep, *p});
  }
  std::printf("\n");
  return 0;
}

// --prompts: every prompt submitted at once; the scheduler batches them.
int runPrompts(weft::engine::Engine &engine, const std::vector<PromptLine> &prompts,
               int maxTokens, const std::vector<int32_t> &stopTokens,
               const weft::engine::SamplingOptions &sampling,
               const weft::tokenizer::Tokenizer *tokenizer, const std::string &dumpLogits,
               bool prefixCaching, double loadSeconds) {
  using Clock = std::chrono::steady_clock;
  struct Result {
    std::vector<int32_t> tokens;
    std::vector<Clock::time_point> times; // when each token was heard
    std::vector<float> logits;
    Clock::time_point first, last;
    std::string finish;
  };
  std::vector<Result> results(prompts.size());
  weft::serve::SchedulerOptions schedulerOptions;
  schedulerOptions.prefixCaching = prefixCaching;
  weft::serve::Scheduler scheduler(engine, schedulerOptions);
  auto start = Clock::now();
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    weft::serve::Request r;
    r.prompt = prompts[i].ids;
    r.maxTokens = maxTokens;
    r.sampling = sampling;
    r.stopTokens = stopTokens;
    r.wantPromptLogits = !dumpLogits.empty();
    Result *res = &results[i];
    r.onEvent = [res](const weft::serve::Event &e) {
      auto now = Clock::now();
      if (e.token >= 0) {
        if (res->tokens.empty())
          res->first = now;
        res->tokens.push_back(e.token);
        res->times.push_back(now);
      }
      if (e.promptLogits)
        res->logits = *e.promptLogits;
      if (e.finish != weft::serve::Finish::None) {
        res->last = now;
        res->finish = weft::serve::finishName(e.finish);
      }
    };
    weft::StatusOr<uint64_t> id = scheduler.submit(std::move(r));
    if (!id.isOk())
      return fail("--prompts: line " + std::to_string(i + 1) + ": " + id.status().message());
  }
  if (weft::Status st = scheduler.runUntilIdle(); !st.isOk())
    return fail(st.message());
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t generated = 0, promptTokens = 0;
  std::vector<double> ttft, perSequence;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result &r = results[i];
    std::cout << "sequence " << i << " tokens:";
    for (int32_t t : r.tokens)
      std::cout << " " << t;
    std::cout << "\n";
    if (tokenizer)
      std::cout << "sequence " << i << " text: " << tokenizer->decode(r.tokens, true) << "\n";
    generated += r.tokens.size();
    promptTokens += prompts[i].ids.size();
    double first = std::chrono::duration<double>(r.first - start).count();
    double end = std::chrono::duration<double>(r.last - start).count();
    ttft.push_back(first);
    perSequence.push_back(end > 0 ? double(r.tokens.size()) / end : 0.0);
  }
  double mean = 0;
  for (double v : perSequence)
    mean += v / double(perSequence.size());
  // The decode phase: from the moment every sequence had its first token
  // (every prompt done) to the end, the tokens heard in between.
  Clock::time_point allStarted = start, end = start;
  for (const Result &r : results) {
    allStarted = std::max(allStarted, r.first);
    end = std::max(end, r.last);
  }
  uint64_t decodeTokens = 0;
  for (const Result &r : results)
    for (Clock::time_point t : r.times)
      decodeTokens += t > allStarted;
  double decodeSeconds = std::chrono::duration<double>(end - allStarted).count();
  weft::serve::SchedulerStats st = scheduler.stats();
  std::printf("loaded in %.2f s; %zu sequences, %llu prompt and %llu generated tokens in "
              "%.3f s over %llu steps (%llu preemptions)\n",
              loadSeconds, prompts.size(), (unsigned long long)promptTokens,
              (unsigned long long)generated, seconds, (unsigned long long)st.steps,
              (unsigned long long)st.preemptions);
  std::printf("throughput %.1f generated tok/s; per sequence %.1f tok/s mean, %.1f p10 "
              "(tokens over time from the start); first token %.1f ms p50, %.1f ms max\n",
              generated / seconds, mean, percentile(perSequence, 0.1),
              percentile(ttft, 0.5) * 1e3, percentile(ttft, 1.0) * 1e3);
  if (prefixCaching)
    std::printf("prefix cache: %llu of %llu prompt tokens taken from it, not computed (%llu "
                "admissions looked it up)\n",
                (unsigned long long)st.prefixHitTokens, (unsigned long long)promptTokens,
                (unsigned long long)st.prefixQueries);
  std::printf("steps by size:");
  for (auto [size, count] : st.stepsBySize)
    std::printf(" %d:%llu", size, (unsigned long long)count);
  std::printf("\n");
  if (decodeSeconds > 0)
    std::printf("decode phase (every prompt done): %llu tokens in %.3f s, %.1f generated tok/s\n",
                (unsigned long long)decodeTokens, decodeSeconds, double(decodeTokens) / decodeSeconds);
  if (!dumpLogits.empty()) {
    std::ofstream f(dumpLogits, std::ios::binary);
    for (const Result &r : results)
      f.write(reinterpret_cast<const char *>(r.logits.data()),
              std::streamsize(r.logits.size() * sizeof(float)));
    if (!f)
      return fail(dumpLogits + ": cannot write");
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string planPath, dumpLogits, promptText, tokenizerPath, trustedKeysPath;
  bool havePromptText = false;
  weft::engine::EngineOptions options;
  std::vector<int32_t> prompt;
  int maxTokens = 32;
  bool quiet = false;
  bool prefixCaching = true, prefixFlag = false;
  std::string benchBucket;
  weft::engine::SamplingOptions sampling;
  int benchSteps = 20;
  std::vector<int32_t> benchContexts = {128};
  std::string promptsPath;
  bool chat = false, maxTokensGiven = false;
  std::string system, chatTemplatePath, chatFlag;
  std::optional<bool> stream;
  std::string calibrationPath;
  // The last flag given that only prompts use, and the last that only
  // --bench uses, to refuse them where they would be ignored.
  std::string promptFlag, benchFlag;
  // The last flag given that only sampling uses (at a temperature above 0).
  std::string samplingFlag;
  bool benchContextGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--top-k" || a == "--top-p" || a == "--seed")
      samplingFlag = a;
    if (a == "--max-tokens" || a == "--dump-logits" || a == "--temperature" || a == "--top-k" ||
        a == "--top-p" || a == "--seed" || a == "--tokenizer")
      promptFlag = a;
    if (a == "--bench-steps" || a == "--bench-context" || a == "--write-calibration")
      benchFlag = a;
    auto value = [&](const char *flag) -> const char * {
      if (i + 1 >= argc) {
        std::cerr << "weft-run: error: " << flag << " needs a value\n";
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--weights") options.weightsDir = value("--weights");
    else if (a == "--random-weights") options.randomWeights = true;
    else if (a == "--skip-header-checksums") options.skipHeaderChecksums = true;
    else if (a == "--quiet") quiet = true;
    else if (a == "--no-prefix-cache") prefixCaching = false, prefixFlag = true;
    else if (a == "--no-cuda-graphs") options.cudaGraphs = false;
    else if (a == "--no-programmatic-launch") options.programmaticLaunch = false;
    else if (a == "--no-nccl") options.allowNccl = false;
    else if (a == "--micro-batches") {
      std::vector<int32_t> v;
      if (!parseInts(value("--micro-batches"), v) || v.size() != 1 || v[0] < 1 || v[0] > 16)
        return fail("--micro-batches: expected an integer from 1 to 16");
      options.microBatches = v[0];
    }
    else if (a == "--temperature" || a == "--top-p") {
      const char *text = value(a.c_str());
      std::optional<double> v = weft::parseDecimal(text, 0, 1e6);
      if (!v)
        return fail(a + ": expected a non-negative number, got '" + text + "'");
      (a == "--temperature" ? sampling.temperature : sampling.topP) = float(*v);
    } else if (a == "--top-k" || a == "--seed") {
      const char *text = value(a.c_str());
      std::optional<int64_t> v =
          weft::parseInteger(text, 0, a == "--top-k" ? INT32_MAX : INT64_MAX);
      if (!v)
        return fail(a + ": expected a non-negative integer, got '" + text + "'");
      if (a == "--top-k")
        sampling.topK = int32_t(*v);
      else
        sampling.seed = uint64_t(*v);
    }
    else if (a == "--dump-logits") dumpLogits = value("--dump-logits");
    else if (a == "--bench") benchBucket = value("--bench");
    else if (a == "--bench-steps" || a == "--max-tokens") {
      std::vector<int32_t> v;
      if (!parseInts(value(a.c_str()), v) || v.size() != 1 || v[0] < 1)
        return fail(a + ": expected a positive integer");
      (a == "--max-tokens" ? maxTokens : benchSteps) = v[0];
      maxTokensGiven |= a == "--max-tokens";
    } else if (a == "--bench-context") {
      benchContextGiven = true;
      benchContexts.clear();
      if (!parseInts(value("--bench-context"), benchContexts))
        return fail("--bench-context: expected comma-separated positive integers");
      for (int32_t c : benchContexts)
        if (c < 1)
          return fail("--bench-context: expected comma-separated positive integers");
    }
    else if (a == "--prompt") promptText = value("--prompt"), havePromptText = true;
    else if (a == "--chat") chat = true;
    else if (a == "--system") system = value("--system"), chatFlag = a;
    else if (a == "--chat-template") chatTemplatePath = value("--chat-template"), chatFlag = a;
    else if (a == "--write-calibration") calibrationPath = value("--write-calibration");
    else if (a == "--stream") stream = true;
    else if (a == "--no-stream") stream = false;
    else if (a == "--prompts") promptsPath = value("--prompts");
    else if (a == "--tokenizer") tokenizerPath = value("--tokenizer");
    else if (a == "--trusted-keys") trustedKeysPath = value("--trusted-keys");
    else if (a == "--prompt-ids") {
      if (!parseInts(value("--prompt-ids"), prompt))
        return fail("--prompt-ids: expected comma-separated token ids");
    } else if (a == "--devices") {
      std::vector<int32_t> map;
      if (!parseInts(value("--devices"), map))
        return fail("--devices: expected comma-separated GPU indices");
      options.deviceMap.assign(map.begin(), map.end());
    } else if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return 0;
    } else if (!a.empty() && a[0] != '-' && planPath.empty()) {
      planPath = a;
    } else {
      return fail("unknown argument '" + a + "'\n" + kUsage);
    }
  }
  if (planPath.empty())
    return fail(std::string("no plan given\n") + kUsage);
  if (havePromptText && !prompt.empty())
    return fail("--prompt and --prompt-ids both given: expected one of them");
  if (int(!prompt.empty()) + int(havePromptText) + int(!promptsPath.empty()) > 1)
    return fail("--prompt-ids, --prompt and --prompts: expected one of them");
  if (prefixFlag && promptsPath.empty() && !chat)
    return fail("--no-prefix-cache goes with --prompts or --chat (one prompt shares nothing)");
  if (chat && (!prompt.empty() || havePromptText || !promptsPath.empty() || !benchBucket.empty()))
    return fail("--chat reads the conversation from stdin: no --prompt-ids, --prompt, "
                "--prompts or --bench with it");
  if (chat && !dumpLogits.empty())
    return fail("--dump-logits goes with one prompt, not --chat");
  if (!chat && !chatFlag.empty())
    return fail(chatFlag + " goes with --chat");
  if (chat && stream == false)
    return fail("--no-stream: --chat always streams its replies");
  if (!samplingFlag.empty() && !(sampling.temperature > 0))
    return fail(samplingFlag + " needs --temperature above 0 (at temperature 0, the default, "
                "each token is the most likely one)");
  if (options.randomWeights && options.skipHeaderChecksums)
    return fail("--skip-header-checksums checks a checkpoint's headers: not with --random-weights");
  if (stream && (!promptsPath.empty() || (!benchBucket.empty() && prompt.empty())))
    return fail(std::string(*stream ? "--stream" : "--no-stream") +
                " goes with one prompt (--prompt-ids, --prompt) or --chat");
  if (prompt.empty() && !havePromptText && promptsPath.empty() && benchBucket.empty() && !chat)
    return fail("no prompt given (--prompt-ids, --prompt, --prompts or --chat)");
  if (options.randomWeights && !options.weightsDir.empty())
    return fail("--weights and --random-weights: expected one of them");
  if (benchBucket.empty() && !benchFlag.empty())
    return fail(benchFlag + " goes with --bench");
  if (!benchBucket.empty() && (!prompt.empty() || havePromptText))
    return fail(std::string(havePromptText ? "--prompt" : "--prompt-ids") +
                " with --bench: --bench runs the prompts of --prompts FILE after timing");
  if (!benchBucket.empty() && promptsPath.empty() && !promptFlag.empty())
    return fail(promptFlag + " with --bench but no --prompts: it would do nothing");
  std::vector<PromptLine> prompts;
  if (!promptsPath.empty()) {
    std::string error;
    if (!readPrompts(promptsPath, prompts, error))
      return fail("--prompts: " + error);
  }
  if (weft::Status s = weft::engine::checkSampling(sampling); !s.isOk())
    return fail(s.message());
  weft::Progress progress = weft::Progress::forStderr("weft-run: ");
  progress.countBytes("loading weights");
  if (!quiet)
    options.progress = [&](const std::string &phase, uint64_t done, uint64_t total) {
      progress.update(phase, done, total);
    };

  // Only plans signed by a trusted key, when keys are given.
  weft::StatusOr<weft::plan::SealPolicy> sealPolicy = weft::plan::sealPolicyFor(trustedKeysPath);
  if (!sealPolicy.isOk())
    return fail("--trusted-keys: " + sealPolicy.status().message());
  weft::StatusOr<weft::plan::PlanFile> plan = weft::plan::PlanFile::open(planPath, *sealPolicy);
  if (!plan.isOk())
    return fail(plan.status().message());
  // What the plan alone can refuse, before any GPU is touched.
  options.planDir = plan->directory();
  if (weft::Status s = weft::engine::checkWeightsSource(plan->plan(), options); !s.isOk())
    return fail(s.message());
  // Predictions calibrated on another driver than this machine's may no
  // longer hold: say so (the plan still runs).
  if (!quiet) {
    std::string calibratedDriver;
    for (const weft::plan::fb::Device *d : *plan->plan().topology()->devices())
      if (d->calibrated_driver() && d->calibrated_driver()->size())
        calibratedDriver = d->calibrated_driver()->str();
    if (!calibratedDriver.empty())
      if (auto nvml = weft::detect::Nvml::load(); nvml.isOk()) {
        std::string driver;
        if ((*nvml)->driverVersion(driver) == weft::detect::kNvmlSuccess && !driver.empty() &&
            driver != calibratedDriver)
          std::cerr << "weft-run: warning: the plan's topology was calibrated with driver "
                    << calibratedDriver << ", this machine runs " << driver
                    << ": its predicted step times may not hold (calibrate again: "
                       "docs/cost-model.md)\n";
      }
  }
  if (!sampling.greedy() && !weft::engine::planSamples(plan->plan()))
    return fail("sampling (--temperature, --top-k, --top-p): the plan picks tokens by argmax "
                "(compiled with --sampling=false): it cannot sample");
  if (benchBucket == "all") { // every bucket of the plan, in its order
    benchBucket.clear();
    for (const weft::plan::fb::Bucket *b : *plan->plan().buckets())
      benchBucket += (benchBucket.empty() ? "" : ",") + b->name()->str();
  }
  if (!benchBucket.empty()) {
    std::stringstream list(benchBucket);
    std::string name;
    while (std::getline(list, name, ',')) {
      bool found = false;
      std::string names;
      for (const weft::plan::fb::Bucket *b : *plan->plan().buckets()) {
        found |= b->name()->str() == name;
        names += (names.empty() ? "" : ", ") + b->name()->str();
      }
      if (!found)
        return fail("--bench: the plan has no bucket '" + name + "' (it has " + names + ")");
    }
    // A prefill chunk runs from position 0: only decode buckets take the
    // contexts.
    if (benchContextGiven && benchBucket.find("decode") == std::string::npos)
      return fail("--bench-context sets the positions of decode steps: --bench " + benchBucket +
                  " has no decode bucket");
  }
  // The tokenizer: --tokenizer, else the one the plan carries (the
  // checkpoint's tokenizer.json), if any.
  const auto *embedded = plan->plan().tokenizer_json();
  weft::StatusOr<weft::tokenizer::LoadedTokenizer> loaded = weft::tokenizer::loadTokenizer(
      tokenizerPath,
      embedded ? std::string_view(embedded->data(), embedded->size()) : std::string_view(),
      planPath + " (tokenizer_json)");
  if (!loaded.isOk())
    return fail(loaded.status().message());
  std::optional<weft::tokenizer::Tokenizer> tokenizer = std::move(loaded->tokenizer);
  // Needed for --prompt; otherwise only to show the output as text.
  if (!loaded->embeddedProblem.isOk()) {
    if (havePromptText)
      return fail(loaded->embeddedProblem.message());
    if (!quiet)
      std::cerr << "weft-run: warning: " << loaded->embeddedProblem.message()
                << "; printing ids only\n";
  }
  bool anyText = havePromptText;
  for (const PromptLine &p : prompts)
    anyText |= p.isText;
  if (anyText && !tokenizer)
    return fail(std::string(havePromptText ? "--prompt" : "--prompts") +
                ": the plan carries no tokenizer (its checkpoint had no tokenizer.json): "
                "give --tokenizer FILE or token ids");
  // --chat: the template (--chat-template, else the plan's) and a tokenizer.
  weft::chat::LoadedChatTemplate chatTemplate;
  if (chat) {
    if (!tokenizer)
      return fail("--chat: the plan carries no tokenizer (its checkpoint had no "
                  "tokenizer.json): give --tokenizer FILE");
    auto str = [](const flatbuffers::String *t) { return t ? t->str() : std::string(); };
    weft::StatusOr<weft::chat::LoadedChatTemplate> loadedTemplate = weft::chat::loadChatTemplate(
        chatTemplatePath, str(plan->plan().chat_template()), planPath + " (chat_template)",
        str(plan->plan().bos_token()), str(plan->plan().eos_token()));
    if (!loadedTemplate.isOk())
      return fail("--chat-template: " + loadedTemplate.status().message());
    if (!loadedTemplate->chatTemplate)
      return fail("--chat: the plan carries no chat template (its checkpoint's "
                  "tokenizer_config.json had none): give --chat-template FILE");
    chatTemplate = std::move(loadedTemplate.value());
  }
  int vocab = plan->plan().model()->vocab_size();
  for (size_t i = 0; i < prompts.size(); ++i) {
    PromptLine &p = prompts[i];
    std::string where = "--prompts: line " + std::to_string(i + 1);
    if (p.isText) {
      weft::StatusOr<std::vector<int32_t>> ids = tokenizer->encode(p.text, true);
      if (!ids.isOk())
        return fail(where + ": " + ids.status().message());
      p.ids = std::move(ids.value());
    }
    if (p.ids.empty())
      return fail(where + ": the prompt has no tokens");
    for (int32_t id : p.ids)
      if (id >= vocab)
        return fail(where + ": token " + std::to_string(id) +
                    " is outside the vocabulary of " + std::to_string(vocab));
  }
  if (havePromptText) {
    if (!tokenizer)
      return fail("--prompt: the plan carries no tokenizer (its checkpoint had no "
                  "tokenizer.json): give --tokenizer FILE or --prompt-ids");
    weft::StatusOr<std::vector<int32_t>> ids = tokenizer->encode(promptText, true);
    if (!ids.isOk())
      return fail("--prompt: " + ids.status().message());
    if (ids->empty())
      return fail("--prompt: the text has no tokens");
    prompt = std::move(ids.value());
  }
  for (int32_t id : prompt)
    if (id >= vocab)
      return fail(std::string(havePromptText ? "--prompt" : "--prompt-ids") + ": token " +
                  std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(vocab));
  std::vector<int32_t> eos;
  if (const auto *e = plan->plan().model()->eos_token_ids())
    eos.assign(e->begin(), e->end());
  // Streamed output (a terminal, --stream, --chat) keeps stdout for the
  // generated text; what the run reports goes to stderr then.
  bool streaming =
      chat || (promptsPath.empty() && (stream ? *stream : isatty(fileno(stdout)) != 0));
  std::FILE *info = streaming ? stderr : stdout;
  auto start = std::chrono::steady_clock::now();
  weft::StatusOr<std::unique_ptr<weft::engine::Engine>> engine =
      weft::engine::Engine::create(std::move(plan.value()), options);
  if (!engine.isOk())
    return fail(engine.status().message());
  double loadSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    // Where the load time went, one line.
    std::string phases;
    for (const auto &[name, seconds] : (*engine)->loadPhases())
      phases += (phases.empty() ? "" : ", ") + name + " " + fmtSeconds(seconds);
    std::fprintf(info, "load phases: %s\n", phases.c_str());
  }
  if ((*engine)->collectives() != "none")
    std::fprintf(info, "all-reduce: %s\n", (*engine)->collectives().c_str());
  if ((*engine)->microBatches() > 1)
    std::fprintf(info, "pipeline: %d micro-batches in flight\n", (*engine)->microBatches());
  if (!benchBucket.empty()) {
    // Every bucket at every context, in one process (one load).
    std::stringstream list(benchBucket);
    std::string name;
    std::vector<weft::benchcal::Measurement> measured;
    while (std::getline(list, name, ','))
      for (int32_t context : benchContexts) {
        if (int rc = bench(**engine, name, benchSteps, context, measured); rc != 0)
          return rc;
        if (name.rfind("prefill", 0) == 0) // a chunk from position 0: no context to vary
          break;
      }
    if (!calibrationPath.empty()) {
      std::vector<weft::benchcal::Scale> decode = weft::benchcal::fitScales(measured, false);
      std::vector<weft::benchcal::Scale> prefill = weft::benchcal::fitScales(measured, true);
      int gpu = options.deviceMap.empty() ? 0 : options.deviceMap[0];
      cudaDeviceProp prop{};
      std::string gpuName = cudaGetDeviceProperties(&prop, gpu) == cudaSuccess
                                ? std::string(prop.name)
                                : std::string("unknown");
      std::string driver = "unknown";
      if (auto nvml = weft::detect::Nvml::load(); nvml.isOk())
        (*nvml)->driverVersion(driver);
      if (weft::Status st = weft::benchcal::writeCalibration(
              calibrationPath, int(engine->get()->plan().topology()->devices()->size()),
              gpuName, driver, decode, prefill);
          !st.isOk())
        return fail("--write-calibration: " + st.message());
      for (const weft::benchcal::Scale &sc : decode)
        std::printf("calibration: decode %lld tokens: weights x%.3f, attention x%.3f\n",
                    (long long)sc.tokens, sc.weights, sc.attention);
      for (const weft::benchcal::Scale &sc : prefill)
        std::printf("calibration: prefill %lld tokens: x%.3f\n", (long long)sc.tokens,
                    sc.weights);
      std::printf("calibration: wrote the step scales into %s (weft-compile --topology %s)\n",
                  calibrationPath.c_str(), calibrationPath.c_str());
    }
    if (prompts.empty())
      return 0;
  }
  if (!prompts.empty())
    return runPrompts(**engine, prompts, maxTokens,
                      options.randomWeights ? std::vector<int32_t>{} : eos, sampling,
                      tokenizer ? &*tokenizer : nullptr, dumpLogits, prefixCaching,
                      loadSeconds);
  std::vector<int32_t> stops = options.randomWeights ? std::vector<int32_t>{} : eos;
  if (chat)
    return weft::run::runChat(**engine, *tokenizer, chatTemplate, system, maxTokensGiven ? maxTokens : 0,
                   stops, sampling, prefixCaching, quiet);
  weft::run::TokenPrinter printer(tokenizer ? &*tokenizer : nullptr);
  std::function<void(int32_t)> onToken;
  if (streaming)
    onToken = [&](int32_t t) { printer.add(t); };
  weft::StatusOr<weft::engine::Generation> gen =
      weft::engine::generate(**engine, prompt, maxTokens, stops, sampling, onToken);
  if (!gen.isOk())
    return fail(gen.status().message());
  if (streaming) {
    printer.finish();
    std::printf("\n");
    std::fflush(stdout);
    weft::run::printSpeed(stderr, loadSeconds, prompt.size(), *gen);
  } else {
    std::cout << "tokens:";
    for (int32_t t : gen->tokens)
      std::cout << " " << t;
    std::cout << "\n";
    if (tokenizer)
      std::cout << "text: " << tokenizer->decode(gen->tokens, /*skipSpecial=*/true) << "\n";
    std::cout.flush();
    weft::run::printSpeed(stdout, loadSeconds, prompt.size(), *gen);
  }
  if (!dumpLogits.empty()) {
    std::ofstream f(dumpLogits, std::ios::binary);
    f.write(reinterpret_cast<const char *>(gen->promptLogits.data()),
            std::streamsize(gen->promptLogits.size() * sizeof(float)));
    if (!f)
      return fail(dumpLogits + ": cannot write");
  }
  return 0;
}
