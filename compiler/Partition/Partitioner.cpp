// Candidate enumeration, memory accounting and scoring of partitions.
#include "compiler/Partition/Partitioner.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace weft::partition {
namespace {

using hardware::DeviceProfile;
using hardware::Topology;

constexpr uint64_t kWorkspaceBytes = 64ull << 20; // cuBLASLt + attention scratch
constexpr size_t kMaxStages = 4;

// Memory in GiB, as nvidia-smi and weft-inspect show it.
double gib(uint64_t bytes) { return double(bytes) / double(1ull << 30); }

// Per-layer resident weight bytes (full tables, not per-step traffic).
struct WeightTable {
  std::vector<uint64_t> layer;
  uint64_t embedding = 0;
  uint64_t head = 0; // final norm + LM head (the table again when tied)
};

WeightTable weightTable(const ModelConfig &c, const WeightFormat &format) {
  WeightTable t;
  t.layer.assign(size_t(c.numLayers), 0);
  uint64_t vecBytes = io::dtypeSize(c.dtype);
  const WeightFormat outside = format.outsideLayers(), head = format.headFormat();
  for (const ExpectedTensor &e : graphWeights(c)) {
    llvm::StringRef name(e.name);
    auto bytesIn = [&](const WeightFormat &f) {
      if (e.shape.size() == 2)
        return f.matrixBytes(uint64_t(e.shape[0] * e.shape[1]), uint64_t(e.shape[0]));
      return uint64_t(e.shape[0]) * vecBytes;
    };
    if (e.layer >= 0) {
      t.layer[size_t(e.layer)] += bytesIn(format);
    } else if (name == "model.embed_tokens.weight") {
      t.embedding += bytesIn(outside);
      if (c.tieWordEmbeddings) // the table again, or its quantized copy
        t.head += bytesIn(head);
    } else {
      t.head += bytesIn(e.shape.size() == 2 ? head : outside);
    }
  }
  return t;
}

// A set of devices that acts as one stage: one GPU, or identical GPUs all
// joined by NVLink running tensor parallel.
struct Unit {
  std::vector<int> devices;
  int degree() const { return int(devices.size()); }
};

bool validTpDegree(const ModelConfig &c, int n) {
  if (n == 1)
    return true;
  // Each device holds whole KV heads: the plan lowering shards attention
  // by KV head group.
  return c.numHeads % n == 0 && c.intermediateSize % n == 0 && c.numKvHeads % n == 0;
}

std::vector<Unit> enumerateUnits(const Topology &t, const ModelConfig &c) {
  std::vector<Unit> units;
  int n = int(t.devices.size());
  for (int i = 0; i < n; ++i)
    units.push_back({{i}});
  if (n > 8)
    return units;
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<int> devs;
    for (int i = 0; i < n; ++i)
      if (mask & (1u << i))
        devs.push_back(i);
    if (devs.size() < 2 || !validTpDegree(c, int(devs.size())))
      continue;
    bool ok = true;
    for (size_t i = 0; ok && i < devs.size(); ++i)
      for (size_t j = i + 1; ok && j < devs.size(); ++j) {
        const DeviceProfile &a = t.devices[size_t(devs[i])], &b = t.devices[size_t(devs[j])];
        const hardware::LinkProfile *link = t.link(devs[i], devs[j]);
        ok = a.name == b.name && link && link->kind == hardware::LinkKind::NVLink;
      }
    if (ok)
      units.push_back({devs});
  }
  return units;
}

// Everything the search needs about one unit, as prefix sums over layers.
struct UnitTables {
  std::vector<double> time1;              // prefix of per-layer seconds, T = 1
  std::map<int64_t, std::vector<double>> timeT; // T -> prefix seconds
  double pre1 = 0, post1 = 0;
  std::map<int64_t, std::pair<double, double>> prePostT;
};

class Search {
public:
  Search(const ModelProfile &p, const Topology &t, const PartitionOptions &o)
      : profile(p), config(*p.config), topology(t), options(o),
        weights(weightTable(config, o.weights)) {}

  double layerSeconds(const Unit &u, int64_t layer, int64_t tokens) const {
    const DeviceProfile &d = topology.devices[size_t(u.devices[0])];
    if (options.streams(d, tokens, /*prefill=*/false, u.degree()))
      return streamLayerSeconds(profile.layers[size_t(layer)], d, options.weights,
                                options.timingContext());
    double s = regionsSeconds(profile.layers[size_t(layer)], d, options.weights,
                              tokens, options.timingContext(), u.degree());
    if (u.degree() > 1) // all-reduce after the O and down projections
      s += 2 * allReduceSeconds(topology, u.devices,
                                uint64_t(tokens) * profile.hiddenBytesPerToken);
    return s;
  }

  // The embedding and the LM head run on one device of a group (see
  // embeddingDevice, headDevice), unsharded.
  double edgeSeconds(const Unit &u, bool pre, int64_t tokens) const {
    const DeviceProfile &d = topology.devices[size_t(u.devices[0])];
    return regionsSeconds(pre ? profile.pre : profile.post, d, options.weights,
                          tokens, options.timingContext(), 1);
  }

  // Prefix sums of layer seconds on a unit at a token count: the search
  // prices millions of splits, each in O(stages).
  const std::vector<double> &prefix(const Unit &u, int64_t tokens) const {
    std::string key = std::to_string(tokens);
    for (int d : u.devices)
      key += "/" + std::to_string(d);
    auto it = prefixCache.find(key);
    if (it != prefixCache.end())
      return it->second;
    std::vector<double> sums(size_t(config.numLayers) + 1, 0.0);
    for (int64_t l = 0; l < config.numLayers; ++l)
      sums[size_t(l) + 1] = sums[size_t(l)] + layerSeconds(u, l, tokens);
    return prefixCache.emplace(key, std::move(sums)).first->second;
  }

  // Seconds for one step of `tokens` on stage `s`.
  double stageSeconds(const Stage &s, const Unit &u, int64_t tokens) const {
    const std::vector<double> &sums = prefix(u, tokens);
    int64_t residentEnd = s.endLayer - s.offloadedLayers;
    double t = sums[size_t(residentEnd)] - sums[size_t(s.firstLayer)];
    // Host-resident layers stream their weights over PCIe every step.
    int dev = u.devices[0];
    double pcie = dev < int(topology.host.pcieBandwidth.size())
                      ? topology.host.pcieBandwidth[size_t(dev)]
                      : 25e9;
    for (int64_t l = residentEnd; l < s.endLayer; ++l) {
      double stream = double(weights.layer[size_t(l)]) / double(u.degree()) / pcie;
      t += std::max(layerSeconds(u, l, tokens), stream);
    }
    if (s.embedding)
      t += edgeSeconds(u, true, tokens);
    if (s.head)
      t += edgeSeconds(u, false, tokens);
    return t;
  }

  void memoryOf(const Stage &s, std::vector<DeviceMemory> &memory) const {
    int n = int(s.devices.size());
    uint64_t resident = 0, host = 0, largest = 0;
    for (int64_t l = s.firstLayer; l < s.endLayer; ++l) {
      uint64_t w = weights.layer[size_t(l)];
      largest = std::max(largest, w);
      if (l >= s.endLayer - s.offloadedLayers)
        host += w;
      else
        resident += w;
    }
    uint64_t staging = s.offloadedLayers ? 2 * largest : 0;

    int64_t layers = s.endLayer - s.firstLayer;
    uint64_t kv = uint64_t(options.batch) * uint64_t(options.context) *
                  profile.kvBytesPerTokenPerLayer * uint64_t(layers) / uint64_t(n);
    uint64_t esize = io::dtypeSize(config.dtype);
    uint64_t tmax = uint64_t(std::max(options.prefillChunk, options.batch));
    uint64_t perToken = 3 * uint64_t(config.hiddenSize) +
                        uint64_t(config.qWidth() + 2 * config.kvWidth() +
                                 2 * config.intermediateSize) / uint64_t(n);
    uint64_t act = tmax * perToken * esize;
    // Codes expanded for cuBLASLt, one projection at a time: the largest,
    // gate and up together (this device's shard).
    bool codes = options.weights.dtype == WeightDType::Int4 ||
                 options.weights.dtype == WeightDType::Int8;
    const uint64_t expandedLayers =
        codes && int64_t(tmax) > kExpandedCodesAbove
            ? 2 * uint64_t(config.intermediateSize) * uint64_t(config.hiddenSize) * 2 / uint64_t(n)
            : 0;
    act += expandedLayers;

    for (int dev : s.devices) {
      DeviceMemory &m = memory[size_t(dev)];
      m.weights += resident / uint64_t(n) + staging / uint64_t(n);
      m.kvCache += kv;
      m.activations += act;
      m.workspace += kWorkspaceBytes;
      m.hostWeights += host / uint64_t(n);
    }
    // The embedding and the LM head are not sharded: each lives whole on
    // one device of the stage (one table when tied and on the same device).
    int embedDev = embeddingDevice(s);
    int headDev = headDevice(s, config.tieWordEmbeddings);
    if (s.embedding)
      memory[size_t(embedDev)].weights += weights.embedding;
    if (s.head) {
      bool shared = s.embedding && config.tieWordEmbeddings && headDev == embedDev &&
                    !options.weights.lmHead;
      memory[size_t(headDev)].weights += weights.head - (shared ? weights.embedding : 0);
      memory[size_t(headDev)].activations +=
          uint64_t(options.batch) * uint64_t(config.vocabSize) * 4;
      // A quantized head's codes expanded for cuBLASLt in the same scratch
      // as the layers' (what it needs beyond theirs).
      if (options.weights.lmHead && headCodePasses(int64_t(tmax)) == 0) {
        uint64_t head = uint64_t(config.vocabSize) * uint64_t(config.hiddenSize) * 2;
        memory[size_t(headDev)].activations += head > expandedLayers ? head - expandedLayers : 0;
      }
    }
  }

  Candidate evaluate(std::vector<Stage> stages) const {
    Candidate c;
    c.memory.resize(topology.devices.size());
    for (size_t i = 0; i < topology.devices.size(); ++i) {
      const DeviceProfile &d = topology.devices[i];
      c.memory[i].device = int(i);
      c.memory[i].capacity = d.memoryCapBytes ? std::min(d.memoryBytes, *d.memoryCapBytes)
                                              : d.memoryBytes;
    }
    std::vector<bool> used(topology.devices.size(), false);
    for (Stage &s : stages) {
      for (int dev : s.devices)
        used[size_t(dev)] = true;
      memoryOf(s, c.memory);
    }
    for (size_t i = 0; i < used.size(); ++i)
      if (used[i])
        c.memory[i].reserve = topology.devices[i].contextReserveBytes;
    c.fits = true;
    uint64_t host = 0;
    for (size_t i = 0; i < used.size(); ++i) {
      host += c.memory[i].hostWeights;
      if (used[i] && c.memory[i].total() > c.memory[i].capacity)
        c.fits = false;
    }
    if (host > topology.host.ramBytes)
      c.fits = false;

    // Timing: batch 1, then the declared batch as one micro-batch or as one
    // micro-batch per stage, whichever the pipeline runs faster.
    int64_t B = std::max<int64_t>(1, options.batch);
    int64_t S = int64_t(stages.size());
    int64_t m = (B + S - 1) / S;
    double sum1 = 0, sumB = 0, cycle = 0;
    for (size_t i = 0; i < stages.size(); ++i) {
      Stage &s = stages[i];
      Unit u{s.devices};
      s.seconds1 = stageSeconds(s, u, 1);
      double secondsAll = stageSeconds(s, u, B);
      s.secondsBatch = S > 1 ? stageSeconds(s, u, m) : secondsAll;
      if (i + 1 < stages.size()) {
        int from = s.devices.back(), to = stages[i + 1].devices.front();
        s.linkSeconds1 = topology.transferSeconds(from, to, profile.hiddenBytesPerToken);
        s.linkSecondsBatch = topology.transferSeconds(
            from, to, uint64_t(S > 1 ? m : B) * profile.hiddenBytesPerToken);
        sumB += topology.transferSeconds(from, to, uint64_t(B) * profile.hiddenBytesPerToken);
      }
      sum1 += s.seconds1 + s.linkSeconds1;
      sumB += secondsAll;
      cycle = std::max(cycle, s.secondsBatch + s.linkSecondsBatch);
    }
    c.latencySeconds = sum1;
    c.tokensPerSecondBatch1 = sum1 > 0 ? 1.0 / sum1 : 0;
    double single = double(B) / sumB;
    double pipelined = S > 1 ? double(B) / (double(S) * cycle) : 0;
    if (pipelined > single) {
      c.tokensPerSecond = pipelined;
      c.microBatches = S;
    } else {
      c.tokensPerSecond = single;
      c.microBatches = 1;
      for (Stage &s : stages) // report the schedule that was chosen
        s.secondsBatch = stageSeconds(s, Unit{s.devices}, B);
    }
    c.stages = std::move(stages);
    c.description = describe(c);
    return c;
  }

  std::string describe(const Candidate &c) const {
    std::string out;
    for (const Stage &s : c.stages) {
      if (!out.empty())
        out += " -> ";
      std::string devs;
      for (int d : s.devices)
        devs += (devs.empty() ? "" : "+") + std::to_string(d);
      const DeviceProfile &p = topology.devices[size_t(s.devices[0])];
      out += llvm::formatv("{0}{1}[{2}] layers {3}-{4}", s.devices.size() > 1 ? "tp:" : "",
                           p.name, devs, s.firstLayer, s.endLayer - 1);
      if (s.offloadedLayers)
        out += llvm::formatv(" ({0} on host)", s.offloadedLayers).str();
    }
    if (c.microBatches > 1)
      out += llvm::formatv(", {0} micro-batches", c.microBatches).str();
    return out;
  }

  // Every ordered sequence of disjoint units, every contiguous layer split.
  void enumerate(bool offload, const std::function<void(Candidate)> &sink) {
    std::vector<Unit> units = enumerateUnits(topology, config);
    std::vector<const Unit *> seq;
    std::vector<bool> used(topology.devices.size(), false);
    int64_t L = config.numLayers;
    std::function<void()> dfs = [&]() {
      if (!seq.empty())
        splits(seq, L, offload, sink);
      if (seq.size() >= kMaxStages || int64_t(seq.size()) >= L)
        return;
      for (const Unit &u : units) {
        if (llvm::any_of(u.devices, [&](int d) { return used[size_t(d)]; }))
          continue;
        for (int d : u.devices)
          used[size_t(d)] = true;
        seq.push_back(&u);
        dfs();
        seq.pop_back();
        for (int d : u.devices)
          used[size_t(d)] = false;
      }
    };
    dfs();
  }

  void splits(const std::vector<const Unit *> &seq, int64_t L, bool offload,
              const std::function<void(Candidate)> &sink) {
    size_t S = seq.size();
    std::vector<int64_t> cuts(S + 1, 0);
    cuts[S] = L;
    std::function<void(size_t)> rec = [&](size_t i) {
      if (i == S) {
        std::vector<Stage> stages(S);
        for (size_t k = 0; k < S; ++k) {
          stages[k].devices = seq[k]->devices;
          stages[k].firstLayer = cuts[k];
          stages[k].endLayer = cuts[k + 1];
        }
        stages.front().embedding = true;
        stages.back().head = true;
        ++evaluated;
        Candidate c = evaluate(stages);
        if (!c.fits && offload)
          c = withOffload(std::move(stages));
        sink(std::move(c));
        return;
      }
      int64_t lo = cuts[i - 1] + 1, hi = L - int64_t(S - i);
      for (int64_t cut = lo; cut <= hi; ++cut) {
        cuts[i] = cut;
        rec(i + 1);
      }
    };
    cuts[0] = 0;
    if (S == 1) {
      rec(1);
      return;
    }
    rec(1);
  }

  // The fewest host-resident layers (at the end of each stage) that make
  // every device fit.
  Candidate withOffload(std::vector<Stage> stages) {
    Candidate c = evaluate(stages);
    for (int round = 0; !c.fits && round < 4 * int(config.numLayers); ++round) {
      bool changed = false;
      for (size_t i = 0; i < stages.size(); ++i) {
        const DeviceMemory &m = c.memory[size_t(stages[i].devices[0])];
        Stage &s = stages[i];
        if (m.total() > m.capacity && s.offloadedLayers < s.endLayer - s.firstLayer) {
          ++s.offloadedLayers;
          changed = true;
        }
      }
      if (!changed)
        break;
      c = evaluate(stages);
    }
    return c;
  }

  const ModelProfile &profile;
  const ModelConfig &config;
  const Topology &topology;
  const PartitionOptions &options;
  WeightTable weights;
  size_t evaluated = 0;
  mutable std::map<std::string, std::vector<double>> prefixCache;
};

// The smallest share of a device's memory left free: the headroom of the
// tightest device.
double tightestFree(const Candidate &c) {
  double worst = 1.0;
  for (const DeviceMemory &m : c.memory)
    if (m.capacity > 0 && m.total() > m.reserve)
      worst = std::min(worst, (double(m.capacity) - double(m.total())) / double(m.capacity));
  return worst;
}

// Faster first; among equally fast ones, fewer stages, then the one that
// leaves the tightest device the most free memory (room for longer
// contexts, fragmentation, another process).
bool better(const Candidate &a, const Candidate &b, Objective o) {
  double sa = a.score(o), sb = b.score(o);
  if (std::abs(sa - sb) > 1e-9 * std::max(sa, sb))
    return sa > sb;
  if (a.stages.size() != b.stages.size())
    return a.stages.size() < b.stages.size();
  return tightestFree(a) > tightestFree(b) + 1e-12;
}

std::string shortfallText(const Candidate &c, const Topology &t) {
  std::string out;
  for (const DeviceMemory &m : c.memory) {
    if (m.total() <= m.capacity || m.total() == m.reserve)
      continue;
    out += llvm::formatv("{0}{1} #{2} short by {3:f1} GiB (needs {4:f1} GiB: "
                         "weights {5:f1}, KV cache {6:f1}, other {7:f1}; has {8:f1} GiB)",
                         out.empty() ? "" : "; ", t.devices[size_t(m.device)].name,
                         m.device, gib(m.total() - m.capacity), gib(m.total()),
                         gib(m.weights), gib(m.kvCache),
                         gib(m.activations + m.workspace + m.reserve), gib(m.capacity));
  }
  return out;
}

std::optional<Candidate> bestOf(const ModelProfile &profile, const Topology &t,
                                const PartitionOptions &o, bool offload,
                                std::vector<Candidate> *fitting,
                                Candidate *closest, size_t *evaluated) {
  Search search(profile, t, o);
  std::optional<Candidate> best;
  double closestShort = INFINITY;
  search.enumerate(offload, [&](Candidate c) {
    if (!c.fits) {
      if (closest) {
        double worst = 0;
        for (const DeviceMemory &m : c.memory)
          worst += std::max<double>(0, double(m.shortfall()));
        if (worst < closestShort) {
          closestShort = worst;
          *closest = c;
        }
      }
      return;
    }
    if (fitting)
      fitting->push_back(c);
    if (!best || better(c, *best, o.objective))
      best = std::move(c);
  });
  if (evaluated)
    *evaluated += search.evaluated;
  return best;
}

bool anyFits(const ModelProfile &p, const Topology &t, const PartitionOptions &o) {
  return bestOf(p, t, o, o.allowHostOffload, nullptr, nullptr, nullptr).has_value();
}

} // namespace

int embeddingDevice(const Stage &s) { return s.devices.front(); }

int headDevice(const Stage &s, bool tiedEmbeddings) {
  // A tied table that the same stage also embeds with stays on one device.
  return tiedEmbeddings && s.embedding ? s.devices.front() : s.devices.back();
}

llvm::Expected<std::vector<Stage>> parseStageSpec(llvm::StringRef spec,
                                                  const ModelConfig &config,
                                                  const Topology &topology) {
  auto error = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--stages '" + spec + "': " + msg);
  };
  std::vector<Stage> stages;
  std::vector<int64_t> counts; // -1: share the rest
  std::vector<bool> used(topology.devices.size(), false);
  llvm::SmallVector<llvm::StringRef> parts;
  spec.split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [devs, layers] = part.trim().split(':');
    // "0:" names a layer count and gives none.
    if (part.trim().ends_with(":"))
      return error("'" + part.trim() + "': expected a layer count after ':'");
    Stage s;
    llvm::SmallVector<llvm::StringRef> ids;
    devs.split(ids, '+');
    for (llvm::StringRef id : ids) {
      unsigned d = 0;
      if (id.trim().getAsInteger(10, d))
        return error("'" + id + "' is not a device index");
      if (d >= topology.devices.size())
        return error("device " + llvm::Twine(d) + " is not in the topology (" +
                     llvm::Twine(topology.devices.size()) + " devices)");
      if (used[d])
        return error("device " + llvm::Twine(d) + " is used twice");
      used[d] = true;
      s.devices.push_back(int(d));
    }
    int n = int(s.devices.size());
    if (n > 1) {
      if (!validTpDegree(config, n))
        return error(llvm::formatv("{0} devices cannot share {1}'s layers ({2} heads, {3} KV "
                                   "heads, FFN {4} must divide evenly)",
                                   n, config.name, config.numHeads, config.numKvHeads,
                                   config.intermediateSize).str());
      for (int d : s.devices)
        if (topology.devices[size_t(d)].name != topology.devices[size_t(s.devices[0])].name)
          return error("a tensor-parallel group needs identical devices");
    }
    int64_t count = -1;
    if (!layers.empty() && (layers.trim().getAsInteger(10, count) || count < 1))
      return error("'" + layers + "' is not a positive layer count");
    stages.push_back(s);
    counts.push_back(count);
  }
  int64_t fixed = 0, open = 0;
  for (int64_t c : counts)
    c < 0 ? ++open : fixed += c;
  int64_t rest = config.numLayers - fixed;
  if (rest < open || (open == 0 && rest != 0))
    return error(llvm::formatv("the layer counts must add up to the model's {0} layers",
                               config.numLayers).str());
  int64_t first = 0, k = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    int64_t c = counts[i];
    if (c < 0) {
      c = rest / open + (k < rest % open ? 1 : 0);
      ++k;
    }
    stages[i].firstLayer = first;
    stages[i].endLayer = first + c;
    first += c;
  }
  stages.front().embedding = true;
  stages.back().head = true;
  return stages;
}

WeightDType nativeWeightDType(const ModelConfig &config) {
  if (config.quant.active())
    return config.quant.bits == 4 ? WeightDType::Int4 : WeightDType::Int8;
  return config.dtype == io::DType::F16   ? WeightDType::F16
         : config.dtype == io::DType::F32 ? WeightDType::F32
                                          : WeightDType::BF16;
}

llvm::Expected<PartitionOptions>
makePartitionOptions(const ModelConfig &config, llvm::StringRef objective,
                     int64_t batch, int64_t context, llvm::StringRef weightDType) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  PartitionOptions o;
  if (objective == "latency")
    o.objective = Objective::Latency;
  else if (objective == "throughput")
    o.objective = Objective::Throughput;
  else
    return error("--objective: expected latency or throughput, got '" + objective + "'");
  if (batch < 1)
    return error("--batch: expected at least 1, got " + llvm::Twine(batch));
  if (context < 1)
    return error("--context: expected at least 1, got " + llvm::Twine(context));
  if (context > config.maxPositionEmbeddings)
    return error("--context: " + llvm::Twine(context) + " exceeds the model's " +
                 llvm::Twine(config.maxPositionEmbeddings) + " positions");
  o.batch = batch;
  o.context = context;
  if (config.quant.active()) {
    // The checkpoint's own packing: its bits, groups and zeros.
    if (!weightDType.empty())
      return error("--weight-dtype " + weightDType + ": the checkpoint is already quantized (" +
                   config.quant.describe() + "); drop the option");
    o.weights.dtype = config.quant.bits == 4 ? WeightDType::Int4 : WeightDType::Int8;
    o.weights.groupSize = config.quant.groupSize ? config.quant.groupSize : config.hiddenSize;
    o.weights.grouped8 = config.quant.bits == 8;
    o.weights.zeros = config.quant.method != QuantMethod::CompressedTensors; // symmetric
  } else if (weightDType.empty()) {
    o.weights.dtype = nativeWeightDType(config);
  } else {
    llvm::Expected<WeightDType> d = parseWeightDType(weightDType);
    if (!d)
      return d.takeError();
    o.weights.dtype = *d;
  }
  return o;
}

bool PartitionOptions::streams(const DeviceProfile &device, int64_t tokens, bool prefill,
                               int tpDegree) const {
  return decodeStream && tokens == 1 && !prefill && tpDegree == 1 &&
         device.computeCapability >= 90;
}

Candidate evaluateCandidate(const ModelProfile &profile, const Topology &topology,
                            const PartitionOptions &options,
                            std::vector<Stage> stages) {
  return Search(profile, topology, options).evaluate(std::move(stages));
}

StepSplit predictStepSeconds(const ModelProfile &profile, const Topology &topology,
                             const PartitionOptions &options, const std::vector<Stage> &stages,
                             int64_t tokens, int64_t context, bool prefill, StepSplit *raw) {
  int64_t attended = prefill ? std::max<int64_t>(1, context + tokens / 2) : context;
  // For `raw`: the same devices without their step scales.
  std::vector<DeviceProfile> plain;
  if (raw)
    for (DeviceProfile d : topology.devices) {
      if (d.calibration) {
        d.calibration->steps.clear();
        d.calibration->prefillSteps.clear();
      }
      plain.push_back(std::move(d));
    }
  StepSplit split;
  auto add = [&](llvm::ArrayRef<RegionTerms> regions, int device, int tp) {
    regionsSeconds(regions, topology.devices[size_t(device)], options.weights, tokens, attended,
                   tp, &split, prefill);
    if (raw)
      regionsSeconds(regions, plain[size_t(device)], options.weights, tokens, attended, tp, raw,
                     prefill);
  };
  auto addOther = [&](double seconds) {
    split.other += seconds;
    if (raw)
      raw->other += seconds;
  };
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage &s = stages[i];
    int tp = int(s.devices.size());
    if (s.embedding)
      add(profile.pre, embeddingDevice(s), 1);
    const DeviceProfile &first = topology.devices[size_t(s.devices[0])];
    const bool streamed = options.streams(first, tokens, prefill, tp);
    for (int64_t l = s.firstLayer; l < s.endLayer; ++l) {
      if (streamed) {
        streamLayerSeconds(profile.layers[size_t(l)], first, options.weights, attended, &split);
        if (raw)
          streamLayerSeconds(profile.layers[size_t(l)], plain[size_t(s.devices[0])],
                             options.weights, attended, raw);
        continue;
      }
      add(profile.layers[size_t(l)], s.devices[0], tp);
      if (tp > 1) // all-reduce after the O and down projections
        addOther(2 * allReduceSeconds(topology, s.devices,
                                      uint64_t(tokens) * profile.hiddenBytesPerToken));
    }
    if (s.head)
      add(profile.post, headDevice(s, profile.config->tieWordEmbeddings), 1);
    if (i + 1 < stages.size())
      addOther(topology.transferSeconds(s.devices.back(), stages[i + 1].devices.front(),
                                        uint64_t(tokens) * profile.hiddenBytesPerToken));
  }
  return split;
}

llvm::Expected<PartitionResult> partitionModel(const ModelProfile &profile,
                                               const Topology &topology,
                                               const PartitionOptions &options) {
  const ModelConfig &config = *profile.config;
  if (topology.devices.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "topology '%s' has no devices",
                                   topology.name.c_str());
  PartitionResult result;
  std::vector<Candidate> fitting;
  Candidate closest;
  if (!options.forcedStages.empty()) {
    Candidate forced = evaluateCandidate(profile, topology, options, options.forcedStages);
    result.candidatesEvaluated = 1;
    if (!forced.fits)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(), "--stages: %s does not fit: %s",
          forced.description.c_str(), shortfallText(forced, topology).c_str());
    result.best = forced;
    return result;
  }
  std::optional<Candidate> best = bestOf(profile, topology, options, false,
                                         &fitting, &closest,
                                         &result.candidatesEvaluated);
  if (!best && options.allowHostOffload)
    best = bestOf(profile, topology, options, true, &fitting, nullptr,
                  &result.candidatesEvaluated);
  if (!best) {
    // Nearest configurations that fit: shorter context, smaller batch,
    // smaller weights, another GPU.
    std::vector<std::string> hints;
    PartitionOptions o = options;
    for (int64_t ctx = options.context / 2; ctx >= 256; ctx /= 2) {
      o.context = ctx;
      if (anyFits(profile, topology, o)) {
        hints.push_back(llvm::formatv("--context={0}", ctx));
        break;
      }
    }
    o = options;
    for (int64_t b = options.batch / 2; b >= 1; b /= 2) {
      o.batch = b;
      if (anyFits(profile, topology, o)) {
        hints.push_back(llvm::formatv("--batch={0}", b));
        break;
      }
    }
    o = options;
    for (WeightDType d : {WeightDType::FP8, WeightDType::Int8, WeightDType::Int4}) {
      // Plans quantize 16-bit checkpoints only.
      if (options.runnableOnly &&
          (config.quant.active() ||
           (config.dtype != io::DType::F16 && config.dtype != io::DType::BF16)))
        break;
      o.weights.dtype = d;
      if (o.weights.matrixBytes(1000, 1) >= options.weights.matrixBytes(1000, 1))
        continue;
      if (d == WeightDType::FP8 &&
          !llvm::all_of(topology.devices, [](const hardware::DeviceProfile &p) {
            return p.hasFp8();
          }))
        continue;
      if (anyFits(profile, topology, o)) {
        hints.push_back(llvm::formatv("--weight-dtype={0}", weightDTypeName(d)));
        break;
      }
    }
    for (const std::string &name : hardware::builtinDeviceNames()) {
      llvm::Expected<Topology> alt = hardware::parseTopologySpec(name);
      if (!alt) {
        llvm::consumeError(alt.takeError());
        continue;
      }
      if (anyFits(profile, *alt, options)) {
        hints.push_back("--topology=" + name);
        break;
      }
    }
    std::string hint = hints.empty() ? "nothing nearby fits"
                                     : "would fit with " + llvm::join(hints, " or ");
    if (options.runnableOnly)
      hint += " (plans quantize from F16 and BF16 checkpoints only, and cannot hold "
              "host-offloaded layers yet)";
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s (%s weights, batch %lld, context %lld) does not fit topology '%s': "
        "%s; %s",
        config.name.c_str(), weightDTypeName(options.weights.dtype),
        (long long)options.batch, (long long)options.context,
        topology.name.c_str(), shortfallText(closest, topology).c_str(),
        hint.c_str());
  }
  result.best = *best;
  llvm::sort(fitting, [&](const Candidate &a, const Candidate &b) {
    return better(a, b, options.objective);
  });
  for (const Candidate &c : fitting) {
    if (result.runnersUp.size() >= options.runnersUp)
      break;
    if (c.description == result.best.description)
      continue;
    result.runnersUp.push_back(c);
  }

  // The split by memory alone (llama.cpp, ExLlamaV2): every device one
  // stage in the declared order, layers in proportion to memory.
  if (topology.devices.size() > 1) {
    uint64_t total = 0;
    for (const hardware::DeviceProfile &d : topology.devices)
      total += d.usableBytes();
    std::vector<Stage> stages;
    int64_t start = 0;
    double acc = 0;
    for (size_t i = 0; i < topology.devices.size(); ++i) {
      acc += double(topology.devices[i].usableBytes()) / double(total);
      int64_t end = i + 1 == topology.devices.size()
                        ? config.numLayers
                        : int64_t(std::llround(acc * double(config.numLayers)));
      end = std::clamp<int64_t>(end, start + 1, config.numLayers);
      Stage s;
      s.devices = {int(i)};
      s.firstLayer = start;
      s.endLayer = end;
      stages.push_back(s);
      start = end;
      if (start >= config.numLayers)
        break;
    }
    stages.front().embedding = true;
    stages.back().head = true;
    result.memoryProportional = evaluateCandidate(profile, topology, options, stages);
  }
  return result;
}

} // namespace weft::partition
