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
include "mlir/IR/SymbolInterfaces.td"
include "dialects/Plan/IR/PlanInterfaces.td"

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
    a run-time input or a scalar. Kernels (`plan.kernel`, referred to by
    symbol) and weights (`plan.weight`, referred to by position) are tables
    at the top of the module; `plan.kv_cache` sizes the paged cache.

    `weft-lower-to-plan` builds this form from a specialized, partitioned
    weft module; `plan-assign-buffers` places each device's buffers in its
    arena by liveness; the serializer writes the plan file from it.
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

// The element type of a weight, a buffer or a GEMM (plan.fbs DType, the
// same order).
def Plan_DType : I32EnumAttr<"DType", "element type of plan data", [
    I32EnumAttrCase<"F32", 0, "f32">,
    I32EnumAttrCase<"F16", 1, "f16">,
    I32EnumAttrCase<"BF16", 2, "bf16">,
    I32EnumAttrCase<"FP8_E4M3", 3, "fp8_e4m3">,
    I32EnumAttrCase<"I8", 4, "i8">,
    I32EnumAttrCase<"I4", 5, "i4">,
    I32EnumAttrCase<"I32", 6, "i32">,
    I32EnumAttrCase<"I64", 7, "i64">]> {
  let cppNamespace = "::weft::plan_ir";
  let genSpecializedAttr = 0;
}

def Plan_DTypeAttr : EnumAttr<Plan_Dialect, Plan_DType, "dtype"> {
  let summary = "An element type: f32, f16, bf16, fp8_e4m3, i8, i4, i32 or i64.";
  let assemblyFormat = "`<` $value `>`";
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

def Plan_ParamAttr : AttrDef<Plan_Dialect, "Param"> {
  let mnemonic = "param";
  let summary = "What a kernel parameter must be bound to.";
  let description = [{
    The argument kind, element type and size in bytes (0: sized at run
    time, e.g. the block tables) that every launch of the kernel binds to
    this parameter; `buffer` also admits a run-time `input`.

    Example:

    ```mlir
    #plan.param<kind = buffer, dtype = f16, bytes = 8192>
    ```
  }];
  let parameters = (ins EnumParameter<Plan_ArgKind>:$kind, EnumParameter<Plan_DType>:$dtype,
                        "int64_t":$bytes);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Plan_SourceTensorAttr : AttrDef<Plan_Dialect, "SourceTensor"> {
  let mnemonic = "source";
  let summary = "A checkpoint tensor a weight is read from.";
  let description = [{
    Example:

    ```mlir
    #plan.source<name = "model.layers.0.self_attn.q_proj.weight", shape = [4096, 4096]>
    ```
  }];
  let parameters = (ins StringRefParameter<"tensor name">:$name,
                        "::mlir::DenseI64ArrayAttr":$shape);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Plan_KernelOp : Plan_Op<"kernel", [HasParent<"::mlir::ModuleOp">, Symbol]> {
  let summary = "A generated kernel and its launch geometry.";
  let description = [{
    An entry of the plan's kernel table, named by its symbol
    (`plan.launch {kernel = @sym}`); in the plan file a kernel is its
    position among the module's `plan.kernel`s. `entry` is the CUDA entry
    point (one binary may serve several kernels of different geometry, each
    with its own symbol),
    `region` the kind of region it was generated from, `archs` the
    architectures it is compiled for, `params` what each launch must bind
    and `source` the CUDA translation unit (left out of printouts meant for
    reading; a kernel without one cannot be serialized). `instance`, when
    present, is the entry as a C++ name expression: the kernel library's
    `__global__` template instantiated with the source's `Config`, which
    NVRTC lowers to the symbol the binary holds; without it the source
    defines an `extern "C"` function named `entry`. A `cooperative`
    kernel needs every block resident at once (a persistent kernel whose
    blocks wait on each other, weft/decode_stream.cuh): the runtime launches
    it cooperatively.

    Example:

    ```mlir
    plan.kernel @wf_embedding {entry = "wf_embedding", region = "embedding", archs = ["sm_90"],
                 grid = array<i64: 2, 1, 1>, block = array<i64: 256, 1, 1>, shared = 0 : i64,
                 params = [#plan.param<kind = weight, dtype = f16, bytes = 1024>]}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$entry, StrAttr:$region,
                       StrArrayAttr:$archs, DenseI64ArrayAttr:$grid, DenseI64ArrayAttr:$block,
                       I64Attr:$shared, TypedArrayAttrBase<Plan_ParamAttr, "parameters">:$params,
                       OptionalAttr<StrAttr>:$source, UnitAttr:$cooperative,
                       OptionalAttr<StrAttr>:$instance);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def Plan_WeightOp : Plan_Op<"weight", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "A weight of the manifest.";
  let description = [{
    An entry of the weight manifest; `weight` arguments name the N-th
    `plan.weight` of the module. The loader reads `sources` (concatenated
    along `concat_axis` when it is present), keeps shard `rank` of
    `shard_parts` along `shard_axis` on each of `devices` (-1: whole), and
    checks the result against `dtype` and `shape`.

    Example:

    ```mlir
    plan.weight {name = "model.norm.weight", dtype = #plan.dtype<f16>, shape = array<i64: 4096>,
                 sources = [#plan.source<name = "model.norm.weight", shape = [4096]>],
                 shard_axis = -1 : i64, shard_parts = 1 : i64, devices = array<i64: 0>}
    ```
  }];
  let arguments = (ins StrAttr:$name, Plan_DTypeAttr:$dtype, DenseI64ArrayAttr:$shape,
                       TypedArrayAttrBase<Plan_SourceTensorAttr, "source tensors">:$sources,
                       OptionalAttr<I64Attr>:$concat_axis, I64Attr:$shard_axis,
                       I64Attr:$shard_parts, DenseI64ArrayAttr:$devices);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def Plan_KvCacheOp : Plan_Op<"kv_cache", [HasParent<"::mlir::ModuleOp">]> {
  let summary = "The paged KV cache.";
  let description = [{
    Pages of `block_tokens` tokens; up to `max_sequences` sequences of at
    most `max_blocks_per_sequence` pages each, through their block tables.
    Device `d` holds `blocks[d]` pages of `kv_heads[d]` heads (0: it holds
    no layers; a tensor-parallel group splits the heads).

    Example:

    ```mlir
    plan.kv_cache {block_tokens = 16 : i64, dtype = #plan.dtype<f16>, num_kv_heads = 8 : i64,
                   head_dim = 128 : i64, max_sequences = 64 : i64,
                   max_blocks_per_sequence = 256 : i64, blocks = array<i64: 256>,
                   kv_heads = array<i64: 8>}
    ```
  }];
  let arguments = (ins I64Attr:$block_tokens, Plan_DTypeAttr:$dtype, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, I64Attr:$max_sequences,
                       I64Attr:$max_blocks_per_sequence, DenseI64ArrayAttr:$blocks,
                       DenseI64ArrayAttr:$kv_heads);
  let assemblyFormat = "attr-dict";
}

def Plan_BucketOp : Plan_Op<"bucket", [NoTerminator, SingleBlock]> {
  let summary = "The buffers and steps of one token bucket.";
  let description = [{
    Example:

    ```mlir
    plan.bucket "decode_b1" {tokens = 1 : i64, prefill = false} {
      plan.buffer {device = 0 : i64, index = 0 : i64, offset = 0 : i64, bytes = 8192 : i64}
      plan.launch {device = 0 : i64, region = "embedding", kernel = @wf_embedding,
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
    arguments name); `offset` and `bytes` place it in the arena. The
    lowering leaves `offset` out; `plan-assign-buffers` sets it.

    Example:

    ```mlir
    plan.buffer {device = 1 : i64, index = 0 : i64, offset = 4096 : i64, bytes = 8192 : i64}
    ```
  }];
  let arguments = (ins I64Attr:$device, I64Attr:$index, OptionalAttr<I64Attr>:$offset,
                       I64Attr:$bytes);
  let assemblyFormat = "attr-dict";
}

def Plan_LaunchOp : Plan_Op<"launch", [HasParent<"BucketOp">,
    DeclareOpInterfaceMethods<Plan_StepOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Launches a generated kernel.";
  let description = [{
    Runs `plan.kernel` `kernel` on `device` with `grid` x `block`
    threads and `shared` bytes of dynamic shared memory; `args` are its
    parameters in order.

    Example:

    ```mlir
    plan.launch {device = 0 : i64, region = "attention", kernel = @wf_attention_decode,
                 grid = array<i64: 1, 8, 41>, block = array<i64: 128, 1, 1>, shared = 49152 : i64,
                 args = [#plan.arg<kind = buffer, index = 2, offset = 0, value = 0>]}
    ```
  }];
  let arguments = (ins I64Attr:$device, StrAttr:$region, FlatSymbolRefAttr:$kernel,
                       DenseI64ArrayAttr:$grid, DenseI64ArrayAttr:$block,
                       I64Attr:$shared, TypedArrayAttrBase<Plan_ArgAttr, "arguments">:$args);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def Plan_GemmOp : Plan_Op<"gemm", [HasParent<"BucketOp">,
    DeclareOpInterfaceMethods<Plan_StepOpInterface>]> {
  let summary = "A cuBLASLt GEMM: c[m, n] = a[m, k] · b[n, k]ᵀ (+ bias) (+ residual).";
  let description = [{
    Example:

    ```mlir
    plan.gemm {device = 0 : i64, region = "linear_residual", m = 32 : i64, n = 4096 : i64, k = 4096 : i64,
               a = #plan.arg<kind = buffer, index = 1, offset = 0, value = 0>,
               b = #plan.arg<kind = weight, index = 7, offset = 0, value = 0>,
               c = #plan.arg<kind = buffer, index = 2, offset = 0, value = 0>,
               dtype = #plan.dtype<f16>, c_dtype = #plan.dtype<f16>}
    ```
  }];
  let arguments = (ins I64Attr:$device, StrAttr:$region, I64Attr:$m, I64Attr:$n, I64Attr:$k,
                       Plan_ArgAttr:$a, Plan_ArgAttr:$b, Plan_ArgAttr:$c,
                       OptionalAttr<Plan_ArgAttr>:$bias, OptionalAttr<Plan_ArgAttr>:$residual,
                       Plan_DTypeAttr:$dtype, Plan_DTypeAttr:$c_dtype);
  let assemblyFormat = "attr-dict";
}

def Plan_CopyOp : Plan_Op<"copy", [HasParent<"BucketOp">,
    DeclareOpInterfaceMethods<Plan_StepOpInterface>]> {
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

def Plan_AllReduceOp : Plan_Op<"all_reduce", [HasParent<"BucketOp">,
    DeclareOpInterfaceMethods<Plan_StepOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Sums partial results over a tensor-parallel group.";
  let description = [{
    Rank `i` of `devices` holds partial sums in `buffers[i]` (on its own
    device); afterwards every rank holds the total there. `device` is rank
    0, which runs the step. The runtime uses NCCL when the ranks are
    distinct GPUs; otherwise it copies each partial into `scratch` on rank 0,
    adds it with the `plan.kernel` `accumulate_kernel` and copies the total
    back.

    Example:

    ```mlir
    plan.all_reduce {device = 0 : i64, devices = array<i64: 0, 1>, count = 4096 : i64,
                     dtype = #plan.dtype<bf16>,
                     buffers = [#plan.arg<kind = buffer, index = 4, offset = 0, value = 0>,
                                #plan.arg<kind = buffer, index = 3, offset = 0, value = 0>],
                     scratch = #plan.arg<kind = buffer, index = 5, offset = 0, value = 0>,
                     accumulate_kernel = @weft_accumulate_bf16_n4096}
    ```
  }];
  let arguments = (ins I64Attr:$device, DenseI64ArrayAttr:$devices, I64Attr:$count,
                       Plan_DTypeAttr:$dtype, TypedArrayAttrBase<Plan_ArgAttr, "args">:$buffers,
                       Plan_ArgAttr:$scratch, FlatSymbolRefAttr:$accumulate_kernel);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

#endif // WEFT_DIALECT_PLAN_IR_PLANOPS_TD
