/* The Weft runtime's C API: load a plan and its weights, generate tokens.
 * Opaque handles, explicit destroy functions, and status objects that carry
 * a one-line message; no function aborts or exits. C99 and C++ compatible. */
#ifndef WEFT_RUNTIME_CAPI_WEFT_H_
#define WEFT_RUNTIME_CAPI_WEFT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_status_code {
  WEFT_OK = 0,
  WEFT_INVALID_ARGUMENT,
  WEFT_NOT_FOUND,
  WEFT_OUT_OF_RANGE,
  WEFT_UNIMPLEMENTED,
  WEFT_FAILED_PRECONDITION,
  WEFT_RESOURCE_EXHAUSTED,
  WEFT_INTERNAL
} weft_status_code;

/* NULL means success; otherwise the caller owns it and frees it with
 * weft_status_free (when even the status cannot be allocated, a shared one
 * with code WEFT_RESOURCE_EXHAUSTED comes back, which free leaves alone). */
typedef struct weft_status weft_status;
weft_status_code weft_status_get_code(const weft_status *status);
const char *weft_status_message(const weft_status *status); /* "" for NULL */
void weft_status_free(weft_status *status);

typedef struct weft_engine_options {
  const char *weights_dir;       /* checkpoint directory, or NULL */
  int random_weights;            /* nonzero: random weights (benchmarks); an
                                    error with weights_dir or
                                    skip_header_checksums */
  int skip_header_checksums;     /* nonzero: accept other files with equal tensors */
  int cuda_graphs;               /* nonzero (default): replay buckets as graphs */
  const int *device_map;         /* physical GPU per declared device, or NULL */
  size_t device_map_size;
  int allow_nccl;                /* nonzero (default): NCCL for tensor-parallel
                                    all-reduces across distinct GPUs */
  const char *trusted_keys;      /* file of trusted ed25519 public keys (one per
                                    line, 64 hex digits): accept only plans
                                    signed by one of them; NULL (default): any
                                    plan whose checksum holds */
} weft_engine_options;

/* Fills `options` with the defaults. */
void weft_engine_options_init(weft_engine_options *options);

typedef struct weft_engine weft_engine;

/* Verifies the plan at `plan_path`, loads kernels and weights. On success
 * *out_engine is set and NULL is returned. */
weft_status *weft_engine_create(const char *plan_path, const weft_engine_options *options,
                                weft_engine **out_engine);
void weft_engine_destroy(weft_engine *engine);

/* Vocabulary size of the loaded model. */
int32_t weft_engine_vocab_size(const weft_engine *engine);

/* Greedy generation for one sequence: writes up to `max_tokens` ids to
 * `out_tokens` (capacity `max_tokens`) and their count to *out_count (0 on
 * any error). Stops early at the model's end-of-sequence tokens unless
 * weights are random. One engine generates for one caller at a time: calls
 * from several threads on one engine are safe and run one after another
 * (for many concurrent sequences, serve them: weft-serve). */
weft_status *weft_engine_generate_greedy(weft_engine *engine, const int32_t *prompt,
                                         size_t prompt_size, int32_t max_tokens,
                                         int32_t *out_tokens, size_t *out_count);

/* How tokens are chosen: temperature 0 is greedy; above 0 the plan must
 * sample (weft-compile --sampling). top_k 0 and top_p 1 turn those cuts
 * off; `seed` makes a run repeatable. */
typedef struct weft_sampling {
  float temperature;
  int32_t top_k;
  float top_p;
  uint64_t seed;
} weft_sampling;

/* Fills `sampling` with greedy defaults (temperature 0, top_k 0, top_p 1). */
void weft_sampling_init(weft_sampling *sampling);

/* Like weft_engine_generate_greedy, with `sampling` (NULL: greedy). */
weft_status *weft_engine_generate(weft_engine *engine, const int32_t *prompt,
                                  size_t prompt_size, int32_t max_tokens,
                                  const weft_sampling *sampling, int32_t *out_tokens,
                                  size_t *out_count);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RUNTIME_CAPI_WEFT_H_ */
