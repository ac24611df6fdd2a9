/* Compiled as C99: proves weft.h is a C header, and exercises the error path
 * (a missing plan gives a status with a code and a one-line message). */
#include "runtime/capi/weft.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  weft_engine_options options;
  weft_engine *engine = NULL;
  weft_status *status;
  weft_engine_options_init(&options);
  options.random_weights = 1;
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
