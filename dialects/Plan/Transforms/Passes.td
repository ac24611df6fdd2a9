//===- Passes.td - Passes over the plan dialect -----------*- tablegen -*-===//

#ifndef WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_TD
#define WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanAssignBuffersPass : Pass<"plan-assign-buffers", "mlir::ModuleOp"> {
  let summary = "Places each device's buffers in its arena by liveness.";
  let description = [{
    Within each `plan.bucket`, a buffer is live from the first step that
    names it to the last (steps report their arguments through
    `StepOpInterface`). Per device, buffers are placed largest first (ties in
    index order) at the lowest offset, aligned to 256 bytes, that overlaps no
    buffer already placed whose lifetime overlaps its own; a buffer no step
    names is live nowhere and goes at offset 0. The result is each buffer's
    `offset`; the arena of a device is the end of its last buffer, rounded
    up to 256 bytes.

    Example: two buffers live at once share no bytes, a third written after
    the first is last read reuses its bytes.

    ```mlir
    plan.bucket "decode_b1" {prefill = false, tokens = 1 : i64} {
      plan.buffer {bytes = 512 : i64, device = 0 : i64, index = 0 : i64}   // offset = 0
      plan.buffer {bytes = 256 : i64, device = 0 : i64, index = 1 : i64}   // offset = 512
      plan.buffer {bytes = 256 : i64, device = 0 : i64, index = 2 : i64}   // offset = 0
      ...
    }
    ```
  }];
}

#endif // WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_TD
