// The weft dialect: the model graph of a decoder-only transformer.
#ifndef WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H_
#define WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H_

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "dialects/Weft/IR/WeftDialect.h.inc"

#endif // WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H_
