// weft-opt: runs Weft's passes over textual IR (the driver of the lit tests).
#include "compiler/Transforms/Passes.h"
#include "dialects/Plan/IR/PlanDialect.h"
#include "dialects/Weft/IR/WeftDialect.h"
#include "targets/Plan/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerInlinerPass();
  mlir::registerSymbolDCEPass();
  weft::registerAllWeftPasses();
  weft::plan::registerPlanLoweringPasses();

  mlir::DialectRegistry registry;
  registry.insert<weft::WeftDialect, weft::dist::DistDialect, weft::plan_ir::PlanDialect,
                  mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Weft optimizer driver\n", registry));
}
