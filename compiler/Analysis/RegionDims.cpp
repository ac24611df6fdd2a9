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

  // What the op fixes (RegionDimsOpInterface); ops without the interface
  // fix nothing.
  void addOp(Operation *op) {
    if (auto dims = dyn_cast<RegionDimsOpInterface>(op))
      dims.recordDims([&](StringRef name, int64_t value) { add(name, value); });
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
