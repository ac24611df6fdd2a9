// The partitioner: searches pipeline splits, tensor-parallel groups, their
// hybrids and host offload for the plan that runs a model fastest on a
// topology, within every device's memory.
#ifndef WEFT_COMPILER_PARTITION_PARTITIONER_H_
#define WEFT_COMPILER_PARTITION_PARTITIONER_H_

#include "compiler/Partition/CostModel.h"

namespace weft::partition {

enum class Objective { Latency, Throughput };

struct Stage {
  std::vector<int> devices;    // one device, or a tensor-parallel group
  int64_t firstLayer = 0;      // layers [firstLayer, endLayer)
  int64_t endLayer = 0;
  int64_t offloadedLayers = 0; // the last ones of the range live in host RAM
  bool embedding = false;      // holds the token embedding (first stage)
  bool head = false;           // holds the final norm + LM head (last stage)
  double seconds1 = 0;         // one decode step at batch 1
  double secondsBatch = 0;     // one decode step of this stage's micro-batch
  double linkSeconds1 = 0;     // send to the next stage, batch 1
  double linkSecondsBatch = 0;
};

struct PartitionOptions {
  Objective objective = Objective::Throughput;
  int64_t batch = 1;          // concurrent sequences the plan must hold
  int64_t context = 4096;     // max tokens per sequence (KV cache sizing)
  int64_t decodeContext = 0;  // positions attended when timing; 0: context/2
  int64_t prefillChunk = 512; // largest prefill bucket (activation sizing)
  WeightFormat weights;
  bool allowHostOffload = true;
  // One-token decode steps run each single-device stage's layers as the
  // decode stream kernel (sm_90 and newer): priced by streamLayerSeconds
  // instead of kernel by kernel. Set where the plan asks for it and the
  // kernel takes the model (decodeStreamTakes).
  bool decodeStream = false;
  // A plan will be built from the result: offer only what the runtime can
  // execute (no quantized-weight hints when nothing fits).
  bool runnableOnly = false;
  size_t runnersUp = 4;
  // When set, this layout is priced and used instead of searching (see
  // parseStageSpec); it must still fit.
  std::vector<Stage> forcedStages;

  // Whether a one-token decode step of `tpDegree` devices starting at
  // `device` runs the decode stream kernel.
  bool streams(const hardware::DeviceProfile &device, int64_t tokens, bool prefill,
               int tpDegree) const;

  int64_t timingContext() const {
    return decodeContext > 0 ? decodeContext : std::max<int64_t>(1, context / 2);
  }
};

// Bytes a device needs, by category.
struct DeviceMemory {
  int device = 0;
  uint64_t weights = 0;
  uint64_t kvCache = 0;
  uint64_t activations = 0;
  uint64_t workspace = 0;
  uint64_t reserve = 0;     // CUDA context and libraries
  uint64_t capacity = 0;    // physical memory, or the cap
  uint64_t hostWeights = 0; // offloaded layers kept in host RAM
  uint64_t total() const { return weights + kvCache + activations + workspace + reserve; }
  int64_t shortfall() const { return int64_t(total()) - int64_t(capacity); }
};


struct Candidate {
  std::string description;
  std::vector<Stage> stages;
  std::vector<DeviceMemory> memory; // one per device of the topology
  bool fits = false;
  double latencySeconds = 0;         // per token of one stream
  double tokensPerSecondBatch1 = 0;  // = 1 / latency
  double tokensPerSecond = 0;        // all streams, at the declared batch
  int64_t microBatches = 1;          // pipelined schedule chosen for it
  double score(Objective o) const {
    return o == Objective::Latency ? tokensPerSecondBatch1 : tokensPerSecond;
  }
};

struct PartitionResult {
  Candidate best;
  std::vector<Candidate> runnersUp;         // next best fitting candidates
  std::optional<Candidate> memoryProportional; // the llama.cpp-style split
  size_t candidatesEvaluated = 0;
};

// The weight dtype a checkpoint's kernels run in: its torch_dtype, or its
// quantization's bits; the only one a plan can hold today.
WeightDType nativeWeightDType(const ModelConfig &config);

// Options from their command-line spellings: objective "latency" or
// "throughput", batch and context >= 1, weight dtype name (empty: the
// checkpoint's).
llvm::Expected<PartitionOptions>
makePartitionOptions(const ModelConfig &config, llvm::StringRef objective,
                     int64_t batch, int64_t context, llvm::StringRef weightDType);

// Parses a --stages layout: stages joined by ',' in pipeline order, each
// DEVICES[:LAYERS] where DEVICES is one device index or a tensor-parallel
// group "0+1"; stages without a layer count share the remaining layers
// evenly. "0+1" is tensor parallel over devices 0 and 1; "1:9,0" puts 9
// layers on device 1 and the rest on device 0.
llvm::Expected<std::vector<Stage>> parseStageSpec(llvm::StringRef spec,
                                                  const ModelConfig &config,
                                                  const hardware::Topology &topology);

// Searches every candidate; fails with the shortfall per device and the
// nearest configurations that would fit when nothing does.
llvm::Expected<PartitionResult> partitionModel(const ModelProfile &profile,
                                               const hardware::Topology &topology,
                                               const PartitionOptions &options);

// The device of a stage that runs the token embedding (its first) and the
// one that runs the final norm and LM head (its last, or its first when the
// table is tied and the stage also embeds). Only layers are sharded.
int embeddingDevice(const Stage &s);
int headDevice(const Stage &s, bool tiedEmbeddings);

// Prices one given candidate layout (used for baselines and tests).
Candidate evaluateCandidate(const ModelProfile &profile,
                            const hardware::Topology &topology,
                            const PartitionOptions &options,
                            std::vector<Stage> stages);

// The predicted time of one step of `tokens` tokens through every stage in
// turn, as weft-run --bench runs a bucket: decode with every sequence at
// `context` cached positions, or (`prefill`) one chunk after `context`
// cached positions (0: from position 0), whose tokens attend to those and
// to half the chunk on average. Split by part, with the
// calibrated step scales applied (`raw`, when given, receives the same
// without them, which is what a new calibration is measured against).
StepSplit predictStepSeconds(const ModelProfile &profile, const hardware::Topology &topology,
                             const PartitionOptions &options, const std::vector<Stage> &stages,
                             int64_t tokens, int64_t context, bool prefill,
                             StepSplit *raw = nullptr);

} // namespace weft::partition

#endif // WEFT_COMPILER_PARTITION_PARTITIONER_H_
