//===- WeftTypes.td - Types of the weft dialect ------------*- tablegen -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTTYPES_TD
#define WEFT_DIALECT_WEFT_IR_WEFTTYPES_TD

include "dialects/Weft/IR/WeftBase.td"

def Weft_KvCacheType : Weft_Type<"KvCache", "kv_cache"> {
  let summary = "The key/value cache of every decoder layer.";
  let description = [{
    An opaque handle to the attention key/value cache of all layers. The
    cache holds, for each sequence slot and position, the rotated key and the
    value of every KV head of every layer. How it is laid out in memory (paged
    blocks, block tables) is decided when the graph is lowered to a plan; at
    this level `weft.kv_write` stores into it and `weft.attention` reads it.

    Example:

    ```mlir
    !weft.kv_cache<layers = 32, kv_heads = 8, head_dim = 128, dtype = f16>
    ```
  }];
  let parameters = (ins "int64_t":$layers, "int64_t":$kv_heads,
                        "int64_t":$head_dim, "::mlir::Type":$dtype);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // WEFT_DIALECT_WEFT_IR_WEFTTYPES_TD
