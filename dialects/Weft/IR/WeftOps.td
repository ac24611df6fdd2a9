//===- WeftOps.td - Ops of the weft dialect ----------------*- tablegen -*-===//
//
// Tensor-level ops of a Llama-family decoder. Shapes follow one convention:
// activations are rank-2 `tensor<T x F x dtype>` with a (possibly dynamic)
// token dimension T and a static feature dimension F; per-token vectors
// (token ids, positions, sequence slots) are `tensor<T x i32>`.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTOPS_TD
#define WEFT_DIALECT_WEFT_IR_WEFTOPS_TD

include "dialects/Weft/IR/WeftBase.td"
include "dialects/Weft/IR/WeftInterfaces.td"
include "dialects/Weft/IR/WeftTypes.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

def Weft_Activation : RankedTensorOf<[F16, BF16, F32], [HasAnyRankOfPred<[2]>]>;
def Weft_TokenVector : RankedTensorOf<[I32], [HasAnyRankOfPred<[1]>]>;
def Weft_WeightTensor : RankedTensorOf<[AnyFloat, AnyInteger]>;
def Weft_Logits : RankedTensorOf<[F32], [HasAnyRankOfPred<[2]>]>;
def Weft_PerTokenF32 : RankedTensorOf<[F32], [HasAnyRankOfPred<[1]>]>;

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Weft_WeightOp : Weft_Op<"weight", [Pure]> {
  let summary = "A named reference to a weight tensor of the checkpoint.";
  let description = [{
    Names a tensor of the model's weights and gives its shape and dtype. The
    IR holds no weight data: the name is the key of the tensor in the
    checkpoint (after any weight transforms the compiler records), and the
    runtime binds it to device memory when it loads a plan.

    The shape must be static and non-empty.

    Example:

    ```mlir
    %w = weft.weight "model.layers.0.self_attn.q_proj.weight" : tensor<4096x4096xbf16>
    ```

    A projection stored quantized carries `quant`: the tensor type is the
    matrix its codes expand to, which is what the interpreter and the
    analyses see; kernels read the codes and their scales.

    ```mlir
    %w = weft.weight "model.layers.0.mlp.down_proj.weight"
        {quant = #weft.quant<bits = 4, group = 128>} : tensor<4096x14336xf16>
    ```

    A weight of a decoder layer carries the layer's index in `layer` (the
    importer sets it from the family's layer function, whatever the
    checkpoint calls its tensors): the partitioner places the weight, and
    the region that reads it, with that layer.
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<Weft_QuantAttr>:$quant,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$layer);
  let results = (outs Weft_WeightTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding and normalization
//===----------------------------------------------------------------------===//

def Weft_EmbeddingOp : Weft_Op<"embedding", [Pure, DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>]> {
  let summary = "Gathers the embedding rows of the given token ids.";
  let description = [{
    `result[t, :] = table[ids[t], :]`, converted to the result's dtype. The
    table is `tensor<V x H>`; token ids outside `[0, V)` are an error at run
    time. With `scale` (Gemma: sqrt(H)), each row is multiplied by the scale
    rounded to the result's dtype, and the product rounded again, as
    Gemma's embedding normalizer does.

    Example:

    ```mlir
    %x = weft.embedding %table, %ids
        : (tensor<128256x4096xbf16>, tensor<?xi32>) -> tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins Weft_WeightTensor:$table, Weft_TokenVector:$ids,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The factor of every row as the model applies it: `scale` rounded to
    // the result's element type (1 without a scale); the one definition
    // the interpreter and the kernels share.
    double roundedScale();
  }];
}

def Weft_RmsNormOp : Weft_Op<"rms_norm", [Pure,
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Root-mean-square layer normalization.";
  let description = [{
    For each token row `x` of width H:
    `result = x / sqrt(mean(x^2) + epsilon) * weight`, computed in f32 and
    rounded to the input's dtype before the multiplication by `weight`, as
    Hugging Face's LlamaRMSNorm does. With a `weight_offset` (Gemma: 1.0)
    the factor is `weight_offset + weight`, and the normalized row times it
    is taken in f32 and rounded once, as Gemma's RMSNorm does.

    Example:

    ```mlir
    %y = weft.rms_norm %x, %w {epsilon = 1.0e-05 : f64}
        : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$input, Weft_WeightTensor:$weight,
                       F64Attr:$epsilon, OptionalAttr<F64Attr>:$weight_offset);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The constant added to the weight (0 unless weight_offset is set).
    double weightOffsetOrZero() {
      return getWeightOffset() ? getWeightOffset()->convertToDouble() : 0.0;
    }
  }];
}

def Weft_HeadRmsNormOp : Weft_Op<"head_rms_norm", [Pure,
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Root-mean-square normalization of each attention head.";
  let description = [{
    Splits each token row into heads of `head_dim` features and normalizes
    every head on its own, with one `weight` of `head_dim` shared by all
    heads: `result = h / sqrt(mean(h^2) + epsilon) * weight` for each head
    `h`, with the rounding of `weft.rms_norm`. Qwen3 normalizes queries and
    keys this way before the rotary embedding (`q_norm`, `k_norm`).

    Example:

    ```mlir
    %qn = weft.head_rms_norm %q, %wqn {head_dim = 128 : i64, epsilon = 1.0e-06 : f64}
        : (tensor<?x4096xbf16>, tensor<128xbf16>) -> tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$input, Weft_WeightTensor:$weight,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       F64Attr:$epsilon);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

def Weft_LinearOp : Weft_Op<"linear", [Pure,
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Matrix product with a transposed weight, optional bias.";
  let description = [{
    `result = input · weightᵀ + bias`, with `input : tensor<T x K>`,
    `weight : tensor<N x K>` (the layout of `torch.nn.Linear`), an optional
    `bias : tensor<N>`, and `result : tensor<T x N>`. Accumulates in f32.

    Example:

    ```mlir
    %q = weft.linear %x, %wq, %bq
        : (tensor<?x3584xbf16>, tensor<3584x3584xbf16>, tensor<3584xbf16>)
        -> tensor<?x3584xbf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$input, Weft_WeightTensor:$weight,
                       Optional<Weft_WeightTensor>:$bias);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

def Weft_RopeOp : Weft_Op<"rope", [Pure,
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Rotary position embedding, with optional Llama 3 scaling.";
  let description = [{
    Rotates each head of width `head_dim` of every token by angles
    `position * inv_freq[i]`, pairing element `i` with `i + head_dim/2`
    (the "rotate half" convention of Hugging Face's Llama).
    `inv_freq[i] = theta^(-2i/head_dim)`.

    `rope_type` (`#weft.rope_kind<...>`) selects how `inv_freq` is scaled
    for long contexts:
    - `default`: not scaled;
    - `linear`: divided by `factor`;
    - `llama3`: Llama 3.1's piecewise scaling with `factor`,
      `low_freq_factor`, `high_freq_factor` and
      `original_max_position_embeddings`.

    Example:

    ```mlir
    %qr = weft.rope %q, %pos {head_dim = 128 : i64, theta = 5.0e+05 : f64,
            rope_type = #weft.rope_kind<llama3>, factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
            high_freq_factor = 4.0 : f64, original_max_position_embeddings = 8192 : i64}
        : (tensor<?x4096xbf16>, tensor<?xi32>) -> tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$input, Weft_TokenVector:$positions,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       F64Attr:$theta,
                       DefaultValuedAttr<Weft_RopeKindAttr, "::weft::RopeKind::Default">:$rope_type,
                       OptionalAttr<F64Attr>:$factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_position_embeddings);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The rotation frequency of each pair of a head, theta^(-2i/head_dim)
    // scaled as rope_type says: the one definition the interpreter and the
    // kernels share. An error when a scaling parameter is missing or the
    // type is unknown (what the verifier also refuses).
    ::llvm::Expected<std::vector<double>> inverseFrequencies();
  }];
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Weft_KvWriteOp : Weft_Op<"kv_write", [
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Stores keys and values of the given tokens in the KV cache.";
  let description = [{
    For each token `t`, stores `key[t]` and `value[t]` (each
    `kv_heads * head_dim` wide) into layer `layer` of the cache, in sequence
    slot `slots[t]` at position `positions[t]`. Keys are stored as given
    (already rotated).

    Example:

    ```mlir
    weft.kv_write %k, %v, %pos, %slots, %cache {layer = 0 : i64}
        : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?xi32>, tensor<?xi32>,
          !weft.kv_cache<layers = 32, kv_heads = 8, head_dim = 128, dtype = bf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$key, Weft_Activation:$value,
                       Weft_TokenVector:$positions, Weft_TokenVector:$slots,
                       Arg<Weft_KvCacheType, "the cache", [MemWrite]>:$cache,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$layer);
  let assemblyFormat = [{
    $key `,` $value `,` $positions `,` $slots `,` $cache attr-dict `:`
    type($key) `,` type($value) `,` type($positions) `,` type($slots) `,` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def Weft_AttentionOp : Weft_Op<"attention", [
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Grouped-query causal attention over the KV cache.";
  let description = [{
    For each token `t` and query head `h`, attends over the keys and values
    of layer `layer` stored in slot `slots[t]` at positions
    `0 ..= positions[t]` (and, with `sliding_window = W`, only the last `W`
    of those), using KV head `h / (num_heads / num_kv_heads)`:
    `softmax(q · Kᵀ * scale) · V`, accumulated in f32. The query is
    `tensor<T x (num_heads * head_dim)>`; so is the result. With `softcap`
    (Gemma 2), each scaled score `s` becomes `softcap * tanh(s / softcap)`
    before the softmax.

    Keys and values of the current tokens must have been stored with
    `weft.kv_write` first, so one op serves prefill (many positions of one
    slot) and batched decode (one position in each of many slots) alike.

    Example:

    ```mlir
    %a = weft.attention %qr, %pos, %slots, %cache {layer = 0 : i64,
            num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64,
            scale = 0.088388347648318 : f64}
        : (tensor<?x4096xbf16>, tensor<?xi32>, tensor<?xi32>,
           !weft.kv_cache<layers = 32, kv_heads = 8, head_dim = 128, dtype = bf16>)
        -> tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$query, Weft_TokenVector:$positions,
                       Weft_TokenVector:$slots,
                       Arg<Weft_KvCacheType, "the cache", [MemRead]>:$cache,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$layer,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_kv_heads,
                       ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                       F64Attr:$scale,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$sliding_window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$query `,` $positions `,` $slots `,` $cache attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Weft_SiluOp : Weft_Op<"silu", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "SiLU activation, x * sigmoid(x).";
  let description = [{
    Elementwise `x / (1 + exp(-x))`, computed in f32.

    Example:

    ```mlir
    %s = weft.silu %g : tensor<?x14336xbf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$input);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Weft_GeluTanhOp : Weft_Op<"gelu_tanh", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>,
    DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "GELU activation, tanh approximation.";
  let description = [{
    Elementwise `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`,
    computed in f32 (PyTorch's `gelu(approximate="tanh")`, Gemma's MLP).

    Example:

    ```mlir
    %g = weft.gelu_tanh %gate : tensor<?x14336xbf16>
    ```
  }];
  let arguments = (ins Weft_Activation:$input);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class Weft_BinaryOp<string mnemonic, string what, string example>
    : Weft_Op<mnemonic, [Pure, Commutative, SameOperandsAndResultType,
      DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
      DeclareOpInterfaceMethods<Weft_CostOpInterface>,
      DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Elementwise " # what # " of two activations.";
  let description = [{
    Elementwise }] # what # [{ of two activations of the same type, computed
    in f32 and rounded to the result's dtype.

    Example:

    ```mlir
    }] # example # [{

    ```
  }];
  let arguments = (ins Weft_Activation:$lhs, Weft_Activation:$rhs);
  let results = (outs Weft_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Weft_AddOp : Weft_BinaryOp<"add", "sum",
    "%h = weft.add %x, %attn_out : tensor<?x4096xbf16>">;
def Weft_MulOp : Weft_BinaryOp<"mul", "product",
    "%m = weft.mul %act, %up : tensor<?x14336xbf16>">;

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

def Weft_LogitsOp : Weft_Op<"logits", [Pure,
    DeclareOpInterfaceMethods<Weft_RegionDimsOpInterface>,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "The language-model head: f32 logits over the vocabulary.";
  let description = [{
    `result = input · weightᵀ` with `weight : tensor<V x H>` (the LM head, or
    the embedding table when the model ties them), accumulated and returned
    in f32. With `softcap` (Gemma 2), each logit `l` becomes
    `softcap * tanh(l / softcap)`.

    Example:

    ```mlir
    %l = weft.logits %h, %lm_head
        : (tensor<?x4096xbf16>, tensor<128256x4096xbf16>) -> tensor<?x128256xf32>
    ```
  }];
  let arguments = (ins Weft_Activation:$input, Weft_WeightTensor:$weight,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Weft_Logits:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_ArgmaxOp : Weft_Op<"argmax", [Pure, DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "Greedy token selection.";
  let description = [{
    For each token row of logits, the index of the largest value (the lowest
    index among ties).

    Example:

    ```mlir
    %next = weft.argmax %l : tensor<?x128256xf32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins Weft_Logits:$logits);
  let results = (outs Weft_TokenVector:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
  let hasVerifier = 1;
}

def Weft_SampleOp : Weft_Op<"sample", [Pure, DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "Sampled token selection with temperature, top-k and top-p.";
  let description = [{
    For each row `t`: divides the logits by `temperature[t]`, keeps the
    `top_k[t]` largest (all when `top_k[t] <= 0`), then the smallest set of
    those whose probabilities add up to at least `top_p[t]`, renormalizes,
    and picks the token whose cumulative probability first exceeds
    `uniform[t]` (a number in `[0, 1)` drawn by the runtime from the
    request's seed). A temperature of 0 selects greedily. The per-request
    parameters are run-time operands, so one compiled plan serves requests
    with different sampling settings.

    Example:

    ```mlir
    %next = weft.sample %l, %temp, %top_k, %top_p, %u
        : (tensor<?x128256xf32>, tensor<?xf32>, tensor<?xi32>, tensor<?xf32>,
           tensor<?xf32>) -> tensor<?xi32>
    ```
  }];
  let arguments = (ins Weft_Logits:$logits, Weft_PerTokenF32:$temperature,
                       Weft_TokenVector:$top_k, Weft_PerTokenF32:$top_p,
                       Weft_PerTokenF32:$uniform);
  let results = (outs Weft_TokenVector:$result);
  let assemblyFormat = "$logits `,` $temperature `,` $top_k `,` $top_p `,` $uniform attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Weight transforms and feature splits (produced by fusion)
//===----------------------------------------------------------------------===//

def Weft_WeightConcatOp : Weft_Op<"weight_concat", [Pure]> {
  let summary = "Concatenation of weights, applied once when the plan loads.";
  let description = [{
    A compile-time weight transform: the result is the operands (all
    `weft.weight` values or other weight transforms of one dtype)
    concatenated along `axis`. Fusion uses it to turn the Q, K and V
    projections into one GEMM and gate/up into another; the plan records it
    in the weight manifest and the loader materializes it once, so nothing
    is concatenated at run time.

    Example:

    ```mlir
    %wqkv = weft.weight_concat %wq, %wk, %wv {axis = 0 : i64}
        : (tensor<4096x4096xbf16>, tensor<1024x4096xbf16>, tensor<1024x4096xbf16>)
        -> tensor<6144x4096xbf16>
    ```
  }];
  let arguments = (ins Variadic<Weft_WeightTensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs Weft_WeightTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Weft_SplitOp : Weft_Op<"split", [Pure, DeclareOpInterfaceMethods<Weft_TensorParallelOpInterface>]> {
  let summary = "Splits activations into consecutive feature ranges.";
  let description = [{
    Splits `tensor<T x F>` into results of widths `sizes` (which add up to
    `F`), in order. Produced by fusion after projections that share an input
    were merged into one wider projection.

    Example:

    ```mlir
    %q, %k, %v = weft.split %qkv {sizes = array<i64: 4096, 1024, 1024>}
        : tensor<?x6144xbf16> -> (tensor<?x4096xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>)
    ```
  }];
  let arguments = (ins Weft_Activation:$input, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Weft_Activation>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` `(` type($results) `)`";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Fusion regions
//===----------------------------------------------------------------------===//

def Weft_FusionOp : Weft_Op<"fusion", [IsolatedFromAbove,
    RecursiveMemoryEffects, SingleBlock]> {
  let summary = "A group of ops that becomes one kernel.";
  let description = [{
    One fusion region is one future kernel launch (or one library call). The
    body computes the results from the block arguments, which mirror
    `inputs` one for one; it sees nothing from above, so code generation can
    outline it as is. `kind` names the pattern (`rms_norm_linear`,
    `rope_kv_write`, ...); after specialization `dims` holds every model
    dimension the kernel is specialized for (token count, widths, heads),
    all compile-time constants.

    The op has the memory effects of its body: a region that writes the KV
    cache stays ordered before the attention that reads it.

    Example:

    ```mlir
    %y = weft.fusion "rms_norm_linear" (%x, %wn, %w)
        : (tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<6144x4096xbf16>) -> tensor<?x6144xbf16> {
    ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>, %c: tensor<6144x4096xbf16>):
      %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64}
          : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16>
      %r = weft.linear %n, %c
          : (tensor<?x4096xbf16>, tensor<6144x4096xbf16>) -> tensor<?x6144xbf16>
      weft.yield %r : tensor<?x6144xbf16>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, StrAttr:$kind,
                       OptionalAttr<DictionaryAttr>:$dims);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind ` ` `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Weft_YieldOp : Weft_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"FusionOp">]> {
  let summary = "Returns the results of a fusion region.";
  let description = [{
    Terminates the body of `weft.fusion`; its operands become the fusion's
    results.

    Example:

    ```mlir
    weft.yield %r : tensor<?x6144xbf16>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // WEFT_DIALECT_WEFT_IR_WEFTOPS_TD
