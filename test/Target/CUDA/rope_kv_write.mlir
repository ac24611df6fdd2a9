// RoPE of Q and K with Llama 3 scaling (inv_freq computed by the compiler)
// and the paged KV-cache write of layer 3.
// RUN: weft-emit-cuda --block-tokens=32 --max-blocks-per-sequence=100 %s | FileCheck %s

// CHECK-LABEL: // @rope region 0 "rope_kv_write": 1 step
// CHECK-NEXT: // step 0: kernel [[NAME:weft_rope_kv_write_h8_d16_[0-9a-f]+]]
// 8 heads (4 Q, 2 K, 2 V) of 8 rotation pairs, 16 heads a block.
// CHECK-NEXT: //   grid (1, 2, 1) block (128, 1, 1) shared 0
// CHECK-NEXT: //   param 0 x0: RegionInput 0
// CHECK-NEXT: //   param 1 positions: RegionInput 1
// CHECK-NEXT: //   param 2 keys: RegionInput 2
// CHECK-NEXT: //   param 3 values: RegionInput 3
// CHECK-NEXT: //   param 4 slots: RegionInput 4
// CHECK-NEXT: //   param 5 k_cache: KCache layer 3
// CHECK-NEXT: //   param 6 v_cache: VCache layer 3
// CHECK-NEXT: //   param 7 block_tables: BlockTables
// CHECK-NEXT: //   param 8 out0: RegionResult 0
// CHECK: #include "weft/rope_kv_write.cuh"
// CHECK: __constant__ double wf_inv_freq[1][8] = {{[{][{]}}
// CHECK-NEXT: 1.0, 0.19392274474868576, 0.037606030930863933, 0.0072926647372171093,
// CHECK-NEXT: 0.00052484616099295468, 3.4281021959525912e-05, 6.6478698711812354e-06, 1.2891731721515574e-06}};
// Queries rotated and yielded, keys rotated and cached, values cached.
// CHECK-NEXT: struct Heads0 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 4, IN = 0, TABLE = 0, POSITIONS = 1, OUT = 8, OUTS = 1;
// CHECK: struct Heads1 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 2, IN = 2, TABLE = 0, POSITIONS = 1, CACHE = 1;
// CHECK: struct Heads2 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 2, IN = 3, CACHE = 2;
// CHECK: static constexpr int D = 16, HALF = D / 2, HEADS_PER_BLOCK = 16, HEADS = 8;
// CHECK: static constexpr int KV_HEADS = 2, BLOCK_TOKENS = 32, MAX_BLOCKS = 100,
// CHECK: static constexpr int WRITE_POSITIONS = 1, SLOTS = 4, K_CACHE = 5, V_CACHE = 6, BLOCK_TABLES = 7;
// CHECK: using Groups = weft::kernels::HeadGroups<Heads0, Heads1, Heads2>;
// CHECK: static constexpr bool RELEASE_EARLY = false;
// CHECK: // entry: weft::kernels::ropeKvWriteKernel<Config, const __nv_bfloat16, const int, const __nv_bfloat16, const __nv_bfloat16, const int, Config::cache_t, Config::cache_t, const int, __nv_bfloat16>
func.func @rope(%q: tensor<2x64xbf16>, %pos: tensor<2xi32>, %k: tensor<2x32xbf16>, %v: tensor<2x32xbf16>,
                %slots: tensor<2xi32>, %cache: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>)
    -> tensor<2x64xbf16> {
  %r = weft.fusion "rope_kv_write" (%q, %pos, %k, %v, %slots, %cache) {dims = {head_dim = 16 : i64, kv_heads = 2 : i64, layer = 3 : i64, tokens = 2 : i64}}
      : (tensor<2x64xbf16>, tensor<2xi32>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>) -> tensor<2x64xbf16> {
  ^bb0(%a: tensor<2x64xbf16>, %p: tensor<2xi32>, %b: tensor<2x32xbf16>, %c: tensor<2x32xbf16>, %s: tensor<2xi32>,
       %kv: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>):
    %qr = weft.rope %a, %p {head_dim = 16 : i64, theta = 5.0e+05 : f64, rope_type = #weft.rope_kind<llama3>, factor = 8.0 : f64,
                             low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position_embeddings = 8192 : i64}
        : (tensor<2x64xbf16>, tensor<2xi32>) -> tensor<2x64xbf16>
    %kr = weft.rope %b, %p {head_dim = 16 : i64, theta = 5.0e+05 : f64, rope_type = #weft.rope_kind<llama3>, factor = 8.0 : f64,
                             low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position_embeddings = 8192 : i64}
        : (tensor<2x32xbf16>, tensor<2xi32>) -> tensor<2x32xbf16>
    weft.kv_write %kr, %c, %p, %s, %kv {layer = 3 : i64}
        : tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>
    weft.yield %qr : tensor<2x64xbf16>
  }
  return %r : tensor<2x64xbf16>
}
