//===- DistOps.td - Attributes and ops of the dist dialect -*- tablegen -*-===//

#ifndef WEFT_DIALECT_DIST_IR_DISTOPS_TD
#define WEFT_DIALECT_DIST_IR_DISTOPS_TD

include "dialects/Dist/IR/DistBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

def Dist_PlacementAttr : Dist_Attr<"Placement", "placement"> {
  let summary = "The pipeline stage and devices of a kernel region.";
  let description = [{
    `stage` is the pipeline stage (0 first); `devices` the topology's device
    indices that run the region: one device, or a tensor-parallel group in
    which each device computes its shard.

    Example:

    ```mlir
    weft.fusion "attention" (...) {dist.placement = #dist.placement<stage = 1, devices = [2, 3]>} ...
    ```
  }];
  let parameters = (ins "int64_t":$stage, "::mlir::DenseI64ArrayAttr":$devices);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dist_ShardAttr : Dist_Attr<"Shard", "shard"> {
  let summary = "How a tensor-parallel group splits a weight.";
  let description = [{
    The weight is cut into `parts` equal slices along `axis`; device `i` of
    the group holds slice `i`. Column-parallel projections (Q/K/V, gate/up)
    split the output axis 0; row-parallel ones (O, down) the input axis 1
    and end with `dist.all_reduce`.

    Example:

    ```mlir
    %w = weft.weight "model.layers.0.mlp.down_proj.weight" {dist.shard = #dist.shard<axis = 1, parts = 2>} : tensor<4096x14336xbf16>
    ```
  }];
  let parameters = (ins "int64_t":$axis, "int64_t":$parts);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dist_TransferOp : Dist_Op<"transfer", [Pure, SameOperandsAndResultType]> {
  let summary = "Moves an activation between pipeline stages.";
  let description = [{
    The value computed on device `source` (the last device of a stage) is
    sent to device `target` (the first device of the next stage): an NCCL
    send/receive or a peer copy at run time. The value itself is unchanged.

    Example:

    ```mlir
    %h1 = dist.transfer %h {source = 0 : i64, target = 1 : i64} : tensor<1x4096xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$source,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$target);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dist_AllReduceOp : Dist_Op<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "Sums the partial results of a tensor-parallel group.";
  let description = [{
    Each device of `devices` holds a partial sum (after a row-parallel
    projection); afterwards every device holds the total. At the graph level
    the value is the full result, so the op is an identity for the
    interpreter; it marks where the runtime runs an NCCL all-reduce.

    Example:

    ```mlir
    %o = dist.all_reduce %partial {devices = array<i64: 0, 1>} : tensor<1x4096xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$devices);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // WEFT_DIALECT_DIST_IR_DISTOPS_TD
