//===- DistBase.td - The dist (distribution) dialect -------*- tablegen -*-===//
//
// Where each part of the model runs: device placement of kernel regions,
// weight shards, activation transfers between pipeline stages, and
// collectives of tensor-parallel groups.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_DIST_IR_DISTBASE_TD
#define WEFT_DIALECT_DIST_IR_DISTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::weft::dist";
  let summary = "Placement, sharding, transfers and collectives.";
  let description = [{
    The partitioner records its decision in this dialect, on top of the fused
    `weft` graph:

    - `#dist.placement` on each `weft.fusion` names its pipeline stage and
      the devices that run it (one, or a tensor-parallel group);
    - `#dist.shard` on a `weft.weight` says how a tensor-parallel group
      splits it;
    - `dist.transfer` moves an activation from one stage's device to the
      next;
    - `dist.all_reduce` sums the partial results of a tensor-parallel group.

    The module's `dist.partition` attribute records the chosen candidate,
    its predicted figures and those of the runners-up.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Dist_Attr<string name, string attrMnemonic> : AttrDef<Dist_Dialect, name> {
  let mnemonic = attrMnemonic;
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

#endif // WEFT_DIALECT_DIST_IR_DISTBASE_TD
