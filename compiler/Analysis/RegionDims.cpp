// The `dims` of a kernel region.
#include "compiler/Analysis/RegionDims.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace weft {
namespace {

class DimsBuilder {
public:
  explicit DimsBuilder(Builder &b) : b(b) {}

  void add(StringRef name, int64_t value) {
    // A second op with the same dimension name but another value (two
    // projections in one region) gets a numbered name.
    std::string key = name.str();
    for (int i = 2; seen.count(key) && seen[key] != value; ++i)
      key = (name + "_" + Twine(i)).str();
    if (seen.try_emplace(key, value).second)
      attrs.push_back(b.getNamedAttr(key, b.getI64IntegerAttr(value)));
  }

  void addOp(Operation *op) {
    auto width = [](Value v) {
      return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1);
    };
    if (auto linear = dyn_cast<LinearOp>(op)) {
      add("k", width(linear.getInput()));
      add("n", width(linear.getResult()));
    } else if (auto norm = dyn_cast<RmsNormOp>(op)) {
      add("hidden", width(norm.getInput()));
    } else if (auto rope = dyn_cast<RopeOp>(op)) {
      add("head_dim", rope.getHeadDim());
    } else if (auto norm = dyn_cast<HeadRmsNormOp>(op)) {
      add("head_dim", norm.getHeadDim());
    } else if (auto write = dyn_cast<KvWriteOp>(op)) {
      add("kv_heads", write.getCache().getType().getKvHeads());
      add("head_dim", write.getCache().getType().getHeadDim());
      add("layer", write.getLayer());
    } else if (auto attn = dyn_cast<AttentionOp>(op)) {
      add("num_heads", attn.getNumHeads());
      add("kv_heads", attn.getNumKvHeads());
      add("head_dim", attn.getHeadDim());
      add("layer", attn.getLayer());
      if (auto window = attn.getSlidingWindow())
        add("sliding_window", *window);
    } else if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      add("vocab", emb.getTable().getType().getDimSize(0));
      add("hidden", emb.getTable().getType().getDimSize(1));
    } else if (auto logits = dyn_cast<LogitsOp>(op)) {
      add("vocab", logits.getWeight().getType().getDimSize(0));
      add("hidden", logits.getWeight().getType().getDimSize(1));
    } else if (isa<SiluOp, GeluTanhOp, MulOp, AddOp>(op)) {
      add("width", width(op->getResult(0)));
    }
  }

  DictionaryAttr get() { return b.getDictionaryAttr(attrs); }

private:
  Builder &b;
  SmallVector<NamedAttribute> attrs;
  llvm::StringMap<int64_t> seen;
};

} // namespace

DictionaryAttr computeRegionDims(FusionOp region, int64_t tokens) {
  Builder b(region.getContext());
  DimsBuilder dims(b);
  dims.add("tokens", tokens);
  for (Operation &op : region.getBody().front().without_terminator())
    dims.addOp(&op);
  return dims.get();
}

} // namespace weft
