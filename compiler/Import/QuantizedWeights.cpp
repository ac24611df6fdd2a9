// Unpacking AWQ and GPTQ projections (see QuantizedWeights.h).
#include "compiler/Import/QuantizedWeights.h"

#include "compiler/Support/Error.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FormatVariadic.h"

namespace weft {
namespace {

float roundToHalf(float v) {
  llvm::APFloat f(v);
  bool lost = false;
  f.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &lost);
  f.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return f.convertToFloat();
}

// Value k of a word of `bits`-bit values, lowest bits first.
uint32_t field(int32_t word, int k, int bits) {
  return (uint32_t(word) >> (k * bits)) & ((1u << bits) - 1);
}

// AWQ stores column c of a group of 8 at nibble (c % 2) * 4 + c / 2 (the
// order 0, 2, 4, 6, 1, 3, 5, 7 of the columns, nibble by nibble).
int awqNibble(int column) { return (column % 2) * 4 + column / 2; }

} // namespace

llvm::Expected<std::vector<float>> dequantizeProjection(const Quantization &q,
                                                        llvm::StringRef name,
                                                        const PackedProjection &p) {
  auto fail = [&](const llvm::Twine &msg) {
    return makeOneLineError(name + ": " + msg);
  };
  const int bits = q.bits, perWord = 32 / bits;
  const int64_t group = q.groupSize ? q.groupSize : p.in;
  const int64_t groups = p.in / group;
  bool awq = q.method == QuantMethod::Awq;
  uint64_t wantWeight = awq ? uint64_t(p.in * (p.out / perWord))
                            : uint64_t((p.in / perWord) * p.out);
  if (p.qweight.size() != wantWeight || p.qzeros.size() != uint64_t(groups * (p.out / perWord)) ||
      p.scales.size() != uint64_t(groups * p.out) ||
      (!awq && p.gIdx.size() != uint64_t(p.in)))
    return fail(llvm::formatv("packed tensors of {0} x {1} do not match {2}", p.out, p.in,
                              q.describe()));
  std::vector<float> w(size_t(p.out * p.in));
  for (int64_t i = 0; i < p.in; ++i) {
    int64_t g = awq ? i / group : p.gIdx[size_t(i)];
    if (g < 0 || g >= groups)
      return fail(llvm::formatv("g_idx[{0}] = {1} is not one of the {2} groups", i, g, groups));
    for (int64_t j = 0; j < p.out; ++j) {
      uint32_t code, zero;
      if (awq) {
        int nibble = awqNibble(int(j % 8));
        code = field(p.qweight[size_t(i * (p.out / 8) + j / 8)], nibble, 4);
        zero = field(p.qzeros[size_t(g * (p.out / 8) + j / 8)], nibble, 4);
      } else {
        code = field(p.qweight[size_t((i / perWord) * p.out + j)], int(i % perWord), bits);
        zero = field(p.qzeros[size_t(g * (p.out / perWord) + j / perWord)],
                     int(j % perWord), bits) + 1; // stored minus one
      }
      float scale = p.scales[size_t(g * p.out + j)];
      w[size_t(j * p.in + i)] = roundToHalf(float(int64_t(code) - int64_t(zero)) * scale);
    }
  }
  return w;
}

} // namespace weft
