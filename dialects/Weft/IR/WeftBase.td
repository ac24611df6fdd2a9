//===- WeftBase.td - The weft model-graph dialect ----------*- tablegen -*-===//
//
// The `weft` dialect: tensor-level ops of a decoder-only transformer, with
// static model dimensions and a dynamic token dimension.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTBASE_TD
#define WEFT_DIALECT_WEFT_IR_WEFTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Weft_Dialect : Dialect {
  let name = "weft";
  let cppNamespace = "::weft";
  let summary = "The model graph of a decoder-only transformer.";
  let description = [{
    The `weft` dialect holds a model as the Hugging Face importer produces it:
    one op per tensor-level computation of a Llama-family decoder (embedding,
    RMSNorm, linear projections, rotary embedding, grouped-query attention
    over a KV cache, SiLU, elementwise arithmetic, logits and token
    selection). Weights are named references (`weft.weight`) that carry shape
    and dtype but no data; the plan's weight manifest maps them to the
    checkpoint's tensors.

    Every model dimension (hidden size, heads, head dim, intermediate size,
    vocabulary) is static. Only the token dimension, the leading dimension of
    activations, may be dynamic (`?`); specialization later replaces it with
    the bucket sizes the plan is compiled for.

    Activations carry the model's compute dtype (f16, bf16 or f32); norms,
    softmax and logits accumulate in f32.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Weft_Op<string mnemonic, list<Trait> traits = []>
    : Op<Weft_Dialect, mnemonic, traits>;

class Weft_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Weft_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

// How weft.rope scales its frequencies for long contexts.
def Weft_RopeKind : I32EnumAttr<"RopeKind", "rotary frequency scaling", [
    I32EnumAttrCase<"Default", 0, "default">,
    I32EnumAttrCase<"Linear", 1, "linear">,
    I32EnumAttrCase<"Llama3", 2, "llama3">]> {
  let cppNamespace = "::weft";
  let genSpecializedAttr = 0;
}
def Weft_RopeKindAttr : EnumAttr<Weft_Dialect, Weft_RopeKind, "rope_kind"> {
  let assemblyFormat = "`<` $value `>`";
}

// How a quantized weight's codes encode numbers.
def Weft_QuantFormat : I32EnumAttr<"QuantFormat", "the encoding of quantized weight codes", [
    I32EnumAttrCase<"Int", 0, "int">,
    I32EnumAttrCase<"E4M3", 1, "e4m3">]> {
  let cppNamespace = "::weft";
  let genSpecializedAttr = 0;
}

// How a projection's weight is stored quantized: `bits`-bit codes with one
// scale (and, for integer codes, one zero point) per `group` input features
// of each output row.
def Weft_QuantAttr : AttrDef<Weft_Dialect, "Quant"> {
  let mnemonic = "quant";
  let summary = "grouped quantization of a weight";
  let description = [{
    `#weft.quant<bits = 4, group = 128>`: each row of the `[out, in]`
    weight is stored as `bits`-bit codes with one scale per `group`
    consecutive input features (`group` divides `in`; the whole row when it
    equals `in`).

    - `format = int` (the default): unsigned integer codes (4 or 8 bits) and
      a zero point per group; the weight's value is `(code - zero) * scale`,
      rounded to the weight's element type.
    - `format = e4m3`: 8-bit floats (FP8 E4M3, finite, largest 448) and one
      f32 scale per row (`group` = `in`); the value is `code * scale`, the
      scale applied to the dot products (tensor cores need sm_89 or newer).

    `tiled = true` (4-bit integer codes of a weight whose rows are a
    multiple of 16 and inputs of 128): the codes are stored in 16-row
    tiles, 128 inputs at a time (`[out / 16][in / 128][16][16 words]`), so
    that the decode kernels' warps read whole 1 KiB runs of them
    (weft/mma_weights.cuh, PackedRows); `codesTileable` says which weights
    the importer stores so. Tensor parallelism cuts whole tiles, or stores
    the weight's codes row by row where its cut would fall inside one.

    The type the IR shows is the one the codes are expanded to.
  }];
  let parameters = (ins "int64_t":$bits, "int64_t":$group,
                        DefaultValuedParameter<"::weft::QuantFormat",
                                               "::weft::QuantFormat::Int">:$format,
                        DefaultValuedParameter<"bool", "false">:$tiled);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "int64_t":$bits, "int64_t":$group), [{
      return $_get($_ctxt, bits, group, ::weft::QuantFormat::Int, false);
    }]>,
    AttrBuilder<(ins "int64_t":$bits, "int64_t":$group, "::weft::QuantFormat":$format), [{
      return $_get($_ctxt, bits, group, format, false);
    }]>
  ];
}

// What a module was imported from: the model's shape and options, which
// passes and the plan builder read back (modelConfigFromModule).
def Weft_ModelAttr : AttrDef<Weft_Dialect, "Model"> {
  let mnemonic = "model";
  let summary = "the model a module was imported from";
  let description = [{
    The module attribute `weft.model`: the Hugging Face architecture, the
    name (a checkpoint directory or a built-in), the weights' float type and
    the decoder's dimensions and options. Every dimension is positive.

    ```mlir
    module attributes {weft.model = #weft.model<architecture = "LlamaForCausalLM",
        name = "llama-3.2-1b", dtype = bf16, hidden_size = 2048, ...>} { ... }
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the Hugging Face `architectures` entry">:$architecture,
    StringRefParameter<"a checkpoint directory or a built-in name">:$name,
    "::mlir::Type":$dtype,
    "int64_t":$hidden_size,
    "int64_t":$intermediate_size,
    "int64_t":$num_layers,
    "int64_t":$num_heads,
    "int64_t":$num_kv_heads,
    "int64_t":$head_dim,
    "int64_t":$vocab_size,
    "int64_t":$max_position_embeddings,
    "::mlir::FloatAttr":$rms_norm_eps,
    "::mlir::FloatAttr":$rope_theta,
    EnumParameter<Weft_RopeKind>:$rope_type,
    "::mlir::BoolAttr":$tie_word_embeddings,
    "::mlir::BoolAttr":$qkv_bias,
    "::mlir::BoolAttr":$o_bias,
    "::mlir::BoolAttr":$mlp_bias,
    OptionalParameter<"std::optional<int64_t>">:$sliding_window);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // WEFT_DIALECT_WEFT_IR_WEFTBASE_TD
