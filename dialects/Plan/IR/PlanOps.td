//===- PlanOps.td - The plan dialect ----------------------*- tablegen -*-===//
//
// The executable form of a compiled model, one op per runtime step. It
// mirrors the plan file (runtime/plan/plan.fbs): the lowering builds it, the
// serializer writes it out, `weft-compile --emit=plan` prints it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_PLAN_IR_PLANOPS_TD
#define WEFT_DIALECT_PLAN_IR_PLANOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/EnumAttr.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::weft::plan_ir";
  let summary = "Buffers and steps of a compiled plan.";
  let description = [{
    After partitioning and specialization, each bucket (a decode batch size
    or a prefill chunk) lowers to a `plan.bucket` that lists the buffers of
    each device (offsets into that device's arena, assigned by liveness) and
    the steps the runtime executes in order: kernel launches, cuBLASLt GEMMs,
    copies between devices and all-reduces. Arguments are `#plan.arg`
    attributes naming a buffer, a weight of the manifest, a KV-cache layer,
    a run-time input or a scalar. Kernels and weights are side tables of the
    plan, referred to by index.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

// What a step argument refers to (plan.fbs ArgKind, the same order).
def Plan_ArgKind : I32EnumAttr<"ArgKind", "what a step argument refers to", [
    I32EnumAttrCase<"Buffer", 0, "buffer">,
    I32EnumAttrCase<"Weight", 1, "weight">,
    I32EnumAttrCase<"KCache", 2, "k_cache">,
    I32EnumAttrCase<"VCache", 3, "v_cache">,
    I32EnumAttrCase<"Input", 4, "input">,
    I32EnumAttrCase<"Scalar", 5, "scalar">]> {
  let cppNamespace = "::weft::plan_ir";
  let genSpecializedAttr = 0;
}

def Plan_ArgAttr : AttrDef<Plan_Dialect, "Arg"> {
  let mnemonic = "arg";
  let summary = "What a step argument refers to.";
  let description = [{
    `kind` is one of `buffer` (index into the device's `plan.buffer`s of the
    bucket), `weight` (index into the manifest), `k_cache` / `v_cache`
    (index: layer), `input` (index: the run-time input, e.g. 0 = token ids,
    4 = logits, see InputKind in plan.fbs) or `scalar` (`value`); `offset`
    is in bytes.

    Example:

    ```mlir
    #plan.arg<kind = buffer, index = 3, offset = 0, value = 0>
    ```
  }];
  let parameters = (ins EnumParameter<Plan_ArgKind>:$kind, "int64_t":$index,
                        "int64_t":$offset, "int64_t":$value);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Plan_BucketOp : Plan_Op<"bucket", [NoTerminator, SingleBlock]> {
  let summary = "The buffers and steps of one token bucket.";
  let description = [{
    Example:

    ```mlir
    plan.bucket "decode_b1" {tokens = 1 : i64, prefill = false} {
      plan.buffer {device = 0 : i64, index = 0 : i64, offset = 0 : i64, bytes = 8192 : i64}
      plan.launch {device = 0 : i64, region = "embedding", kernel = 0 : i64,
                   grid = array<i64: 2, 1, 1>, block = array<i64: 256, 1, 1>,
                   shared = 0 : i64, args = [#plan.arg<kind = weight, index = 0, offset = 0, value = 0>,
                   #plan.arg<kind = input, index = 0, offset = 0, value = 0>,
                   #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>]}
    }
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, I64Attr:$tokens, BoolAttr:$prefill);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Plan_BufferOp : Plan_Op<"buffer", [HasParent<"BucketOp">]> {
  let summary = "A buffer in a device's arena.";
  let description = [{
    `index` is its number among the device's buffers (what `buffer`
    arguments name); `offset` and `bytes` place it in the arena.

    Example:

    ```mlir
    plan.buffer {device = 1 : i64, index = 0 : i64, offset = 4096 : i64, bytes = 8192 : i64}
    ```
  }];
  let arguments = (ins I64Attr:$device, I64Attr:$index, I64Attr:$offset, I64Attr:$bytes);
  let assemblyFormat = "attr-dict";
}

def Plan_LaunchOp : Plan_Op<"launch", [HasParent<"BucketOp">]> {
  let summary = "Launches a generated kernel.";
  let description = [{
    Runs kernel `kernel` of the plan on `device` with `grid` x `block`
    threads and `shared` bytes of dynamic shared memory; `args` are its
    parameters in order.

    Example:

    ```mlir
    plan.launch {device = 0 : i64, region = "attention", kernel = 3 : i64,
                 grid = array<i64: 1, 8, 41>, block = array<i64: 128, 1, 1>, shared = 49152 : i64,
                 args = [#plan.arg<kind = buffer, index = 2, offset = 0, value = 0>]}
    ```
  }];
  let arguments = (ins I64Attr:$device, StrAttr:$region, I64Attr:$kernel,
                       DenseI64ArrayAttr:$grid, DenseI64ArrayAttr:$block,
                       I64Attr:$shared, TypedArrayAttrBase<Plan_ArgAttr, "arguments">:$args);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def Plan_GemmOp : Plan_Op<"gemm", [HasParent<"BucketOp">]> {
  let summary = "A cuBLASLt GEMM: c[m, n] = a[m, k] · b[n, k]ᵀ (+ bias) (+ residual).";
  let description = [{
    Example:

    ```mlir
    plan.gemm {device = 0 : i64, region = "linear_residual", m = 32 : i64, n = 4096 : i64, k = 4096 : i64,
               a = #plan.arg<kind = buffer, index = 1, offset = 0, value = 0>,
               b = #plan.arg<kind = weight, index = 7, offset = 0, value = 0>,
               c = #plan.arg<kind = buffer, index = 2, offset = 0, value = 0>,
               dtype = "f16", c_dtype = "f16"}
    ```
  }];
  let arguments = (ins I64Attr:$device, StrAttr:$region, I64Attr:$m, I64Attr:$n, I64Attr:$k,
                       Plan_ArgAttr:$a, Plan_ArgAttr:$b, Plan_ArgAttr:$c,
                       OptionalAttr<Plan_ArgAttr>:$bias, OptionalAttr<Plan_ArgAttr>:$residual,
                       StrAttr:$dtype, StrAttr:$c_dtype);
  let assemblyFormat = "attr-dict";
}

def Plan_CopyOp : Plan_Op<"copy", [HasParent<"BucketOp">]> {
  let summary = "Copies an activation to the next pipeline stage's device.";
  let description = [{
    Example:

    ```mlir
    plan.copy {source_device = 0 : i64, target_device = 1 : i64, bytes = 8192 : i64,
               source = #plan.arg<kind = buffer, index = 9, offset = 0, value = 0>,
               target = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>}
    ```
  }];
  let arguments = (ins I64Attr:$source_device, I64Attr:$target_device, I64Attr:$bytes,
                       Plan_ArgAttr:$source, Plan_ArgAttr:$target);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def Plan_AllReduceOp : Plan_Op<"all_reduce", [HasParent<"BucketOp">]> {
  let summary = "Sums partial results over a tensor-parallel group.";
  let description = [{
    Rank `i` of `devices` holds partial sums in `buffers[i]` (on its own
    device); afterwards every rank holds the total there. `device` is rank
    0, which runs the step. The runtime uses NCCL when the ranks are
    distinct GPUs; otherwise it copies each partial into `scratch` on rank 0,
    adds it with kernel `accumulate_kernel` and copies the total back.

    Example:

    ```mlir
    plan.all_reduce {device = 0 : i64, devices = array<i64: 0, 1>, count = 4096 : i64, dtype = "bf16",
                     buffers = [#plan.arg<kind = buffer, index = 4, offset = 0, value = 0>,
                                #plan.arg<kind = buffer, index = 3, offset = 0, value = 0>],
                     scratch = #plan.arg<kind = buffer, index = 5, offset = 0, value = 0>,
                     accumulate_kernel = 12 : i64}
    ```
  }];
  let arguments = (ins I64Attr:$device, DenseI64ArrayAttr:$devices, I64Attr:$count,
                       StrAttr:$dtype, TypedArrayAttrBase<Plan_ArgAttr, "args">:$buffers,
                       Plan_ArgAttr:$scratch, I64Attr:$accumulate_kernel);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

#endif // WEFT_DIALECT_PLAN_IR_PLANOPS_TD
