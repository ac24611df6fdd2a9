// Embedding: a gather of table rows, 16-byte vectors, one grid row per token.
// RUN: weft-emit-cuda %s | FileCheck %s

// CHECK-LABEL: // @embed region 0 "embedding": 1 step
// CHECK-NEXT: // step 0: kernel [[NAME:weft_embedding_h4096_[0-9a-f]+]]
// CHECK-NEXT: //   grid (2, 3, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 table: RegionInput 0
// CHECK-NEXT: //   param 1 ids: RegionInput 1
// CHECK-NEXT: //   param 2 out: RegionResult 0
// CHECK-NEXT: // Embedding: gathers the table rows
// CHECK-NEXT: #include "weft/embedding.cuh"
// CHECK: static constexpr int H = 4096, V = 32000, VEC = 8, THREADS = 256;
// CHECK-NEXT: static constexpr float SCALE = 1.0f;
// CHECK-NEXT: using table_t = __half;
// CHECK-NEXT: using out_t = __half;
// CHECK-NEXT: static constexpr bool RELEASE_EARLY = false;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::embeddingKernel<Config, Config::out_t>
func.func @embed(%table: tensor<32000x4096xf16>, %ids: tensor<3xi32>) -> tensor<3x4096xf16> {
  %r = weft.fusion "embedding" (%table, %ids) {dims = {hidden = 4096 : i64, tokens = 3 : i64, vocab = 32000 : i64}}
      : (tensor<32000x4096xf16>, tensor<3xi32>) -> tensor<3x4096xf16> {
  ^bb0(%t: tensor<32000x4096xf16>, %i: tensor<3xi32>):
    %e = weft.embedding %t, %i : (tensor<32000x4096xf16>, tensor<3xi32>) -> tensor<3x4096xf16>
    weft.yield %e : tensor<3x4096xf16>
  }
  return %r : tensor<3x4096xf16>
}

// A width that is not a multiple of 8 elements narrows the vectors.
// CHECK-LABEL: // @embed_narrow region 0 "embedding": 1 step
// CHECK-NEXT: // step 0: kernel weft_embedding_h36_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (1, 1, 1) block (32, 1, 1) shared 0
// CHECK: static constexpr int H = 36, V = 100, VEC = 4, THREADS = 32;
// CHECK-NEXT: static constexpr float SCALE = 1.0f;
// CHECK-NEXT: using table_t = float;
func.func @embed_narrow(%table: tensor<100x36xf32>, %ids: tensor<1xi32>) -> tensor<1x36xf32> {
  %r = weft.fusion "embedding" (%table, %ids) {dims = {hidden = 36 : i64, tokens = 1 : i64, vocab = 100 : i64}}
      : (tensor<100x36xf32>, tensor<1xi32>) -> tensor<1x36xf32> {
  ^bb0(%t: tensor<100x36xf32>, %i: tensor<1xi32>):
    %e = weft.embedding %t, %i : (tensor<100x36xf32>, tensor<1xi32>) -> tensor<1x36xf32>
    weft.yield %e : tensor<1x36xf32>
  }
  return %r : tensor<1x36xf32>
}
