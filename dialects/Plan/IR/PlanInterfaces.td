//===- PlanInterfaces.td - Interfaces of plan steps -------*- tablegen -*-===//
//
// What every step of a bucket tells the passes and the serializer that walk
// it: the device that runs it and the arguments it binds, each with the
// device whose memory it names.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_PLAN_IR_PLANINTERFACES_TD
#define WEFT_DIALECT_PLAN_IR_PLANINTERFACES_TD

include "mlir/IR/OpBase.td"

def Plan_StepOpInterface : OpInterface<"StepOpInterface"> {
  let cppNamespace = "::weft::plan_ir";
  let description = [{
    A step of a `plan.bucket`: a kernel launch, a GEMM, a copy or an
    all-reduce. Buffer liveness (`plan-assign-buffers`), the bucket's
    verifier and the serializer see steps through this interface only, so a
    new kind of step states here which buffers it reads and writes.
  }];
  let methods = [
    InterfaceMethod<"The device that runs the step (rank 0 of a group).",
      "int64_t", "getStepDevice">,
    InterfaceMethod<[{
        Calls `fn(device, arg)` for each argument, in order, with the device
        whose memory the argument names (a copy's source and target are on
        two devices, an all-reduce's buffers on each rank's).
      }],
      "void", "forEachArg",
      (ins "::llvm::function_ref<void(int64_t, ::weft::plan_ir::ArgAttr)>":$fn)>,
  ];
}

#endif // WEFT_DIALECT_PLAN_IR_PLANINTERFACES_TD
