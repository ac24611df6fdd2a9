// RUN: weft-compile --model builtin:llama-3.1-8b --emit=graph | weft-opt --weft-default-pipeline='max-batch=4 prefill-chunks=256' | FileCheck %s
// RUN: weft-compile --model builtin:llama-3.1-8b --emit=graph | weft-opt --weft-default-pipeline='max-batch=1 prefill-chunks=256' | FileCheck %s --check-prefix=COUNT
// RUN: weft-compile --model builtin:qwen2.5-7b --emit=graph | weft-opt --weft-default-pipeline='max-batch=1 prefill-chunks=8' | FileCheck %s --check-prefix=QWEN

// Tests the whole pipeline on Llama 3.1 8B: five kernel regions per decoder
// layer in decode form, plus the embedding and the fused LM head.

// CHECK-LABEL: func.func @decode_b1
// CHECK: weft.fusion "embedding"
// CHECK: weft.weight_concat {{.+}} -> tensor<6144x4096xbf16>
// CHECK: weft.fusion "rms_norm_linear_rope_kv_write" {{.+}} {dims = {head_dim = 128 : i64, hidden = 4096 : i64, k = 4096 : i64, kv_heads = 8 : i64, layer = 0 : i64, n = 6144 : i64, tokens = 1 : i64}}
// CHECK: weft.fusion "attention"
// CHECK: weft.fusion "linear_residual" {{.+}} {dims = {k = 4096 : i64, n = 4096 : i64, tokens = 1 : i64, width = 4096 : i64}}
// CHECK: weft.weight_concat {{.+}} -> tensor<28672x4096xbf16>
// CHECK: weft.fusion "rms_norm_linear_swiglu" {{.+}} {dims = {hidden = 4096 : i64, k = 4096 : i64, n = 28672 : i64, tokens = 1 : i64, width = 14336 : i64}}
// CHECK: weft.fusion "linear_residual" {{.+}} {dims = {k = 14336 : i64, n = 4096 : i64, tokens = 1 : i64, width = 4096 : i64}}
// CHECK: weft.fusion "rms_norm_logits_sample" {{.+}} {dims = {hidden = 4096 : i64, tokens = 1 : i64, vocab = 128256 : i64}}
// CHECK-LABEL: func.func @decode_b2
// CHECK-LABEL: func.func @decode_b4
// CHECK-LABEL: func.func @prefill_c256

// One function (decode_b1) and one prefill: 2 x (32 x 5 + 2) regions.
// COUNT-COUNT-324: weft.fusion "
// COUNT-NOT: weft.fusion "

// QWEN: weft.weight_concat %{{.+}}, %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<3584xbf16>, tensor<512xbf16>, tensor<512xbf16>) -> tensor<4608xbf16>
// QWEN: weft.fusion "rms_norm_linear_rope_kv_write" (%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}})
// QWEN: weft.linear %{{.+}}, %{{.+}}, %{{.+}} : (tensor<1x3584xbf16>, tensor<4608x3584xbf16>, tensor<4608xbf16>) -> tensor<1x4608xbf16>
