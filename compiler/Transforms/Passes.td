//===- Passes.td - Graph-level passes of the weft dialect --*- tablegen -*-===//
//
// Fusion and specialization of the imported model graph. The default
// pipeline (weft-default-pipeline) runs them in the order listed below.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_COMPILER_TRANSFORMS_PASSES_TD
#define WEFT_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def FuseSiblingLinearsPass : Pass<"weft-fuse-sibling-linears", "mlir::func::FuncOp"> {
  let summary = "Merges projections of one input into one wider projection.";
  let description = [{
    Linear ops that read the same activation (Q, K and V; gate and up) are
    merged into one linear over a `weft.weight_concat` of their weights (and
    biases), followed by a `weft.split` back into the original results. The
    concatenation is a compile-time weight transform that the loader applies
    once, so decode reads one weight matrix per merged projection in one
    kernel. Linears are merged only when all have a bias or none has, and
    their weights share one dtype.

    Before:

    ```mlir
    %q = weft.linear %n, %wq : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16>
    %k = weft.linear %n, %wk : (tensor<?x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<?x1024xbf16>
    ```

    After:

    ```mlir
    %w = weft.weight_concat %wq, %wk {axis = 0 : i64}
        : (tensor<4096x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<5120x4096xbf16>
    %qk = weft.linear %n, %w : (tensor<?x4096xbf16>, tensor<5120x4096xbf16>) -> tensor<?x5120xbf16>
    %q, %k = weft.split %qk {sizes = array<i64: 4096, 1024>}
        : tensor<?x5120xbf16> -> (tensor<?x4096xbf16>, tensor<?x1024xbf16>)
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def FuseRmsNormLinearPass : Pass<"weft-fuse-rms-norm-linear", "mlir::func::FuncOp"> {
  let summary = "Fuses an RMSNorm into the projection that consumes it.";
  let description = [{
    An RMSNorm whose only user is a linear becomes the prologue of that
    projection: one region computes the norm of each token row and the
    product, so the normalized activation never goes to memory. A split that
    is the projection's only user joins the region as its epilogue. A norm
    with other users is left alone.

    Before:

    ```mlir
    %n = weft.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (...) -> tensor<?x4096xbf16>
    %y = weft.linear %n, %w : (...) -> tensor<?x6144xbf16>
    ```

    After:

    ```mlir
    %y = weft.fusion "rms_norm_linear" (%x, %g, %w) : (...) -> tensor<?x6144xbf16> {
    ^bb0(%a: ..., %b: ..., %c: ...):
      %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (...) -> tensor<?x4096xbf16>
      %r = weft.linear %n, %c : (...) -> tensor<?x6144xbf16>
      weft.yield %r : tensor<?x6144xbf16>
    }
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def FuseSwigluPass : Pass<"weft-fuse-swiglu", "mlir::func::FuncOp"> {
  let summary = "Fuses SiLU(gate) * up (or GELU-tanh) into the gate/up projection.";
  let description = [{
    When `weft.mul(weft.silu(%gate), %up)` reads two results of one
    projection region (the merged gate/up projection) and the SiLU has no
    other user, both join that region as an epilogue: the kernel writes only
    the product, half the bytes of gate and up. `weft.gelu_tanh` in place of
    the SiLU (Gemma's GeGLU) fuses alike, into a region of kind `..._geglu`.

    Before:

    ```mlir
    %gu:2 = weft.fusion "rms_norm_linear" (...) -> (tensor<?x14336xbf16>, tensor<?x14336xbf16>) {...}
    %s = weft.silu %gu#0 : tensor<?x14336xbf16>
    %m = weft.mul %s, %gu#1 : tensor<?x14336xbf16>
    ```

    After:

    ```mlir
    %m = weft.fusion "rms_norm_linear_swiglu" (...) -> tensor<?x14336xbf16> {...}
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def FuseResidualAddPass : Pass<"weft-fuse-residual-add", "mlir::func::FuncOp"> {
  let summary = "Fuses a residual add into the projection that feeds it.";
  let description = [{
    `weft.add(%residual, %proj)` where `%proj` is the only use of a linear
    (or of a region ending in one) becomes that region's epilogue: the
    kernel adds the residual as it writes the projection's output. A
    single-use `weft.rms_norm` in place of the projection (Gemma's norms of
    the attention and MLP outputs) fuses with the add into an
    `rms_norm_residual` region, one kernel.

    Before:

    ```mlir
    %o = weft.linear %a, %wo : (...) -> tensor<?x4096xbf16>
    %h = weft.add %x, %o : tensor<?x4096xbf16>
    ```

    After:

    ```mlir
    %h = weft.fusion "linear_residual" (%a, %wo, %x) : (...) -> tensor<?x4096xbf16> {...}
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def FuseRopeKvWritePass : Pass<"weft-fuse-rope-kv-write", "mlir::func::FuncOp"> {
  let summary = "Fuses rotary embedding of Q and K with the KV-cache write.";
  let description = [{
    A `weft.kv_write` whose key comes from a single-use `weft.rope` is fused
    with that rope and with the rope of the query that uses the same
    positions (the one `weft.attention` of the same layer reads): one kernel
    rotates Q and K, stores K and V in the cache, and writes only the rotated
    query. A single-use `weft.head_rms_norm` feeding either rope (Qwen3's
    query and key norms) joins the same kernel: each head is normalized
    where it is loaded.

    Before:

    ```mlir
    %qr = weft.rope %q, %pos {...}
    %kr = weft.rope %k, %pos {...}
    weft.kv_write %kr, %v, %pos, %slots, %cache {layer = 0 : i64}
    ```

    After:

    ```mlir
    %qr = weft.fusion "rope_kv_write" (%q, %pos, %k, %v, %slots, %cache) : (...) -> tensor<?x4096xbf16> {...}
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def FuseProjectionRopePass : Pass<"weft-fuse-projection-rope", "mlir::func::FuncOp"> {
  let summary = "Makes RoPE and the KV-cache write the epilogue of the QKV projection.";
  let description = [{
    A `rope_kv_write` region whose rotated and cached tensors all come from
    one projection region (`linear` or `rms_norm_linear`, Q, K and V as the
    parts of its split), and which is that projection's only consumer,
    merges with it: the projection's kernel rotates each (i, i + head_dim/2)
    pair of Q and K as it writes it, stores K and V in the cache, and yields
    only the rotated query. A decode step loses one kernel per layer.

    Left alone: regions with head norms (Qwen3's q_norm and k_norm need a
    whole head's sum first) and head widths that are not a multiple of 32
    (the GEMV pairs rows i and i + head_dim/2 in tiles of 16).

    Before:

    ```mlir
    %qkv:3 = weft.fusion "rms_norm_linear" (%x, %g, %wqkv) : (...) -> (tensor<?x4096xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>) {...}
    %qr = weft.fusion "rope_kv_write" (%qkv#0, %pos, %qkv#1, %qkv#2, %slots, %cache) : (...) -> tensor<?x4096xbf16> {...}
    ```

    After:

    ```mlir
    %qr = weft.fusion "rms_norm_linear_rope_kv_write" (%x, %g, %wqkv, %pos, %slots, %cache) : (...) -> tensor<?x4096xbf16> {...}
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def FuseLmHeadPass : Pass<"weft-fuse-lm-head", "mlir::func::FuncOp"> {
  let summary = "Fuses the final norm, the LM head and token selection.";
  let description = [{
    `weft.argmax` or `weft.sample` of `weft.logits` of a single-use
    `weft.rms_norm` becomes one region: the decode step's last kernel
    normalizes the hidden state, streams the LM head, and selects the next
    token.

    Before:

    ```mlir
    %n = weft.rms_norm %x, %g {...}
    %l = weft.logits %n, %head : (...) -> tensor<?x128256xf32>
    %t = weft.argmax %l : tensor<?x128256xf32> -> tensor<?xi32>
    ```

    After:

    ```mlir
    %lt:2 = weft.fusion "rms_norm_logits_argmax" (%x, %g, %head) : (...) -> (tensor<?x128256xf32>, tensor<?xi32>) {...}
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def FormKernelRegionsPass : Pass<"weft-form-kernel-regions", "mlir::func::FuncOp"> {
  let summary = "Wraps every op not yet fused in a region of its own.";
  let description = [{
    After the fusion passes, each remaining compute op (embedding,
    attention, a projection with no prologue or epilogue, ...) gets a
    `weft.fusion` of its own, so that every kernel the plan launches is one
    region. Weights and weight transforms stay outside: they are inputs.

    Before:

    ```mlir
    %a = weft.attention %q, %pos, %slots, %cache {...}
    ```

    After:

    ```mlir
    %a = weft.fusion "attention" (%q, %pos, %slots, %cache) : (...) -> tensor<?x4096xbf16> {...}
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

//===----------------------------------------------------------------------===//
// Partitioning
//===----------------------------------------------------------------------===//

def PartitionPass : Pass<"weft-partition", "mlir::ModuleOp"> {
  let summary = "Places the fused graph on a topology with the cost model.";
  let description = [{
    Searches pipeline splits (uneven contiguous layer ranges over any
    devices, in any order), tensor parallelism over identical NVLink-joined
    GPUs, hybrids of both, and host offload of whole layers when nothing
    else fits; prices each with the cost model and every device's memory
    (weights in `weight-dtype`, KV cache for `batch` x `context`,
    activations, workspace, context reserve), and keeps the best for
    `objective`. The decision is written as `dist` annotations on @forward
    and in the module attribute `dist.partition` (with the predicted figures
    of the runners-up and of the memory-proportional split). A model that
    fits nowhere fails with the shortfall per device and the nearest
    configurations that would fit.

    Before:

    ```mlir
    %h = weft.fusion "linear_residual" (...) : (...) -> tensor<?x4096xbf16> {...}
    %n = weft.fusion "rms_norm_linear" (%h, ...) : (...) -> ... {...}
    ```

    After (layers split between device 0 and device 1):

    ```mlir
    %h = weft.fusion "linear_residual" (...) {dist.placement = #dist.placement<stage = 0, devices = [0]>} ...
    %t = dist.transfer %h {source = 0 : i64, target = 1 : i64} : tensor<?x4096xbf16>
    %n = weft.fusion "rms_norm_linear" (%t, ...) {dist.placement = #dist.placement<stage = 1, devices = [1]>} ...
    ```
  }];
  let options = [
    Option<"topology", "topology", "std::string", /*default=*/"\"h200\"",
           "Topology: a built-in short form (rtx3090+rtx3060, 2xrtx3090:nvlink, h200) or a JSON file">,
    Option<"objective", "objective", "std::string", /*default=*/"\"throughput\"",
           "latency (one stream) or throughput (at the declared batch)">,
    Option<"batch", "batch", "int64_t", /*default=*/"1",
           "Concurrent sequences the plan must hold">,
    Option<"context", "context", "int64_t", /*default=*/"4096",
           "Maximum tokens per sequence">,
    Option<"weightDType", "weight-dtype", "std::string", /*default=*/"\"\"",
           "Weight storage: fp16, bf16, fp32, fp8, int8, int4 (default: the checkpoint's)">,
    Option<"memoryCap", "memory-cap", "std::string", /*default=*/"\"\"",
           "Usable memory caps, e.g. 10GB or 0=20GB,1=8GiB">,
    Option<"stages", "stages", "std::string", /*default=*/"\"\"",
           "Use this layout instead of searching: '0+1' (tensor parallel), '1:9,0' (pipeline)">,
  ];
  let dependentDialects = ["::weft::WeftDialect", "::weft::dist::DistDialect"];
}

//===----------------------------------------------------------------------===//
// Specialization
//===----------------------------------------------------------------------===//

def SpecializePass : Pass<"weft-specialize", "mlir::ModuleOp"> {
  let summary = "Clones the graph for each token bucket with static shapes.";
  let description = [{
    Replaces `@forward`, whose token dimension is dynamic, by one function
    per bucket with that dimension fixed: `@decode_b<N>` for each decode
    batch size and `@prefill_c<N>` for each prefill chunk. Every fusion
    region then gets `dims`: the token count and every model dimension its
    kernel depends on, all compile-time constants for code generation.

    Decode buckets are the powers of two up to `max-batch` (and `max-batch`
    itself), unless `decode-buckets` lists them.

    Before:

    ```mlir
    func.func @forward(%ids: tensor<?xi32>, ...) -> (tensor<?x128256xf32>, tensor<?xi32>)
    ```

    After (max-batch=2, prefill-chunks=128):

    ```mlir
    func.func @decode_b1(%ids: tensor<1xi32>, ...) -> (tensor<1x128256xf32>, tensor<1xi32>)
    func.func @decode_b2(%ids: tensor<2xi32>, ...) -> (tensor<2x128256xf32>, tensor<2xi32>)
    func.func @prefill_c128(%ids: tensor<128xi32>, ...) -> (tensor<128x128256xf32>, tensor<128xi32>)
    ```
  }];
  let options = [
    Option<"maxBatch", "max-batch", "int64_t", /*default=*/"64",
           "Largest decode batch (tokens of different sequences per step)">,
    ListOption<"decodeBuckets", "decode-buckets", "int64_t",
               "Explicit decode bucket sizes (overrides max-batch)">,
    ListOption<"prefillChunks", "prefill-chunks", "int64_t",
               "Prefill chunk sizes (default: the largest decode bucket + 64, rounded up to 64, when under 512; and 512)">,
  ];
  let dependentDialects = ["::weft::WeftDialect", "::mlir::func::FuncDialect"];
}

#endif // WEFT_COMPILER_TRANSFORMS_PASSES_TD
