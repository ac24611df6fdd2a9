// dist annotations for a chosen partition.
#include "compiler/Partition/Annotate.h"

#include "compiler/Import/Importer.h"
#include "dialects/Dist/IR/DistDialect.h"
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace weft::partition {
namespace {

int64_t regionLayer(FusionOp region) {
  CostContext ctx;
  return estimateRegionCost(region, ctx).layer;
}

// Whether `v` (an activation outside any region) is split by features over
// a tensor-parallel group: the output of attention (each device has its
// heads) or of a gated MLP (each device has its columns of gate and up).
// A projection reading such a value is row-parallel: each device holds the
// weight's columns for its features and sums partial outputs.
bool featureSharded(Value v) {
  auto producer = v.getDefiningOp<FusionOp>();
  if (!producer)
    return false;
  Value yielded = producer.getBody().front().getTerminator()->getOperand(
      llvm::cast<OpResult>(v).getResultNumber());
  Operation *def = yielded.getDefiningOp();
  return def && isa<AttentionOp, MulOp>(def);
}

DictionaryAttr candidateAttr(Builder &b, const Candidate &c) {
  SmallVector<NamedAttribute> a;
  a.push_back(b.getNamedAttr("description", b.getStringAttr(c.description)));
  a.push_back(b.getNamedAttr("fits", b.getBoolAttr(c.fits)));
  a.push_back(b.getNamedAttr("latency_ms", b.getF64FloatAttr(c.latencySeconds * 1e3)));
  a.push_back(b.getNamedAttr("tokens_per_second_batch1",
                             b.getF64FloatAttr(c.tokensPerSecondBatch1)));
  a.push_back(b.getNamedAttr("tokens_per_second", b.getF64FloatAttr(c.tokensPerSecond)));
  a.push_back(b.getNamedAttr("micro_batches", b.getI64IntegerAttr(c.microBatches)));
  return b.getDictionaryAttr(a);
}

} // namespace

LogicalResult annotatePartition(ModuleOp module, const PartitionResult &result,
                                const hardware::Topology &topology,
                                const PartitionOptions &options) {
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<dist::DistDialect>();
  auto fn = module.lookupSymbol<func::FuncOp>("forward");
  if (!fn)
    return module.emitError("weft-partition: no @forward function to partition");
  const std::vector<Stage> &stages = result.best.stages;
  OpBuilder b(ctx);

  auto stageOfLayer = [&](int64_t layer) -> int64_t {
    for (size_t i = 0; i < stages.size(); ++i)
      if (layer >= stages[i].firstLayer && layer < stages[i].endLayer)
        return int64_t(i);
    return -1;
  };

  // Placement of every region; pre-layer regions go to the first stage and
  // post-layer ones to the last, each on one device of it (the embedding
  // and the LM head are not sharded).
  bool tied = false;
  if (llvm::Expected<ModelConfig> config = modelConfigFromModule(module))
    tied = config->tieWordEmbeddings;
  else
    llvm::consumeError(config.takeError());
  llvm::DenseMap<Operation *, int64_t> stageOf;
  bool seenLayer = false;
  fn.walk([&](FusionOp region) {
    int64_t layer = regionLayer(region);
    int64_t s = layer >= 0 ? stageOfLayer(layer)
                           : (seenLayer ? int64_t(stages.size()) - 1 : 0);
    const Stage &st = stages[size_t(s)];
    SmallVector<int64_t> devices(st.devices.begin(), st.devices.end());
    if (layer < 0)
      devices = {seenLayer ? headDevice(st, tied) : embeddingDevice(st)};
    seenLayer |= layer >= 0;
    region->setAttr("dist.placement",
                    dist::PlacementAttr::get(ctx, s, b.getDenseI64ArrayAttr(devices)));
    stageOf[region] = s;
  });

  // Tensor-parallel stages: shard the weights of their layers, reduce after
  // row-parallel projections.
  LogicalResult sharding = success();
  fn.walk([&](FusionOp region) {
    const Stage &st = stages[size_t(stageOf[region])];
    int64_t parts = int64_t(st.devices.size());
    if (parts < 2 || regionLayer(region) < 0)
      return;
    bool rowParallel = false;
    Block &body = region.getBody().front();
    // The projections of the region whose input is split by features.
    llvm::SmallPtrSet<Operation *, 2> rowLinears;
    body.walk([&](LinearOp linear) {
      if (auto arg = dyn_cast<BlockArgument>(linear.getInput());
          arg && featureSharded(region.getInputs()[arg.getArgNumber()]))
        rowLinears.insert(linear);
    });
    for (auto [index, input] : llvm::enumerate(region.getInputs())) {
      auto uses = body.getArgument(unsigned(index)).getUses();
      auto usedAs = [&](unsigned operand, auto pred) {
        return llvm::any_of(uses, [&](OpOperand &use) {
          return use.getOperandNumber() == operand && pred(use.getOwner());
        });
      };
      // A norm's weight scales every feature (or every head) alike: each
      // device holds all of it; so does a row-parallel projection's bias
      // (added once, after the partial sums).
      bool normWeight = usedAs(1, [](Operation *op) { return isa<RmsNormOp, HeadRmsNormOp>(op); });
      bool rowWeight = usedAs(1, [&](Operation *op) {
        return isa<LinearOp>(op) && rowLinears.contains(op);
      });
      bool rowBias = usedAs(2, [&](Operation *op) {
        return isa<LinearOp>(op) && rowLinears.contains(op);
      });
      SmallVector<WeightOp> refs;
      if (auto w = input.getDefiningOp<WeightOp>())
        refs.push_back(w);
      else if (auto c = input.getDefiningOp<WeightConcatOp>())
        for (Value v : c.getInputs())
          if (auto w = v.getDefiningOp<WeightOp>())
            refs.push_back(w);
      // Tiled codes (#weft.quant's `tiled`) can be cut between whole tiles
      // only (128 inputs, 16 rows); where a cut falls inside one, the
      // weight (every part of a concatenation alike) keeps its codes row
      // by row instead.
      bool untile = false;
      for (WeightOp w : refs)
        if (QuantAttr q = w.getQuantAttr(); q && q.getTiled() && !normWeight && !rowBias) {
          int64_t cut = w.getType().getDimSize(rowWeight ? 1 : 0) / parts;
          untile |= cut % (rowWeight ? 128 : 16) != 0;
        }
      if (untile)
        for (WeightOp w : refs)
          if (QuantAttr q = w.getQuantAttr())
            w.setQuantAttr(QuantAttr::get(ctx, q.getBits(), q.getGroup(), q.getFormat(), false));
      for (WeightOp w : refs) {
        bool row = rowWeight;
        bool replicated = normWeight || rowBias;
        rowParallel |= row;
        // A quantized weight's groups cannot straddle two devices (a
        // column cut keeps whole rows, so any cut of rows is fine).
        if (QuantAttr q = w.getQuantAttr(); q && row) {
          int64_t cut = w.getType().getDimSize(1) / parts;
          if (cut % q.getGroup() != 0) {
            sharding = w.emitError() << "weft-partition: " << parts << "-way tensor parallelism "
                                     << "cuts '" << w.getName() << "' into " << cut
                                     << " inputs, not a multiple of its quantization group "
                                     << q.getGroup();
            return;
          }
        }
        if (!replicated)
          w->setAttr("dist.shard", dist::ShardAttr::get(ctx, row ? 1 : 0, parts));
      }
    }
    if (rowParallel) {
      b.setInsertionPointAfter(region);
      SmallVector<int64_t> devices(st.devices.begin(), st.devices.end());
      for (Value result : region.getResults()) {
        auto reduce = b.create<dist::AllReduceOp>(region.getLoc(), result.getType(), result,
                                                  b.getDenseI64ArrayAttr(devices));
        result.replaceAllUsesExcept(reduce.getResult(), reduce);
      }
    }
  });

  if (failed(sharding))
    return failure();

  // Transfers: an activation produced in one stage and used in a later one
  // is sent once, stage to stage, to each later stage that reads it.
  SmallVector<FusionOp> regions;
  fn.walk([&](FusionOp r) { regions.push_back(r); });
  llvm::DenseMap<std::pair<Value, int64_t>, Value> sent; // (value, stage)
  for (FusionOp consumer : regions) {
    int64_t to = stageOf[consumer];
    for (OpOperand &use : consumer->getOpOperands()) {
      Value v = use.get();
      Operation *def = v.getDefiningOp();
      if (auto reduce = dyn_cast_or_null<dist::AllReduceOp>(def))
        def = reduce.getInput().getDefiningOp();
      auto producer = dyn_cast_or_null<FusionOp>(def);
      if (!producer || stageOf[producer] == to)
        continue;
      Value moved = v;
      for (int64_t s = stageOf[producer]; s < to; ++s) {
        Value &next = sent[{v, s + 1}];
        if (!next) {
          b.setInsertionPoint(consumer);
          next = b.create<dist::TransferOp>(
              consumer.getLoc(), moved.getType(), moved,
              b.getI64IntegerAttr(stages[size_t(s)].devices.back()),
              b.getI64IntegerAttr(stages[size_t(s) + 1].devices.front()));
        }
        moved = next;
      }
      use.set(moved);
    }
  }

  // The decision and its figures, for the plan and the report.
  SmallVector<NamedAttribute> p;
  p.push_back(b.getNamedAttr("topology", b.getStringAttr(topology.name)));
  p.push_back(b.getNamedAttr(
      "objective", b.getStringAttr(options.objective == Objective::Latency
                                       ? "latency" : "throughput")));
  p.push_back(b.getNamedAttr("batch", b.getI64IntegerAttr(options.batch)));
  p.push_back(b.getNamedAttr("context", b.getI64IntegerAttr(options.context)));
  p.push_back(b.getNamedAttr("weight_dtype",
                             b.getStringAttr(weightDTypeName(options.weights.dtype))));
  SmallVector<Attribute> stageAttrs;
  for (const Stage &s : stages) {
    SmallVector<int64_t> devices(s.devices.begin(), s.devices.end());
    stageAttrs.push_back(b.getDictionaryAttr({
        b.getNamedAttr("devices", b.getDenseI64ArrayAttr(devices)),
        b.getNamedAttr("first_layer", b.getI64IntegerAttr(s.firstLayer)),
        b.getNamedAttr("end_layer", b.getI64IntegerAttr(s.endLayer)),
        b.getNamedAttr("offloaded_layers", b.getI64IntegerAttr(s.offloadedLayers)),
        b.getNamedAttr("step_ms_batch1", b.getF64FloatAttr(s.seconds1 * 1e3)),
    }));
  }
  p.push_back(b.getNamedAttr("stages", b.getArrayAttr(stageAttrs)));
  p.push_back(b.getNamedAttr("chosen", candidateAttr(b, result.best)));
  SmallVector<Attribute> runners;
  for (const Candidate &c : result.runnersUp)
    runners.push_back(candidateAttr(b, c));
  p.push_back(b.getNamedAttr("runners_up", b.getArrayAttr(runners)));
  if (result.memoryProportional)
    p.push_back(b.getNamedAttr("memory_proportional",
                               candidateAttr(b, *result.memoryProportional)));
  module->setAttr("dist.partition", b.getDictionaryAttr(p));
  return success();
}

llvm::Expected<PartitionedModule> partitionModule(ModuleOp module, const ModelConfig &config,
                                                  const hardware::Topology &topology,
                                                  const PartitionOptions &options) {
  llvm::Expected<ModelProfile> profile = profileModel(module, config);
  if (!profile)
    return profile.takeError();
  llvm::Expected<PartitionResult> result = partitionModel(*profile, topology, options);
  if (!result)
    return result.takeError();
  if (failed(annotatePartition(module, *result, topology, options)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "internal error: annotating the partition failed");
  return PartitionedModule{std::move(*profile), std::move(*result)};
}

} // namespace weft::partition
