// planToJson and planSummary. Both only read the plan; out-of-range indices
// are shown rather than followed, so an unchecked plan cannot crash them.
#include "runtime/plan/PlanJson.h"

#include "runtime/base/Text.h"
#include "runtime/plan/PlanReader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string_view>
#include <vector>

namespace weft::plan {

namespace {

using Json = nlohmann::ordered_json;

std::string_view view(const flatbuffers::String *s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

template <typename T> uint32_t count(const flatbuffers::Vector<T> *v) {
  return v ? v->size() : 0;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

// An enum by its schema name; a value outside the schema as its number.
template <typename E> Json enumJson(E value, const char *name) {
  if (name && *name)
    return name;
  return static_cast<int64_t>(value);
}

Json dtypeJson(fb::DType d) { return enumJson(d, fb::EnumNameDType(d)); }

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

Json text(const flatbuffers::String *s) { return std::string(view(s)); }

template <typename T> Json numbers(const flatbuffers::Vector<T> *v) {
  Json out = Json::array();
  for (uint32_t i = 0; i < count(v); ++i)
    out.push_back(v->Get(i));
  return out;
}

// A vector of tables, each rendered by `fn`.
template <typename T, typename Fn>
Json tables(const flatbuffers::Vector<flatbuffers::Offset<T>> *v, Fn fn) {
  Json out = Json::array();
  for (uint32_t i = 0; i < count(v); ++i)
    out.push_back(fn(*v->Get(i)));
  return out;
}

// An optional table: null when absent.
template <typename T, typename Fn> Json table(const T *t, Fn fn) {
  return t ? fn(*t) : Json(nullptr);
}

Json modelJson(const fb::ModelInfo &m) {
  Json j;
  j["name"] = text(m.name());
  j["architecture"] = text(m.architecture());
  j["dtype"] = dtypeJson(m.dtype());
  j["hidden_size"] = m.hidden_size();
  j["intermediate_size"] = m.intermediate_size();
  j["num_layers"] = m.num_layers();
  j["num_heads"] = m.num_heads();
  j["num_kv_heads"] = m.num_kv_heads();
  j["head_dim"] = m.head_dim();
  j["vocab_size"] = m.vocab_size();
  j["max_position_embeddings"] = m.max_position_embeddings();
  j["rms_norm_eps"] = m.rms_norm_eps();
  j["bos_token_id"] = m.bos_token_id();
  j["eos_token_ids"] = numbers(m.eos_token_ids());
  return j;
}

Json deviceJson(const fb::Device &d) {
  Json j;
  j["name"] = text(d.name());
  j["compute_capability"] = d.compute_capability();
  j["memory_bytes"] = d.memory_bytes();
  j["memory_cap_bytes"] = d.memory_cap_bytes();
  j["memory_bandwidth"] = d.memory_bandwidth();
  j["sm_count"] = d.sm_count();
  j["arch"] = text(d.arch());
  j["calibrated_gpu"] = text(d.calibrated_gpu());
  j["calibrated_driver"] = text(d.calibrated_driver());
  return j;
}

Json linkJson(const fb::Link &l) {
  Json j;
  j["a"] = l.a();
  j["b"] = l.b();
  j["kind"] = text(l.kind());
  j["bandwidth"] = l.bandwidth();
  j["latency"] = l.latency();
  return j;
}

Json topologyJson(const fb::Topology &t) {
  Json j;
  j["name"] = text(t.name());
  j["devices"] = tables(t.devices(), deviceJson);
  j["links"] = tables(t.links(), linkJson);
  j["host_ram_bytes"] = t.host_ram_bytes();
  return j;
}

Json stageJson(const fb::Stage &s) {
  Json j;
  j["devices"] = numbers(s.devices());
  j["first_layer"] = s.first_layer();
  j["end_layer"] = s.end_layer();
  j["offloaded_layers"] = s.offloaded_layers();
  return j;
}

Json predictionJson(const fb::Prediction &p) {
  Json j;
  j["description"] = text(p.description());
  j["fits"] = p.fits();
  j["latency_ms"] = p.latency_ms();
  j["tokens_per_second_batch1"] = p.tokens_per_second_batch1();
  j["tokens_per_second"] = p.tokens_per_second();
  j["micro_batches"] = p.micro_batches();
  return j;
}

Json partitionJson(const fb::Partition &p) {
  Json j;
  j["objective"] = text(p.objective());
  j["batch"] = p.batch();
  j["context"] = p.context();
  j["weight_dtype"] = text(p.weight_dtype());
  j["lm_head_dtype"] = text(p.lm_head_dtype()); // "": the checkpoint's 16-bit head
  j["stages"] = tables(p.stages(), stageJson);
  j["chosen"] = table(p.chosen(), predictionJson);
  j["runners_up"] = tables(p.runners_up(), predictionJson);
  j["memory_proportional"] = table(p.memory_proportional(), predictionJson);
  return j;
}

Json sourceFileJson(const fb::SourceFile &f) {
  Json j;
  j["file"] = text(f.file());
  j["header_size"] = f.header_size();
  j["file_size"] = f.file_size();
  j["header_fnv1a64"] = hex(f.header_fnv1a64());
  j["beside_plan"] = f.beside_plan();
  return j;
}

Json sourceTensorJson(const fb::SourceTensor &t) {
  Json j;
  j["name"] = text(t.name());
  j["file"] = t.file();
  j["dtype"] = dtypeJson(t.dtype());
  j["shape"] = numbers(t.shape());
  return j;
}

Json weightJson(const fb::Weight &w) {
  Json j;
  j["name"] = text(w.name());
  j["dtype"] = dtypeJson(w.dtype());
  j["shape"] = numbers(w.shape());
  j["transform"] = enumJson(w.transform(), fb::EnumNameTransform(w.transform()));
  j["concat_axis"] = w.concat_axis();
  j["sources"] = tables(w.sources(), sourceTensorJson);
  j["shard_axis"] = w.shard_axis();
  j["shard_parts"] = w.shard_parts();
  j["devices"] = numbers(w.devices());
  return j;
}

Json manifestJson(const fb::Manifest &m) {
  Json j;
  j["files"] = tables(m.files(), sourceFileJson);
  j["weights"] = tables(m.weights(), weightJson);
  return j;
}

Json binaryJson(const fb::KernelBinary &b) {
  Json j;
  j["arch"] = text(b.arch());
  Json cubin;
  cubin["bytes"] = count(b.cubin());
  cubin["fnv1a64"] = hex(b.cubin() ? fnv1a64(b.cubin()->data(), b.cubin()->size()) : fnv1a64("", 0));
  j["cubin"] = cubin;
  j["ptx"] = Json{{"bytes", view(b.ptx()).size()}};
  return j;
}

Json kernelParamJson(const fb::KernelParam &p) {
  Json j;
  j["kind"] = enumJson(p.kind(), fb::EnumNameArgKind(p.kind()));
  j["dtype"] = enumJson(p.dtype(), fb::EnumNameDType(p.dtype()));
  j["bytes"] = p.bytes();
  return j;
}

Json kernelJson(const fb::Kernel &k) {
  Json j;
  j["name"] = text(k.name());
  j["region_kind"] = text(k.region_kind());
  j["source_hash"] = hex(k.source_hash());
  j["binaries"] = tables(k.binaries(), binaryJson);
  j["grid"] = numbers(k.grid());
  j["block"] = numbers(k.block());
  j["shared_bytes"] = k.shared_bytes();
  j["params"] = tables(k.params(), kernelParamJson);
  j["cooperative"] = k.cooperative();
  if (k.symbol())
    j["symbol"] = text(k.symbol());
  return j;
}

Json argJson(const fb::Arg &a) {
  Json j;
  j["kind"] = enumJson(a.kind(), fb::EnumNameArgKind(a.kind()));
  j["index"] = a.index();
  // The input's name saves readers a lookup; it is derived from index.
  if (a.kind() == fb::ArgKind::Input)
    j["input"] = enumJson(a.index(), fb::EnumNameInputKind(fb::InputKind(a.index())));
  j["offset"] = a.offset();
  j["value"] = a.value();
  return j;
}

Json launchJson(const fb::Launch &l) {
  Json j;
  j["kernel"] = l.kernel();
  j["grid"] = numbers(l.grid());
  j["block"] = numbers(l.block());
  j["shared_bytes"] = l.shared_bytes();
  j["args"] = tables(l.args(), argJson);
  return j;
}

Json gemmJson(const fb::Gemm &g) {
  Json j;
  j["m"] = g.m();
  j["n"] = g.n();
  j["k"] = g.k();
  j["a"] = table(g.a(), argJson);
  j["b"] = table(g.b(), argJson);
  j["c"] = table(g.c(), argJson);
  j["bias"] = table(g.bias(), argJson);
  j["residual"] = table(g.residual(), argJson);
  j["dtype"] = dtypeJson(g.dtype());
  j["c_dtype"] = dtypeJson(g.c_dtype());
  return j;
}

Json copyJson(const fb::Copy &c) {
  Json j;
  j["source_device"] = c.source_device();
  j["target_device"] = c.target_device();
  j["source"] = table(c.source(), argJson);
  j["target"] = table(c.target(), argJson);
  j["bytes"] = c.bytes();
  return j;
}

Json allReduceJson(const fb::AllReduce &r) {
  Json j;
  j["devices"] = numbers(r.devices());
  j["buffers"] = tables(r.buffers(), argJson);
  j["count"] = r.count();
  j["dtype"] = dtypeJson(r.dtype());
  j["scratch"] = table(r.scratch(), argJson);
  j["accumulate_kernel"] = r.accumulate_kernel();
  return j;
}

Json stepJson(const fb::Step &s) {
  Json j;
  j["device"] = s.device();
  j["region"] = text(s.region());
  // flatc's own JSON names a union's type field <field>_type.
  j["op_type"] = enumJson(s.op_type(), fb::EnumNameOp(s.op_type()));
  if (const fb::Launch *l = s.op_as_Launch())
    j["op"] = launchJson(*l);
  else if (const fb::Gemm *g = s.op_as_Gemm())
    j["op"] = gemmJson(*g);
  else if (const fb::Copy *c = s.op_as_Copy())
    j["op"] = copyJson(*c);
  else if (const fb::AllReduce *r = s.op_as_AllReduce())
    j["op"] = allReduceJson(*r);
  else
    j["op"] = nullptr;
  return j;
}

Json bufferJson(const fb::Buffer &b) {
  Json j;
  j["offset"] = b.offset();
  j["bytes"] = b.bytes();
  return j;
}

Json deviceBuffersJson(const fb::DeviceBuffers &d) {
  Json j;
  j["device"] = d.device();
  j["arena_bytes"] = d.arena_bytes();
  j["buffers"] = tables(d.buffers(), bufferJson);
  return j;
}

Json stepPredictionJson(const fb::StepPrediction &p) {
  Json j;
  j["context"] = p.context();
  j["seconds"] = p.seconds();
  j["raw_other_seconds"] = p.raw_other_seconds();
  j["raw_attention_seconds"] = p.raw_attention_seconds();
  return j;
}

Json bucketJson(const fb::Bucket &b) {
  Json j;
  j["name"] = text(b.name());
  j["prefill"] = b.prefill();
  j["tokens"] = b.tokens();
  j["devices"] = tables(b.devices(), deviceBuffersJson);
  j["steps"] = tables(b.steps(), stepJson);
  j["predictions"] = tables(b.predictions(), stepPredictionJson);
  return j;
}

Json kvCacheJson(const fb::KvCacheSpec &kv) {
  Json j;
  j["block_tokens"] = kv.block_tokens();
  j["dtype"] = dtypeJson(kv.dtype());
  j["num_kv_heads"] = kv.num_kv_heads();
  j["head_dim"] = kv.head_dim();
  j["max_sequences"] = kv.max_sequences();
  j["max_blocks_per_sequence"] = kv.max_blocks_per_sequence();
  j["blocks_per_device"] = numbers(kv.blocks_per_device());
  j["kv_heads_per_device"] = numbers(kv.kv_heads_per_device());
  return j;
}

//===----------------------------------------------------------------------===//
// Summary
//===----------------------------------------------------------------------===//

std::string format(const char *fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string bytesString(uint64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return format("%.1f ", v) + units[u];
}

std::string rateString(double bytesPerSecond) {
  return format("%.1f GB/s", bytesPerSecond / 1e9);
}

std::string plural(uint64_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Names from the file, made safe for a line of terminal output.
std::string name(const flatbuffers::String *s) {
  return s && s->size() ? printableForMessage(view(s), 120) : std::string("(unnamed)");
}

template <typename T> std::string list(const flatbuffers::Vector<T> *v) {
  std::string out = "[";
  for (uint32_t i = 0; i < count(v); ++i)
    out += (i ? ", " : "") + std::to_string(v->Get(i));
  return out + "]";
}

std::string predictionLine(const fb::Prediction &p, int32_t batch) {
  std::string out = view(p.description()).empty() ? std::string("(no description)")
                                                   : printableForMessage(view(p.description()), 200);
  out += p.fits() ? ": fits" : ": does not fit";
  out += ", " + format("%.3f", p.latency_ms()) + " ms/token";
  out += ", " + format("%.1f", p.tokens_per_second_batch1()) + " tok/s at batch 1";
  if (batch != 1)
    out += ", " + format("%.1f", p.tokens_per_second()) + " tok/s at batch " +
           std::to_string(batch);
  out += ", " + plural(uint64_t(std::max(p.micro_batches(), 0)), "micro-batch", "micro-batches");
  return out;
}

// One shard's bytes, saturating instead of overflowing on unchecked plans.
uint64_t weightShardBytes(const fb::Weight &w) {
  uint64_t elements = 1;
  for (uint32_t i = 0; i < count(w.shape()); ++i) {
    int64_t d = w.shape()->Get(i);
    if (d < 0 || __builtin_mul_overflow(elements, uint64_t(d), &elements))
      return 0;
  }
  if (w.shard_parts() > 1)
    elements /= uint64_t(w.shard_parts());
  uint64_t bytes = 0;
  return dtypeBytes(w.dtype(), elements, bytes) ? bytes : 0;
}

std::string dtypeName(fb::DType d) {
  const char *n = fb::EnumNameDType(d);
  return *n ? std::string(n) : "dtype " + std::to_string(int(d));
}

void summarizeModel(const fb::Plan &plan, std::string &out) {
  const fb::ModelInfo *m = plan.model();
  if (!m) {
    out += "model: (missing)\n";
    return;
  }
  out += "model: " + name(m->name()) + " (" + name(m->architecture()) + "), " +
         dtypeName(m->dtype()) + ", " +
         plural(uint64_t(std::max(m->num_layers(), 0)), "layer", "layers") + ", hidden " +
         std::to_string(m->hidden_size()) + ", intermediate " +
         std::to_string(m->intermediate_size()) + ", " + std::to_string(m->num_heads()) +
         " heads (" + std::to_string(m->num_kv_heads()) + " KV) x " +
         std::to_string(m->head_dim()) + ", vocab " + std::to_string(m->vocab_size()) + "\n";
}

void summarizeTopology(const fb::Plan &plan, std::string &out) {
  const fb::Topology *t = plan.topology();
  if (!t) {
    out += "topology: (missing)\n";
    return;
  }
  out += "topology: " + name(t->name()) + ", " +
         plural(count(t->devices()), "device", "devices") + ", " +
         plural(count(t->links()), "link", "links") + ", host RAM " +
         bytesString(t->host_ram_bytes()) + "\n";
  for (uint32_t i = 0; i < count(t->devices()); ++i) {
    const fb::Device &d = *t->devices()->Get(i);
    out += "  device " + std::to_string(i) + ": " + name(d.name()) + ", " + name(d.arch()) +
           " (cc " + std::to_string(d.compute_capability()) + "), " +
           std::to_string(d.sm_count()) + " SMs, " + bytesString(d.memory_bytes());
    if (d.memory_cap_bytes())
      out += " (capped at " + bytesString(d.memory_cap_bytes()) + ")";
    out += ", " + rateString(d.memory_bandwidth()) + "\n";
  }
  for (uint32_t i = 0; i < count(t->links()); ++i) {
    const fb::Link &l = *t->links()->Get(i);
    out += "  link " + std::to_string(l.a()) + "-" + std::to_string(l.b()) + ": " +
           name(l.kind()) + ", " + rateString(l.bandwidth()) + ", " +
           format("%.1f us", l.latency() * 1e6) + "\n";
  }
}

void summarizePartition(const fb::Plan &plan, std::string &out) {
  const fb::Partition *p = plan.partition();
  if (!p) {
    out += "partition: (missing)\n";
    return;
  }
  out += "partition: objective " + name(p->objective()) + ", batch " +
         std::to_string(p->batch()) + ", context " + std::to_string(p->context()) +
         ", weights " + name(p->weight_dtype()) +
         (p->lm_head_dtype() ? ", LM head " + name(p->lm_head_dtype()) : std::string()) + ", " +
         plural(count(p->stages()), "stage", "stages") + "\n";
  for (uint32_t i = 0; i < count(p->stages()); ++i) {
    const fb::Stage &s = *p->stages()->Get(i);
    out += "  stage " + std::to_string(i) + ": devices " + list(s.devices()) + ", layers [" +
           std::to_string(s.first_layer()) + ", " + std::to_string(s.end_layer()) + ")";
    if (s.offloaded_layers())
      out += ", " + std::to_string(s.offloaded_layers()) + " offloaded to host RAM";
    out += "\n";
  }
  if (p->chosen())
    out += "  chosen: " + predictionLine(*p->chosen(), p->batch()) + "\n";
  for (uint32_t i = 0; i < count(p->runners_up()); ++i)
    out += "  runner-up " + std::to_string(i + 1) + ": " +
           predictionLine(*p->runners_up()->Get(i), p->batch()) + "\n";
  if (p->memory_proportional())
    out += "  memory-proportional baseline: " +
           predictionLine(*p->memory_proportional(), p->batch()) + "\n";
}

void summarizeMemory(const fb::Plan &plan, std::string &out) {
  const uint32_t devices = plan.topology() ? count(plan.topology()->devices()) : 0;
  std::vector<uint64_t> weightBytes(devices, 0), weightCount(devices, 0);
  if (plan.manifest())
    for (uint32_t i = 0; i < count(plan.manifest()->weights()); ++i) {
      const fb::Weight &w = *plan.manifest()->weights()->Get(i);
      const uint64_t bytes = weightShardBytes(w);
      for (uint32_t k = 0; k < count(w.devices()); ++k) {
        int32_t d = w.devices()->Get(k);
        if (d >= 0 && uint32_t(d) < devices) {
          weightBytes[d] += bytes;
          ++weightCount[d];
        }
      }
    }
  out += "memory:\n";
  const fb::KvCacheSpec *kv = plan.kv_cache();
  for (uint32_t d = 0; d < devices; ++d) {
    out += "  device " + std::to_string(d) + " (" + name(plan.topology()->devices()->Get(d)->name()) +
           "): weights " + bytesString(weightBytes[d]) + " in " +
           plural(weightCount[d], "tensor", "tensors");
    if (kv && d < count(kv->blocks_per_device()))
      out += ", KV cache " + std::to_string(kv->blocks_per_device()->Get(d)) + " blocks of " +
             plural(uint64_t(std::max(kv->block_tokens(), 0)), "token", "tokens");
    out += "\n    arena peak:";
    bool any = false;
    for (uint32_t b = 0; b < count(plan.buckets()); ++b) {
      const fb::Bucket &bucket = *plan.buckets()->Get(b);
      for (uint32_t k = 0; k < count(bucket.devices()); ++k) {
        const fb::DeviceBuffers &db = *bucket.devices()->Get(k);
        if (db.device() != int32_t(d))
          continue;
        out += std::string(any ? "," : "") + " " + name(bucket.name()) + " " +
               bytesString(db.arena_bytes());
        any = true;
      }
    }
    out += any ? "\n" : " none\n";
  }
}

void summarizeKernels(const fb::Plan &plan, std::string &out) {
  uint64_t cubinBytes = 0, ptxBytes = 0;
  std::map<std::string, uint32_t> archs;
  for (uint32_t k = 0; k < count(plan.kernels()); ++k)
    for (uint32_t b = 0; b < count(plan.kernels()->Get(k)->binaries()); ++b) {
      const fb::KernelBinary &bin = *plan.kernels()->Get(k)->binaries()->Get(b);
      cubinBytes += count(bin.cubin());
      ptxBytes += view(bin.ptx()).size();
      ++archs[name(bin.arch())];
    }
  out += "kernels: " + std::to_string(count(plan.kernels())) + ", architectures";
  for (const auto &a : archs)
    out += " " + a.first;
  out += ", cubin " + bytesString(cubinBytes) + ", PTX " + bytesString(ptxBytes) + "\n";
  for (uint32_t k = 0; k < count(plan.kernels()); ++k) {
    const fb::Kernel &kernel = *plan.kernels()->Get(k);
    out += "  " + std::to_string(k) + " " + name(kernel.name()) + " (" +
           name(kernel.region_kind()) + "):";
    for (uint32_t b = 0; b < count(kernel.binaries()); ++b) {
      const fb::KernelBinary &bin = *kernel.binaries()->Get(b);
      out += std::string(b ? "," : "") + " " + name(bin.arch());
      if (count(bin.cubin()))
        out += " cubin " + bytesString(count(bin.cubin()));
      if (!view(bin.ptx()).empty())
        out += " PTX " + bytesString(view(bin.ptx()).size());
    }
    out += "\n";
  }
}

void summarizeBuckets(const fb::Plan &plan, std::string &out) {
  out += "buckets: " + std::to_string(count(plan.buckets())) + "\n";
  for (uint32_t b = 0; b < count(plan.buckets()); ++b) {
    const fb::Bucket &bucket = *plan.buckets()->Get(b);
    // Steps by kind, in schema order; anything else counted as "other".
    uint64_t byKind[5] = {0, 0, 0, 0, 0};
    for (uint32_t s = 0; s < count(bucket.steps()); ++s) {
      fb::Op op = bucket.steps()->Get(s)->op_type();
      int k = int(op) >= 1 && int(op) <= 4 ? int(op) - 1 : 4;
      ++byKind[k];
    }
    out += "  " + name(bucket.name()) + ": " + (bucket.prefill() ? "prefill" : "decode") +
           ", " + plural(uint64_t(std::max(bucket.tokens(), 0)), "token", "tokens") + ", " +
           plural(count(bucket.steps()), "step", "steps") + " (";
    const char *kinds[] = {"Launch", "Gemm", "Copy", "AllReduce", "other"};
    bool first = true;
    for (int k = 0; k < 5; ++k) {
      if (!byKind[k] && k == 4)
        continue;
      out += std::string(first ? "" : ", ") + std::to_string(byKind[k]) + " " + kinds[k];
      first = false;
    }
    out += ")\n";
  }
}

} // namespace

std::string planToJson(const fb::Plan &plan) {
  Json j;
  j["version"] = plan.version();
  j["compiler"] = text(plan.compiler());
  j["model"] = table(plan.model(), modelJson);
  j["topology"] = table(plan.topology(), topologyJson);
  j["partition"] = table(plan.partition(), partitionJson);
  j["manifest"] = table(plan.manifest(), manifestJson);
  j["kernels"] = tables(plan.kernels(), kernelJson);
  j["buckets"] = tables(plan.buckets(), bucketJson);
  j["kv_cache"] = table(plan.kv_cache(), kvCacheJson);
  // tokenizer.json runs to megabytes: its size and checksum identify it.
  std::string_view tokenizer = view(plan.tokenizer_json());
  j["tokenizer_json"] = Json{{"bytes", tokenizer.size()},
                             {"fnv1a64", hex(fnv1a64(tokenizer.data(), tokenizer.size()))}};
  j["generation_config_json"] = text(plan.generation_config_json());
  j["chat_template"] = text(plan.chat_template());
  j["bos_token"] = text(plan.bos_token());
  j["eos_token"] = text(plan.eos_token());
  if (const fb::Seal *seal = plan.seal()) {
    auto bytesHex = [](const flatbuffers::Vector<uint8_t> *v) {
      std::string out;
      if (v)
        for (uint8_t b : *v) {
          static const char digits[] = "0123456789abcdef";
          out += digits[b >> 4];
          out += digits[b & 15];
        }
      return out;
    };
    bool isSigned = seal->signer() && std::any_of(seal->signer()->begin(), seal->signer()->end(),
                                                  [](uint8_t b) { return b != 0; });
    j["seal"] = Json{{"blake2b_256", bytesHex(seal->hash())},
                     {"signer", isSigned ? Json(bytesHex(seal->signer())) : Json(nullptr)},
                     {"signature",
                      isSigned ? Json(bytesHex(seal->signature())) : Json(nullptr)}};
  }
  // Strings from the file need not be UTF-8; replace rather than throw.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string planSummary(const fb::Plan &plan, std::optional<SignatureState> signature) {
  std::string out = "plan: format version " + std::to_string(plan.version()) + ", compiled by " +
                    name(plan.compiler()) + "\n";
  if (const fb::Seal *seal = plan.seal()) {
    bool isSigned = seal->signer() && std::any_of(seal->signer()->begin(), seal->signer()->end(),
                                                  [](uint8_t b) { return b != 0; });
    std::string signer;
    if (isSigned)
      for (uint8_t b : *seal->signer()) {
        static const char digits[] = "0123456789abcdef";
        signer += digits[b >> 4];
        signer += digits[b & 15];
      }
    std::string state = "unsigned";
    if (isSigned && !signature)
      state = "signer " + signer + " (signature not checked)";
    else if (isSigned && *signature == SignatureState::kVerified)
      state = "signed by " + signer + " (the signature verifies with this key; whether it is "
              "trusted is --trusted-keys' to say)";
    else if (isSigned)
      state = "names signer " + signer + " but the signature does NOT verify with that key "
              "(forged, or changed after signing)";
    out += "seal: BLAKE2b-256 checksum, " + state + "\n";
  }
  summarizeModel(plan, out);
  summarizeTopology(plan, out);
  summarizePartition(plan, out);
  summarizeMemory(plan, out);
  summarizeKernels(plan, out);
  summarizeBuckets(plan, out);
  return out;
}

} // namespace weft::plan
