//===- Passes.td - Lowering to the plan dialect -----------*- tablegen -*-===//

#ifndef WEFT_TARGETS_PLAN_PASSES_TD
#define WEFT_TARGETS_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToPlanPass : Pass<"weft-lower-to-plan", "mlir::ModuleOp"> {
  let summary = "Lowers a partitioned, specialized weft module to the plan dialect.";
  let description = [{
    Each bucket function (`@decode_bN`, `@prefill_cN`) becomes a
    `plan.bucket`: every `weft.fusion` region is generated as CUDA by the
    kernel emitter (one or more kernel launches, or a cuBLASLt GEMM for
    projections of more than `max-gemv-tokens` tokens) on the devices of its
    `dist.placement`, sharded per rank for a tensor-parallel group;
    `dist.transfer` becomes a `plan.copy` and `dist.all_reduce` a
    `plan.all_reduce`. Values become `plan.buffer`s of the device that holds
    them, without offsets (`plan-assign-buffers` places them); function
    arguments and results become run-time inputs.

    The module's body is replaced by the plan: the kernel table
    (`plan.kernel`, identical sources and geometry shared across layers and
    buckets), the weight manifest (`plan.weight`, concatenations and shards
    as the loader must build them) and the KV-cache spec (`plan.kv_cache`,
    from the partition's batch, context and stages), then the buckets.

    It needs the module's `weft.model` and `dist.partition` attributes
    (`weft-partition`) and bucket functions (`weft-specialize`). A layout
    with layers in host RAM is refused.
  }];
  let options = [
    Option<"topology", "topology", "std::string", /*default=*/"\"h200\"",
           "The topology the module was partitioned for (a spec or JSON file)">,
    Option<"arch", "arch", "std::string", /*default=*/"\"\"",
           "Generate code for this architecture (sm_90) instead of each device's own">,
    Option<"blockTokens", "block-tokens", "int64_t", /*default=*/"16",
           "Tokens per KV-cache page">,
    Option<"maxGemvTokens", "max-gemv-tokens", "int64_t", /*default=*/"1",
           "Projections of more tokens run through cuBLASLt">,
  ];
  let dependentDialects = ["::weft::plan_ir::PlanDialect"];
}

#endif // WEFT_TARGETS_PLAN_PASSES_TD
