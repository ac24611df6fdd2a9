// A small valid plan (2 devices, 2 layers, 2 buckets) built through the
// FlatBuffers object API, for tests to serialize as is or damage field by field.
#ifndef WEFT_TEST_UNIT_PLANTESTUTIL_H_
#define WEFT_TEST_UNIT_PLANTESTUTIL_H_

#include "runtime/plan/PlanSeal.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/plan_generated.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::testing {

namespace pfb = weft::plan::fb;

inline std::unique_ptr<pfb::ArgT> planArg(pfb::ArgKind kind, int32_t index,
                                          uint64_t offset = 0, int64_t value = 0) {
  auto a = std::make_unique<pfb::ArgT>();
  a->kind = kind;
  a->index = index;
  a->offset = offset;
  a->value = value;
  return a;
}

inline std::unique_ptr<pfb::ArgT> bufferArg(int32_t index, uint64_t offset = 0) {
  return planArg(pfb::ArgKind::Buffer, index, offset);
}
inline std::unique_ptr<pfb::ArgT> weightArg(int32_t index) {
  return planArg(pfb::ArgKind::Weight, index);
}
inline std::unique_ptr<pfb::ArgT> inputArg(pfb::InputKind kind) {
  return planArg(pfb::ArgKind::Input, int32_t(kind));
}

inline std::unique_ptr<pfb::StepT> launchStep(int32_t device, const std::string &region,
                                              int32_t kernel,
                                              std::vector<std::unique_ptr<pfb::ArgT>> args,
                                              std::vector<int32_t> grid = {1, 1, 1},
                                              std::vector<int32_t> block = {128, 1, 1}) {
  auto launch = std::make_unique<pfb::LaunchT>();
  launch->kernel = kernel;
  launch->grid = std::move(grid);
  launch->block = std::move(block);
  launch->args = std::move(args);
  auto step = std::make_unique<pfb::StepT>();
  step->device = device;
  step->region = region;
  step->op.Set(std::move(*launch));
  return step;
}

inline std::unique_ptr<pfb::StepT> gemmStep(int32_t device, const std::string &region,
                                            int64_t m, int64_t n, int64_t k,
                                            std::unique_ptr<pfb::ArgT> a,
                                            std::unique_ptr<pfb::ArgT> b,
                                            std::unique_ptr<pfb::ArgT> c,
                                            std::unique_ptr<pfb::ArgT> residual = nullptr) {
  pfb::GemmT gemm;
  gemm.m = m;
  gemm.n = n;
  gemm.k = k;
  gemm.a = std::move(a);
  gemm.b = std::move(b);
  gemm.c = std::move(c);
  gemm.residual = std::move(residual);
  gemm.dtype = pfb::DType::BF16;
  gemm.c_dtype = pfb::DType::BF16;
  auto step = std::make_unique<pfb::StepT>();
  step->device = device;
  step->region = region;
  step->op.Set(std::move(gemm));
  return step;
}

inline std::unique_ptr<pfb::StepT> copyStep(int32_t from, int32_t to,
                                            std::unique_ptr<pfb::ArgT> source,
                                            std::unique_ptr<pfb::ArgT> target,
                                            uint64_t bytes) {
  pfb::CopyT copy;
  copy.source_device = from;
  copy.target_device = to;
  copy.source = std::move(source);
  copy.target = std::move(target);
  copy.bytes = bytes;
  auto step = std::make_unique<pfb::StepT>();
  step->device = from;
  step->region = "pipeline_send";
  step->op.Set(std::move(copy));
  return step;
}

inline std::unique_ptr<pfb::StepT> allReduceStep(std::vector<int32_t> devices,
                                                 std::vector<std::unique_ptr<pfb::ArgT>> buffers,
                                                 std::unique_ptr<pfb::ArgT> scratch,
                                                 uint64_t count, int32_t kernel) {
  pfb::AllReduceT reduce;
  int32_t device = devices.front();
  reduce.devices = std::move(devices);
  reduce.buffers = std::move(buffers);
  reduce.scratch = std::move(scratch);
  reduce.accumulate_kernel = kernel;
  reduce.count = count;
  reduce.dtype = pfb::DType::BF16;
  auto step = std::make_unique<pfb::StepT>();
  step->device = device;
  step->region = "all_reduce";
  step->op.Set(std::move(reduce));
  return step;
}

inline std::unique_ptr<pfb::DeviceBuffersT>
deviceBuffers(int32_t device, uint64_t arena, std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  auto db = std::make_unique<pfb::DeviceBuffersT>();
  db->device = device;
  db->arena_bytes = arena;
  for (auto [offset, bytes] : ranges) {
    auto b = std::make_unique<pfb::BufferT>();
    b->offset = offset;
    b->bytes = bytes;
    db->buffers.push_back(std::move(b));
  }
  return db;
}

inline std::unique_ptr<pfb::SourceTensorT> sourceTensor(const std::string &name, int32_t file,
                                                        std::vector<int64_t> shape) {
  auto t = std::make_unique<pfb::SourceTensorT>();
  t->name = name;
  t->file = file;
  t->dtype = pfb::DType::BF16;
  t->shape = std::move(shape);
  return t;
}

inline std::unique_ptr<pfb::WeightT> plainWeight(const std::string &name,
                                                 std::vector<int64_t> shape,
                                                 std::vector<int32_t> devices) {
  auto w = std::make_unique<pfb::WeightT>();
  w->name = name;
  w->dtype = pfb::DType::BF16;
  w->shape = shape;
  w->sources.push_back(sourceTensor(name, 0, shape));
  w->devices = std::move(devices);
  return w;
}

inline std::unique_ptr<pfb::PredictionT> prediction(const std::string &description, bool fits,
                                                    double latencyMs, int32_t microBatches) {
  auto p = std::make_unique<pfb::PredictionT>();
  p->description = description;
  p->fits = fits;
  p->latency_ms = latencyMs;
  p->tokens_per_second_batch1 = 1000.0 / latencyMs;
  p->tokens_per_second = 1000.0 / latencyMs;
  p->micro_batches = microBatches;
  return p;
}

struct ParamSpec {
  pfb::ArgKind kind;
  pfb::DType dtype;
  uint64_t bytes;
};

inline void setKernelShape(pfb::KernelT &k, std::vector<int32_t> grid,
                           std::vector<int32_t> block, std::vector<ParamSpec> params) {
  k.grid = std::move(grid);
  k.block = std::move(block);
  for (const ParamSpec &p : params) {
    auto kp = std::make_unique<pfb::KernelParamT>();
    kp->kind = p.kind;
    kp->dtype = p.dtype;
    kp->bytes = p.bytes;
    k.params.push_back(std::move(kp));
  }
}

inline std::unique_ptr<pfb::KernelT> ptxKernel(const std::string &name,
                                               const std::string &kind,
                                               std::vector<int32_t> grid,
                                               std::vector<int32_t> block,
                                               std::vector<ParamSpec> params) {
  auto k = std::make_unique<pfb::KernelT>();
  k->name = name;
  k->region_kind = kind;
  k->source_hash = 7;
  auto b = std::make_unique<pfb::KernelBinaryT>();
  b->arch = "sm_86";
  b->ptx = ".version 8.0\n.target sm_86\n// " + name + "\n";
  k->binaries.push_back(std::move(b));
  setKernelShape(*k, std::move(grid), std::move(block), std::move(params));
  return k;
}

// Model "tiny-llama": 2 layers, hidden 64, vocab 256, BF16. Devices: 0
// "rtx3090" runs layer 0, 1 "rtx3060" layer 1, over PCIe. Weights: 0 embed
// (dev 0), 1 fused q+k+v Concat (dev 0), 2 down_proj (dev 1), 3 lm_head
// (dev 1). Kernels: 0 rms_norm_linear (cubin + PTX; launched as the decode
// embedding), 1 attention, 2 sample, 3 prefill embedding, 4 accumulate (PTX
// only), each with the geometry and parameters of its launches.
// Buckets: 0 "decode_b1" (1 token, 7 steps), 1 "prefill_c16" (16 tokens, 4
// steps including an AllReduce over both devices).
inline pfb::PlanT tinyPlan() {
  pfb::PlanT plan;
  plan.version = weft::plan::kPlanFormatVersion;
  plan.compiler = "weft-compile test";
  // A placeholder seal, filled over the finished bytes by planBytes.
  plan.seal = std::make_unique<pfb::SealT>();
  plan.seal->hash.assign(32, 0);
  plan.seal->signer.assign(32, 0);
  plan.seal->signature.assign(64, 0);

  auto model = std::make_unique<pfb::ModelInfoT>();
  model->name = "tiny-llama";
  model->architecture = "LlamaForCausalLM";
  model->dtype = pfb::DType::BF16;
  model->hidden_size = 64;
  model->intermediate_size = 128;
  model->num_layers = 2;
  model->num_heads = 4;
  model->num_kv_heads = 2;
  model->head_dim = 16;
  model->vocab_size = 256;
  model->max_position_embeddings = 512;
  model->rms_norm_eps = 1e-5;
  model->bos_token_id = 1;
  model->eos_token_ids = {2};
  plan.model = std::move(model);

  auto topology = std::make_unique<pfb::TopologyT>();
  topology->name = "rtx3090+rtx3060";
  const char *names[] = {"rtx3090", "rtx3060"};
  const uint64_t memory[] = {24ull << 30, 12ull << 30};
  const double bandwidth[] = {936e9, 360e9};
  const int32_t sms[] = {82, 28};
  for (int i = 0; i < 2; ++i) {
    auto d = std::make_unique<pfb::DeviceT>();
    d->name = names[i];
    d->compute_capability = 86;
    d->memory_bytes = memory[i];
    d->memory_cap_bytes = i == 1 ? (10ull << 30) : 0;
    d->memory_bandwidth = bandwidth[i];
    d->sm_count = sms[i];
    d->arch = "sm_86";
    topology->devices.push_back(std::move(d));
  }
  auto link = std::make_unique<pfb::LinkT>();
  link->a = 0;
  link->b = 1;
  link->kind = "pcie";
  link->bandwidth = 16e9;
  link->latency = 10e-6;
  topology->links.push_back(std::move(link));
  topology->host_ram_bytes = 64ull << 30;
  plan.topology = std::move(topology);

  auto partition = std::make_unique<pfb::PartitionT>();
  partition->objective = "latency";
  partition->batch = 1;
  partition->context = 512;
  partition->weight_dtype = "bf16";
  for (int i = 0; i < 2; ++i) {
    auto s = std::make_unique<pfb::StageT>();
    s->devices = {i};
    s->first_layer = i;
    s->end_layer = i + 1;
    partition->stages.push_back(std::move(s));
  }
  partition->chosen = prediction("pipeline rtx3090[0,1) | rtx3060[1,2)", true, 1.25, 1);
  partition->runners_up.push_back(prediction("single rtx3090", true, 1.5, 1));
  partition->memory_proportional = prediction("memory-proportional split", true, 1.4, 1);
  plan.partition = std::move(partition);

  auto manifest = std::make_unique<pfb::ManifestT>();
  auto file = std::make_unique<pfb::SourceFileT>();
  file->file = "model.safetensors";
  file->header_size = 1024;
  file->file_size = 200000;
  file->header_fnv1a64 = 0x0123456789abcdefull;
  manifest->files.push_back(std::move(file));
  manifest->weights.push_back(plainWeight("model.embed_tokens.weight", {256, 64}, {0}));
  auto qkv = std::make_unique<pfb::WeightT>();
  qkv->name = "model.layers.0.self_attn.q_proj.weight+k+v";
  qkv->dtype = pfb::DType::BF16;
  qkv->shape = {128, 64};
  qkv->transform = pfb::Transform::Concat;
  qkv->concat_axis = 0;
  qkv->sources.push_back(sourceTensor("model.layers.0.self_attn.q_proj.weight", 0, {64, 64}));
  qkv->sources.push_back(sourceTensor("model.layers.0.self_attn.k_proj.weight", 0, {32, 64}));
  qkv->sources.push_back(sourceTensor("model.layers.0.self_attn.v_proj.weight", 0, {32, 64}));
  qkv->devices = {0};
  manifest->weights.push_back(std::move(qkv));
  manifest->weights.push_back(plainWeight("model.layers.1.mlp.down_proj.weight", {64, 128}, {1}));
  manifest->weights.push_back(plainWeight("lm_head.weight", {256, 64}, {1}));
  plan.manifest = std::move(manifest);

  using AK = pfb::ArgKind;
  using DT = pfb::DType;
  auto k0 = std::make_unique<pfb::KernelT>();
  k0->name = "weft_rms_norm_linear_0";
  k0->region_kind = "rms_norm_linear";
  k0->source_hash = 0xfeedfacecafebeefull;
  auto b0 = std::make_unique<pfb::KernelBinaryT>();
  b0->arch = "sm_86";
  b0->cubin = {'f', 'o', 'o', 'b', 'a', 'r'}; // fnv1a64 0x85944171f73967e8
  b0->ptx = ".version 8.0\n.target sm_86\n";
  k0->binaries.push_back(std::move(b0));
  setKernelShape(*k0, {1, 1, 1}, {128, 1, 1},
                 {{AK::Input, DT::I32, 4}, {AK::Weight, DT::BF16, 256 * 64 * 2},
                  {AK::Buffer, DT::BF16, 128}});
  plan.kernels.push_back(std::move(k0));
  auto k1 = std::make_unique<pfb::KernelT>();
  k1->name = "weft_attention_0";
  k1->region_kind = "attention";
  k1->source_hash = 42;
  // A library template instance: the binary's entry is its lowered name.
  k1->symbol = "_ZN4weft7kernels15attentionKernelI6ConfigEEvPKf";
  auto b1 = std::make_unique<pfb::KernelBinaryT>();
  b1->arch = "sm_86";
  b1->ptx = ".version 8.0\n.target sm_86\n// attention\n";
  k1->binaries.push_back(std::move(b1));
  setKernelShape(*k1, {1, 4, 1}, {32, 4, 1},
                 {{AK::Buffer, DT::BF16, 256}, {AK::KCache, DT::BF16, 0},
                  {AK::VCache, DT::BF16, 0}, {AK::Input, DT::I32, 0},
                  {AK::Scalar, DT::I64, 0}, {AK::Buffer, DT::BF16, 128}});
  plan.kernels.push_back(std::move(k1));
  plan.kernels.push_back(ptxKernel(
      "weft_sample_0", "sample", {1, 1, 1}, {128, 1, 1},
      {{AK::Input, DT::F32, 256 * 4}, {AK::Input, DT::F32, 4}, {AK::Input, DT::I32, 4},
       {AK::Input, DT::F32, 4}, {AK::Input, DT::F32, 4}, {AK::Input, DT::I32, 4}}));
  plan.kernels.push_back(ptxKernel(
      "weft_embedding_t16", "embedding", {16, 1, 1}, {128, 1, 1},
      {{AK::Input, DT::I32, 64}, {AK::Input, DT::I32, 64}, {AK::Input, DT::I32, 64},
       {AK::Weight, DT::BF16, 256 * 64 * 2}, {AK::Buffer, DT::BF16, 16 * 64 * 2}}));
  plan.kernels.push_back(ptxKernel("weft_accumulate_bf16_n1024", "all_reduce", {4, 1, 1},
                                   {256, 1, 1},
                                   {{AK::Buffer, DT::BF16, 2048}, {AK::Buffer, DT::BF16, 2048}}));

  using IK = pfb::InputKind;
  auto decode = std::make_unique<pfb::BucketT>();
  decode->name = "decode_b1";
  decode->prefill = false;
  decode->tokens = 1;
  decode->devices.push_back(deviceBuffers(0, 4096, {{0, 256}, {256, 512}, {1024, 1024}}));
  decode->devices.push_back(deviceBuffers(1, 2048, {{0, 256}, {256, 1024}}));
  {
    std::vector<std::unique_ptr<pfb::ArgT>> args;
    args.push_back(inputArg(IK::TokenIds));
    args.push_back(weightArg(0));
    args.push_back(bufferArg(0));
    decode->steps.push_back(launchStep(0, "embedding", 0, std::move(args)));
  }
  decode->steps.push_back(
      gemmStep(0, "rms_norm_linear", 1, 128, 64, bufferArg(0), weightArg(1), bufferArg(1)));
  {
    std::vector<std::unique_ptr<pfb::ArgT>> args;
    args.push_back(bufferArg(1));
    args.push_back(planArg(pfb::ArgKind::KCache, 0));
    args.push_back(planArg(pfb::ArgKind::VCache, 0));
    args.push_back(inputArg(IK::BlockTables));
    args.push_back(planArg(pfb::ArgKind::Scalar, 0, 0, 16));
    args.push_back(bufferArg(2, 128));
    decode->steps.push_back(launchStep(0, "attention", 1, std::move(args), {1, 4, 1}, {32, 4, 1}));
  }
  decode->steps.push_back(copyStep(0, 1, bufferArg(0), bufferArg(0), 128));
  decode->steps.push_back(gemmStep(1, "linear_residual", 1, 64, 128, bufferArg(1), weightArg(2),
                                   bufferArg(0), bufferArg(0)));
  decode->steps.push_back(
      gemmStep(1, "lm_head", 1, 256, 64, bufferArg(0), weightArg(3), inputArg(IK::Logits)));
  {
    std::vector<std::unique_ptr<pfb::ArgT>> args;
    args.push_back(inputArg(IK::Logits));
    args.push_back(inputArg(IK::Temperature));
    args.push_back(inputArg(IK::TopK));
    args.push_back(inputArg(IK::TopP));
    args.push_back(inputArg(IK::Uniform));
    args.push_back(inputArg(IK::NextTokens));
    decode->steps.push_back(launchStep(1, "sample", 2, std::move(args)));
  }
  plan.buckets.push_back(std::move(decode));

  auto prefill = std::make_unique<pfb::BucketT>();
  prefill->name = "prefill_c16";
  prefill->prefill = true;
  prefill->tokens = 16;
  prefill->devices.push_back(deviceBuffers(0, 8192, {{0, 4096}, {4096, 4096}}));
  prefill->devices.push_back(deviceBuffers(1, 8192, {{0, 4096}, {4096, 4096}}));
  {
    std::vector<std::unique_ptr<pfb::ArgT>> args;
    args.push_back(inputArg(IK::TokenIds));
    args.push_back(inputArg(IK::Positions));
    args.push_back(inputArg(IK::Slots));
    args.push_back(weightArg(0));
    args.push_back(bufferArg(0));
    prefill->steps.push_back(launchStep(0, "embedding", 3, std::move(args), {16, 1, 1}));
  }
  prefill->steps.push_back(
      gemmStep(0, "rms_norm_linear", 16, 128, 64, bufferArg(0), weightArg(1), bufferArg(1)));
  {
    std::vector<std::unique_ptr<pfb::ArgT>> buffers;
    buffers.push_back(bufferArg(1));
    buffers.push_back(bufferArg(1));
    prefill->steps.push_back(allReduceStep({0, 1}, std::move(buffers), bufferArg(0), 1024, 4));
  }
  prefill->steps.push_back(copyStep(0, 1, bufferArg(1), bufferArg(0), 2048));
  plan.buckets.push_back(std::move(prefill));

  auto kv = std::make_unique<pfb::KvCacheSpecT>();
  kv->block_tokens = 16;
  kv->dtype = pfb::DType::BF16;
  kv->num_kv_heads = 2;
  kv->head_dim = 16;
  kv->max_sequences = 4;
  kv->max_blocks_per_sequence = 32;
  kv->blocks_per_device = {128, 96};
  kv->kv_heads_per_device = {2, 2};
  plan.kv_cache = std::move(kv);

  plan.tokenizer_json = "{\"version\":\"1.0\"}";
  plan.generation_config_json = "{\"eos_token_id\":2}";
  return plan;
}

// Serializes with the "WEFT" identifier, as weft-compile writes plans.
// The plan's bytes, sealed (unsigned, or by `key`) when it has a seal.
inline std::vector<uint8_t> planBytes(const pfb::PlanT &plan,
                                      const weft::plan::SigningKey *key = nullptr) {
  flatbuffers::FlatBufferBuilder builder;
  pfb::FinishPlanBuffer(builder, pfb::Plan::Pack(builder, &plan));
  std::vector<uint8_t> bytes(builder.GetBufferPointer(),
                             builder.GetBufferPointer() + builder.GetSize());
  if (plan.seal)
    (void)weft::plan::sealPlan(bytes, key);
  return bytes;
}

} // namespace weft::testing

#endif // WEFT_TEST_UNIT_PLANTESTUTIL_H_
