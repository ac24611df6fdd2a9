/* Compiled as C99: proves weft.h is a C header, checks the defaults of the
 * option structs, and exercises the error paths (NULL arguments, a missing
 * plan, a plan not signed by a trusted key, options random weights would
 * ignore: a status with a code and a one-line message). Usage: weft-capi-c-check PLAN [TRUSTED_KEYS]. */
#include "runtime/capi/weft.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  weft_engine_options options;
  weft_engine *engine = NULL;
  weft_status *status;
  weft_sampling sampling;
  int32_t out[4];
  size_t count = 0;
  weft_engine_options_init(&options);
  weft_sampling_init(&sampling);
  if (options.allow_nccl != 1 || options.cuda_graphs != 1 || sampling.top_p != 1.0f ||
      sampling.temperature != 0.0f || options.trusted_keys != NULL)
    return 3; /* defaults: NCCL and graphs on, greedy, any intact plan */
  /* NULL arguments are an error status, never a crash, and leave no count
   * from before. */
  count = 7;
  status = weft_engine_generate(NULL, NULL, 0, 4, &sampling, out, &count);
  if (!status || weft_status_get_code(status) != WEFT_INVALID_ARGUMENT || count != 0)
    return 4;
  weft_status_free(status);
  /* Options that random weights would ignore are refused, not dropped. */
  options.random_weights = 1;
  options.weights_dir = "checkpoint";
  status = weft_engine_create("missing.weft", &options, &engine);
  if (!status || weft_status_get_code(status) != WEFT_INVALID_ARGUMENT || engine != NULL)
    return 5;
  weft_status_free(status);
  options.weights_dir = NULL;
  options.skip_header_checksums = 1;
  status = weft_engine_create("missing.weft", &options, &engine);
  if (!status || weft_status_get_code(status) != WEFT_INVALID_ARGUMENT || engine != NULL)
    return 6;
  weft_status_free(status);
  options.skip_header_checksums = 0;
  if (argc > 2)
    options.trusted_keys = argv[2];
  status = weft_engine_create(argc > 1 ? argv[1] : "missing.weft", &options, &engine);
  if (!status) {
    weft_engine_destroy(engine);
    return 0;
  }
  printf("code %d: %s\n", (int)weft_status_get_code(status), weft_status_message(status));
  if (engine != NULL || strchr(weft_status_message(status), '\n') != NULL)
    return 2; /* an error must leave no engine and be one line */
  weft_status_free(status);
  return 1;
}
