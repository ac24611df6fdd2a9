// RUN: weft-compile --model builtin:llama-3.2-1b --emit=graph | weft-opt --pass-pipeline='builtin.module(canonicalize,func.func(weft-fuse-sibling-linears,weft-fuse-rms-norm-linear,weft-fuse-swiglu,weft-fuse-residual-add,weft-fuse-rope-kv-write,weft-fuse-lm-head,weft-form-kernel-regions),weft-partition{topology=rtx3090+rtx3060 batch=96 context=8192})' | FileCheck %s
// RUN: weft-compile --model builtin:llama-3.2-1b --emit=graph | weft-opt --pass-pipeline='builtin.module(func.func(weft-fuse-sibling-linears,weft-fuse-rms-norm-linear,weft-fuse-swiglu,weft-fuse-residual-add,weft-fuse-rope-kv-write,weft-fuse-lm-head,weft-form-kernel-regions),weft-partition{topology=2xh200:nvlink objective=latency stages=0+1})' | FileCheck %s --check-prefix=TP
// RUN: weft-compile --model builtin:llama-3.2-1b --emit=graph | not weft-opt --pass-pipeline='builtin.module(func.func(weft-form-kernel-regions),weft-partition{topology=rtx3060 batch=4096 context=131072})' 2>&1 | FileCheck %s --check-prefix=NOFIT
// RUN: weft-compile --model builtin:llama-3.2-1b --emit=graph | not weft-opt --pass-pipeline='builtin.module(weft-partition{topology=gtx480})' 2>&1 | FileCheck %s --check-prefix=BADTOPO
// RUN: weft-compile --model builtin:llama-3.2-1b --emit=graph | not weft-opt --pass-pipeline='builtin.module(func.func(weft-form-kernel-regions),weft-partition{topology=2xh200:nvlink stages=0+3})' 2>&1 | FileCheck %s --check-prefix=BADSTAGES

// Tests the partition annotations: a pipeline over two PCIe devices gets a
// placement on every region and one transfer of the hidden state at the
// stage boundary; tensor parallelism over two NVLink H200s (forced with
// `stages`) shards weights, reduces after the row-parallel projections and
// keeps the (tied) embedding and LM head whole on the group's first device.

// CHECK: module attributes {dist.partition = {batch = 96 : i64, chosen = {description = "{{[^"]+}} -> {{[^"]+}}"
// CHECK-SAME: objective = "throughput"
// CHECK-SAME: stages = [{devices = array<i64: {{[01]}}>, end_layer = [[CUT:[0-9]+]] : i64, first_layer = 0 : i64
// CHECK-SAME: topology = "rtx3090+rtx3060", weight_dtype = "bf16"
// CHECK: weft.fusion "embedding" {{.+}} {dist.placement = #dist.placement<stage = 0
// CHECK: %[[T:.+]] = dist.transfer %{{[0-9]+}} {source = 0 : i64, target = 1 : i64} : tensor<?x2048xbf16>
// CHECK-NEXT: weft.fusion "rms_norm_linear" (%[[T]], {{.+}}stage = 1
// The residual of the same layer reuses the one transfer.
// CHECK-NOT: dist.transfer
// CHECK: weft.fusion "linear_residual" ({{.+}}, %[[T]]) {{.+}}stage = 1
// CHECK-NOT: dist.transfer
// CHECK: weft.fusion "rms_norm_logits_sample" {{.+}}stage = 1

// TP: dist.partition = {{.+}}description = "tp:h200[0+1] layers 0-15"
// TP: weft.fusion "embedding" {{.+}}devices = [0]>
// TP: weft.weight "model.layers.0.self_attn.q_proj.weight" {dist.shard = #dist.shard<axis = 0, parts = 2>, layer = 0 : i64}
// TP: weft.weight "model.layers.0.self_attn.o_proj.weight" {dist.shard = #dist.shard<axis = 1, parts = 2>, layer = 0 : i64}
// TP: %[[O:.+]] = weft.fusion "linear_residual" {{.+}}devices = [0, 1]
// TP-NEXT: ^bb0
// TP: dist.all_reduce %[[O]] {devices = array<i64: 0, 1>}
// TP: weft.weight "model.layers.0.mlp.down_proj.weight" {dist.shard = #dist.shard<axis = 1, parts = 2>, layer = 0 : i64}
// TP: weft.fusion "rms_norm_logits_sample" {{.+}}devices = [0]>

// NOFIT: error: weft-partition: llama-3.2-1b (bf16 weights, batch 4096, context 131072) does not fit topology 'rtx3060': rtx3060-12g #0 short by

// BADTOPO: error: weft-partition: {{.*}}gtx480

// BADSTAGES: error: weft-partition: --stages '0+3': device 3 is not in the topology (2 devices)
