// The C API over the C++ engine: handles own their C++ objects, statuses
// carry the C++ Status's code and message.
#include "runtime/capi/weft.h"
#include "runtime/plan/PlanSeal.h"

#include "runtime/engine/Generate.h"

#include <mutex>
#include <new>
#include <string>

struct weft_status {
  weft_status_code code;
  std::string message;
};

struct weft_engine {
  std::unique_ptr<weft::engine::Engine> engine;
  std::vector<int32_t> eos;
  bool random = false;
  std::mutex generating; // one generation at a time on one engine
};

namespace {

static_assert(int(weft::StatusCode::kInternal) == WEFT_INTERNAL &&
                  int(weft::StatusCode::kInvalidArgument) == WEFT_INVALID_ARGUMENT,
              "the C status codes mirror weft::StatusCode");

// Handed out when there is no memory left for a status of its own: an
// error is never reported as success (NULL). weft_status_free skips it.
weft_status outOfMemory{WEFT_RESOURCE_EXHAUSTED, "out of host memory for the error's message"};

weft_status *make(weft_status_code code, std::string message) {
  try {
    weft_status *s = new (std::nothrow) weft_status{code, std::move(message)};
    return s ? s : &outOfMemory;
  } catch (const std::bad_alloc &) {
    return &outOfMemory;
  }
}

weft_status *fromStatus(const weft::Status &s) {
  if (s.isOk())
    return nullptr;
  return make(weft_status_code(int(s.code())), s.message());
}

} // namespace

extern "C" {

weft_status_code weft_status_get_code(const weft_status *status) {
  return status ? status->code : WEFT_OK;
}

const char *weft_status_message(const weft_status *status) {
  return status ? status->message.c_str() : "";
}

void weft_status_free(weft_status *status) {
  if (status != &outOfMemory)
    delete status;
}

void weft_engine_options_init(weft_engine_options *options) {
  if (!options)
    return;
  *options = weft_engine_options{};
  options->cuda_graphs = 1;
  options->allow_nccl = 1;
}

void weft_sampling_init(weft_sampling *sampling) {
  if (!sampling)
    return;
  *sampling = weft_sampling{};
  sampling->top_p = 1.0f;
}

weft_status *weft_engine_create(const char *plan_path, const weft_engine_options *options,
                                weft_engine **out_engine) {
  if (!plan_path || !out_engine)
    return make(WEFT_INVALID_ARGUMENT, "weft_engine_create: plan_path and out_engine are required");
  *out_engine = nullptr;
  weft_engine_options defaults;
  weft_engine_options_init(&defaults);
  const weft_engine_options &o = options ? *options : defaults;
  if (o.device_map_size && !o.device_map)
    return make(WEFT_INVALID_ARGUMENT, "weft_engine_create: device_map is NULL but its size is not 0");
  // Options that random weights would silently ignore.
  if (o.random_weights && o.weights_dir)
    return make(WEFT_INVALID_ARGUMENT,
                "weft_engine_create: random_weights and weights_dir exclude each other");
  if (o.random_weights && o.skip_header_checksums)
    return make(WEFT_INVALID_ARGUMENT, "weft_engine_create: skip_header_checksums concerns "
                                       "checkpoint files, and random_weights reads none");
  try {
    weft::StatusOr<weft::plan::SealPolicy> seal =
        weft::plan::sealPolicyFor(o.trusted_keys ? o.trusted_keys : "");
    if (!seal.isOk())
      return fromStatus(weft::Status(seal.status().code(),
                                     "trusted_keys: " + seal.status().message()));
    weft::StatusOr<weft::plan::PlanFile> plan = weft::plan::PlanFile::open(plan_path, *seal);
    if (!plan.isOk())
      return fromStatus(plan.status());
    weft::engine::EngineOptions eo;
    eo.weightsDir = o.weights_dir ? o.weights_dir : "";
    eo.randomWeights = o.random_weights != 0;
    eo.skipHeaderChecksums = o.skip_header_checksums != 0;
    eo.cudaGraphs = o.cuda_graphs != 0;
    eo.allowNccl = o.allow_nccl != 0;
    eo.deviceMap.assign(o.device_map, o.device_map + o.device_map_size);
    std::vector<int32_t> eos;
    if (const auto *e = plan->plan().model()->eos_token_ids())
      eos.assign(e->begin(), e->end());
    weft::StatusOr<std::unique_ptr<weft::engine::Engine>> engine =
        weft::engine::Engine::create(std::move(plan.value()), eo);
    if (!engine.isOk())
      return fromStatus(engine.status());
    auto *handle = new weft_engine{std::move(engine.value()), std::move(eos), eo.randomWeights};
    *out_engine = handle;
    return nullptr;
  } catch (const std::bad_alloc &) {
    return make(WEFT_RESOURCE_EXHAUSTED, "weft_engine_create: out of host memory");
  } catch (const std::exception &e) {
    return make(WEFT_INTERNAL, std::string("weft_engine_create: ") + e.what());
  }
}

void weft_engine_destroy(weft_engine *engine) { delete engine; }

int32_t weft_engine_vocab_size(const weft_engine *engine) {
  return engine ? engine->engine->plan().model()->vocab_size() : 0;
}

weft_status *weft_engine_generate_greedy(weft_engine *engine, const int32_t *prompt,
                                         size_t prompt_size, int32_t max_tokens,
                                         int32_t *out_tokens, size_t *out_count) {
  return weft_engine_generate(engine, prompt, prompt_size, max_tokens, nullptr, out_tokens,
                              out_count);
}

weft_status *weft_engine_generate(weft_engine *engine, const int32_t *prompt,
                                  size_t prompt_size, int32_t max_tokens,
                                  const weft_sampling *sampling, int32_t *out_tokens,
                                  size_t *out_count) {
  if (out_count)
    *out_count = 0; // whatever the outcome, never a count from before
  if (!engine || (!prompt && prompt_size) || !out_tokens || !out_count)
    return make(WEFT_INVALID_ARGUMENT, "weft_engine_generate: NULL argument");
  if (max_tokens < 1)
    return make(WEFT_INVALID_ARGUMENT, "weft_engine_generate: max_tokens must be positive");
  int32_t vocab = weft_engine_vocab_size(engine);
  for (size_t i = 0; i < prompt_size; ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      return make(WEFT_INVALID_ARGUMENT, "weft_engine_generate: prompt[" +
                                             std::to_string(i) + "] = " +
                                             std::to_string(prompt[i]) +
                                             " is outside the vocabulary");
  weft::engine::SamplingOptions options;
  if (sampling) {
    options.temperature = sampling->temperature;
    options.topK = sampling->top_k;
    options.topP = sampling->top_p;
    options.seed = sampling->seed;
  }
  try {
    std::lock_guard<std::mutex> one(engine->generating);
    std::vector<int32_t> ids(prompt, prompt + prompt_size);
    weft::StatusOr<weft::engine::Generation> g = weft::engine::generate(
        *engine->engine, ids, max_tokens,
        engine->random ? std::vector<int32_t>{} : engine->eos, options);
    if (!g.isOk())
      return fromStatus(g.status());
    for (int32_t t : g->tokens)
      out_tokens[(*out_count)++] = t;
    return nullptr;
  } catch (const std::exception &e) {
    return make(WEFT_INTERNAL, std::string("weft_engine_generate: ") + e.what());
  }
}

} // extern "C"
