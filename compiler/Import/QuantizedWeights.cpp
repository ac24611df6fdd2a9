// Unpacking AWQ and GPTQ projections, and repacking them for the kernels
// (see QuantizedWeights.h).
#include "compiler/Import/QuantizedWeights.h"

#include "compiler/Support/Error.h"
#include "runtime/io/MappedFile.h"
#include "runtime/plan/Fnv1a.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Parallel.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace weft {
namespace {

// Value k of a word of `bits`-bit values, lowest bits first.
uint32_t field(int32_t word, int k, int bits) {
  return (uint32_t(word) >> (k * bits)) & ((1u << bits) - 1);
}

// AWQ stores column c of a group of 8 at nibble (c % 2) * 4 + c / 2 (the
// order 0, 2, 4, 6, 1, 3, 5, 7 of the columns, nibble by nibble).
int awqNibble(int column) { return (column % 2) * 4 + column / 2; }

// Element access to one projection's packed tensors, in the checkpoint's
// format: input i, output j.
class PackedReader {
public:
  PackedReader(const Quantization &q, const PackedProjection &p)
      : q(q), p(p), bits(q.bits), perWord(32 / q.bits),
        group(q.groupSize ? q.groupSize : p.in), groups(p.in / group),
        awq(q.method == QuantMethod::Awq) {}

  // An error message when the tensors' sizes disagree with the shapes.
  std::optional<std::string> checkSizes() const {
    uint64_t wantWeight = awq ? uint64_t(p.in * (p.out / perWord))
                              : uint64_t((p.in / perWord) * p.out);
    if (p.qweight.size() != wantWeight ||
        p.qzeros.size() != uint64_t(groups * (p.out / perWord)) ||
        p.scales.size() != uint64_t(groups * p.out) ||
        (!awq && p.gIdx.size() != uint64_t(p.in)))
      return std::string(llvm::formatv("packed tensors of {0} x {1} do not match {2}", p.out,
                                       p.in, q.describe()));
    return std::nullopt;
  }
  int64_t groupOf(int64_t i) const { return awq ? i / group : p.gIdx[size_t(i)]; }
  uint32_t code(int64_t i, int64_t j) const {
    if (awq)
      return field(p.qweight[size_t(i * (p.out / 8) + j / 8)], awqNibble(int(j % 8)), 4);
    return field(p.qweight[size_t((i / perWord) * p.out + j)], int(i % perWord), bits);
  }
  uint32_t zero(int64_t g, int64_t j) const {
    if (awq)
      return field(p.qzeros[size_t(g * (p.out / 8) + j / 8)], awqNibble(int(j % 8)), 4);
    // GPTQ (v1) stores the zero points minus one.
    return field(p.qzeros[size_t(g * (p.out / perWord) + j / perWord)], int(j % perWord),
                 bits) + 1;
  }
  float scale(int64_t g, int64_t j) const { return p.scales[size_t(g * p.out + j)]; }

  const Quantization &q;
  const PackedProjection &p;
  const int bits, perWord;
  const int64_t group, groups;
  const bool awq;
};

} // namespace

uint16_t halfBits(float v) {
  uint32_t x;
  std::memcpy(&x, &v, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) // infinity, NaN
    return uint16_t(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) // 65520 and up round to infinity
    return uint16_t(sign | 0x7c00u);
  if (abs < 0x38800000u) { // below 2^-14: an f16 subnormal, in units of 2^-24
    float a;
    std::memcpy(&a, &abs, 4);
    return uint16_t(sign | uint32_t(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t h = ((abs >> 23) - 112u) << 10 | ((abs >> 13) & 0x3ffu);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h; // may carry into the exponent, which is the right rounding
  return uint16_t(sign | h);
}

uint16_t bfloat16Bits(float v) {
  uint32_t x;
  std::memcpy(&x, &v, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN stays a (quiet) NaN
    return uint16_t((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

uint8_t e4m3Bits(float v) {
  uint32_t x;
  std::memcpy(&x, &v, 4);
  const uint8_t sign = uint8_t((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) // NaN
    return 0x7f;
  if (abs >= 0x43e00000u) // 448 and up, infinity: the largest finite value
    return uint8_t(sign | 0x7e);
  if (abs < 0x3c800000u) { // below 2^-6: subnormals, multiples of 2^-9
    float a;
    std::memcpy(&a, &abs, 4);
    return uint8_t(sign | uint8_t(std::nearbyint(a * 512.0f))); // 0 .. 8 (8: 2^-6)
  }
  // Normal: the f32 mantissa rounded to 3 bits, to nearest even (a carry
  // moves into the exponent, which is the right rounding; below 448 it
  // never reaches the NaN code); exponent bias 127 becomes 7.
  const uint32_t r = (abs + 0x7ffffu + ((abs >> 20) & 1u)) >> 20;
  return uint8_t(sign | uint8_t(r - ((127u - 7u) << 3)));
}

float e4m3Value(uint8_t b) {
  const int exponent = (b >> 3) & 0xf, mantissa = b & 7;
  if ((b & 0x7f) == 0x7f)
    return std::numeric_limits<float>::quiet_NaN();
  const float a = exponent == 0 ? std::ldexp(float(mantissa), -9)
                                : std::ldexp(float(8 + mantissa), exponent - 7 - 3);
  return (b & 0x80) ? -a : a;
}

namespace {

// What v becomes stored as `type` (F16 or BF16).
float roundTo(io::DType type, float v) {
  const uint16_t h = type == io::DType::BF16 ? bfloat16Bits(v) : halfBits(v);
  float f;
  io::decodeToFloat(type, &h, 1, &f);
  return f;
}

uint16_t bitsOf(io::DType type, float v) {
  return type == io::DType::BF16 ? bfloat16Bits(v) : halfBits(v);
}

} // namespace

llvm::Expected<GptqTensors> gptqFromCompressedTensors(const Quantization &q,
                                                      llvm::StringRef name, int64_t out,
                                                      int64_t in, llvm::ArrayRef<int32_t> packed,
                                                      llvm::ArrayRef<float> scales) {
  const int perWord = 32 / q.bits;
  const int64_t group = q.groupSize ? q.groupSize : in, groups = in / group;
  const int64_t words = in / perWord;
  if (out % perWord != 0 || in % group != 0 || packed.size() != uint64_t(out * words) ||
      scales.size() != uint64_t(out * groups))
    return makeOneLineError(name + ": " +
                            llvm::formatv("weight_packed of {0} words and weight_scale of {1} "
                                          "do not match {2} x {3}, {4}",
                                          packed.size(), scales.size(), out, in, q.describe()));
  GptqTensors t;
  t.out = out;
  t.in = in;
  t.qweight.resize(packed.size());
  for (int64_t j = 0; j < out; ++j)
    for (int64_t w = 0; w < words; ++w)
      t.qweight[size_t(w * out + j)] = packed[size_t(j * words + w)];
  t.scales.resize(scales.size());
  for (int64_t j = 0; j < out; ++j)
    for (int64_t g = 0; g < groups; ++g)
      t.scales[size_t(g * out + j)] = scales[size_t(j * groups + g)];
  // Every field holds 2^(bits-1) - 1: GPTQ's zero minus one.
  uint32_t zeroWord = 0;
  for (int k = 0; k < perWord; ++k)
    zeroWord |= ((1u << (q.bits - 1)) - 1) << (k * q.bits);
  t.qzeros.assign(size_t(groups * (out / perWord)), int32_t(zeroWord));
  t.gIdx.resize(size_t(in));
  for (int64_t i = 0; i < in; ++i)
    t.gIdx[size_t(i)] = int32_t(i / group);
  return t;
}

llvm::Expected<std::vector<float>> dequantizeProjection(const Quantization &q,
                                                        llvm::StringRef name,
                                                        const PackedProjection &p,
                                                        io::DType roundTo) {
  PackedReader r(q, p);
  if (std::optional<std::string> bad = r.checkSizes())
    return makeOneLineError(name + ": " + *bad);
  std::vector<float> w(size_t(p.out * p.in));
  for (int64_t i = 0; i < p.in; ++i) {
    int64_t g = r.groupOf(i);
    if (g < 0 || g >= r.groups)
      return makeOneLineError(name + ": " + llvm::formatv("g_idx[{0}] = {1} is not one of the "
                                                          "{2} groups",
                                                          i, g, r.groups));
    for (int64_t j = 0; j < p.out; ++j)
      w[size_t(j * p.in + i)] = weft::roundTo(roundTo,
          float(int64_t(r.code(i, j)) - int64_t(r.zero(g, j))) * r.scale(g, j));
  }
  return w;
}

llvm::Expected<KernelProjection> repackForKernels(const Quantization &q, llvm::StringRef name,
                                                  const PackedProjection &p,
                                                  io::DType scaleType) {
  PackedReader r(q, p);
  if (std::optional<std::string> bad = r.checkSizes())
    return makeOneLineError(name + ": " + *bad);
  KernelProjection k;
  k.out = p.out;
  k.in = p.in;
  k.bits = q.bits;
  k.group = r.group;
  k.scaleType = scaleType;
  const int perWord = 32 / q.bits;
  for (int64_t i = 0; i < p.in; ++i)
    if (r.groupOf(i) != i / r.group)
      return makeOneLineError(
          name + ": " + llvm::formatv("g_idx[{0}] = {1}, not {2}: the input features are "
                                      "reordered (act-order), which the kernels do not support",
                                      i, r.groupOf(i), i / r.group));
  const int64_t wordsPerRow = p.in / perWord;
  k.codes.assign(size_t(p.out * wordsPerRow), 0u);
  k.scales.resize(size_t(p.out * r.groups * 2));
  // Blocks of 64 output rows on LLVM's thread pool, a kernel word at a
  // time: GPTQ already keeps the word's inputs in one word (sequential
  // fields, to be moved to the kernel's slots); AWQ keeps 8 outputs of one
  // input in a word, so each 8 x 8 block of codes is transposed.
  constexpr int64_t kRows = 64;
  const uint32_t mask = (1u << q.bits) - 1;
  llvm::parallelFor(0, size_t((p.out + kRows - 1) / kRows), [&](size_t block) {
    const int64_t j0 = int64_t(block) * kRows, j1 = std::min(p.out, j0 + kRows);
    if (!r.awq) {
      for (int64_t w = 0; w < wordsPerRow; ++w)
        for (int64_t j = j0; j < j1; ++j) {
          const uint32_t src = uint32_t(p.qweight[size_t(w * p.out + j)]);
          uint32_t dst = 0;
          for (int c = 0; c < perWord; ++c)
            dst |= ((src >> (c * q.bits)) & mask) << kernelCodeSlot(c, q.bits);
          k.codes[size_t(j * wordsPerRow + w)] = dst;
        }
    } else {
      for (int64_t w = 0; w < wordsPerRow; ++w)  // 8 inputs
        for (int64_t jb = j0 / 8; jb < (j1 + 7) / 8; ++jb) { // 8 outputs
          uint32_t src[8];
          for (int i = 0; i < 8; ++i)
            src[i] = uint32_t(p.qweight[size_t((w * 8 + i) * (p.out / 8) + jb)]);
          for (int c = 0; c < 8; ++c) {
            uint32_t dst = 0;
            for (int i = 0; i < 8; ++i)
              dst |= ((src[i] >> (4 * awqNibble(c))) & 0xfu) << kernelCodeSlot(i, 4);
            k.codes[size_t((jb * 8 + c) * wordsPerRow + w)] = dst;
          }
        }
    }
    for (int64_t g = 0; g < r.groups; ++g)
      for (int64_t j = j0; j < j1; ++j) {
        k.scales[size_t((j * r.groups + g) * 2)] = bitsOf(scaleType, r.scale(g, j));
        k.scales[size_t((j * r.groups + g) * 2 + 1)] = bitsOf(scaleType, float(r.zero(g, j)));
      }
  });
  return k;
}

namespace {

// std::nearbyint in the default rounding mode (to nearest, ties to even),
// without the library call it compiles to where SSE4.1 is not assumed:
// adding 1.5 * 2^23 and taking it away again rounds any |x| < 2^22 in the
// add's own rounding.
inline float roundToEven(float x) {
  constexpr float kMagic = 12582912.0f;
  return std::fabs(x) < 4194304.0f ? (x + kMagic) - kMagic : std::nearbyint(x);
}

// The minimum, maximum and largest magnitude of a group's n values, as one
// pass of std::min / std::max from v[0] (and 0 for the magnitude) gives
// them, in four independent chains: both are exact, so the order does not
// change them (NaNs are skipped, except in v[0], as in one chain).
inline void groupRange(const float *v, int64_t n, float &lo, float &hi, float &amax) {
  float l[4] = {v[0], v[0], v[0], v[0]}, h[4] = {v[0], v[0], v[0], v[0]},
        a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int c = 0; c < 4; ++c) {
      l[c] = std::min(l[c], v[i + c]);
      h[c] = std::max(h[c], v[i + c]);
      a[c] = std::max(a[c], std::fabs(v[i + c]));
    }
  for (; i < n; ++i) {
    l[0] = std::min(l[0], v[i]);
    h[0] = std::max(h[0], v[i]);
    a[0] = std::max(a[0], std::fabs(v[i]));
  }
  lo = std::min(std::min(l[0], l[1]), std::min(l[2], l[3]));
  hi = std::max(std::max(h[0], h[1]), std::max(h[2], h[3]));
  amax = std::max(std::max(a[0], a[1]), std::max(a[2], a[3]));
}

// A group's n values (n a multiple of 32 / BITS) as integer codes with
// scale s and zero `zero`, a word at a time into `words`.
template <int BITS>
inline void packGroup(const float *v, int64_t n, float s, int zero, uint32_t *words) {
  constexpr int kPerWord = 32 / BITS;
  constexpr float kTop = float((1 << BITS) - 1);
  for (int64_t w = 0; w < n / kPerWord; ++w) {
    uint32_t word = 0;
    for (int c = 0; c < kPerWord; ++c) {
      const float code =
          std::clamp(roundToEven(v[w * kPerWord + c] / s) + float(zero), 0.0f, kTop);
      word |= uint32_t(int(code)) << kernelCodeSlot(c, BITS);
    }
    words[w] = word;
  }
}

// The quantizer of quantizeForKernels, over rows that `rowOf(j, scratch)`
// gives as f32 (a pointer into the caller's matrix, or into `scratch`, `in`
// floats of the calling thread).
KernelProjection quantizeRows(int64_t out, int64_t in, int bits, int64_t group, bool symmetric,
                              QuantFormat format, io::DType scaleType,
                              llvm::function_ref<const float *(int64_t, float *)> rowOf) {
  KernelProjection k;
  k.out = out;
  k.in = in;
  k.bits = bits;
  k.group = group;
  k.format = format;
  k.scaleType = scaleType;
  const int perWord = 32 / bits, top = (1 << bits) - 1;
  const int64_t groups = in / group, wordsPerRow = in / perWord;
  k.codes.assign(size_t(out * wordsPerRow), 0u);
  if (format == QuantFormat::E4M3)
    k.rowScales.resize(size_t(out));
  else
    k.scales.resize(size_t(out * groups * 2));
  llvm::parallelFor(0, size_t(out), [&](size_t row) {
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(in));
    const int64_t j = int64_t(row);
    const float *v = rowOf(j, scratch.data());
    uint32_t *codes = k.codes.data() + j * wordsPerRow;
    if (format == QuantFormat::E4M3) {
      float amax = 0.0f;
      for (int64_t i = 0; i < in; ++i)
        amax = std::max(amax, std::fabs(v[i]));
      const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
      for (int64_t i = 0; i < in; ++i)
        codes[i / 4] |= uint32_t(e4m3Bits(v[i] / s)) << kernelCodeSlot(int(i % 4), 8, format);
      k.rowScales[row] = s;
      return;
    }
    for (int64_t g = 0; g < groups; ++g) {
      const float *gv = v + g * group;
      float lo, hi, amax;
      groupRange(gv, group, lo, hi, amax);
      float scale;
      int zero;
      if (symmetric) {
        scale = amax / (float(top) / 2.0f);
        zero = 1 << (bits - 1);
      } else {
        scale = (hi - lo) / float(top);
        // At least 1, as GPTQ stores zeros minus one (the same rule as the
        // checkpoints' quantizers, so one format serves both).
        zero = int(std::clamp(std::nearbyint(-lo / (scale > 0.0f ? scale : 1.0f)), 1.0f,
                              float(top)));
      }
      const float s = roundTo(scaleType, scale > 0.0f ? scale : 1e-3f);
      if (bits == 4 && group % 8 == 0)
        packGroup<4>(gv, group, s, zero, codes + g * group / 8);
      else if (bits == 8 && group % 4 == 0)
        packGroup<8>(gv, group, s, zero, codes + g * group / 4);
      else
        for (int64_t i = 0; i < group; ++i) {
          const int code =
              int(std::clamp(roundToEven(gv[i] / s) + float(zero), 0.0f, float(top)));
          const int64_t at = g * group + i;
          codes[at / perWord] |= uint32_t(code) << kernelCodeSlot(int(at % perWord), bits);
        }
      k.scales[size_t((j * groups + g) * 2)] = bitsOf(scaleType, s);
      k.scales[size_t((j * groups + g) * 2 + 1)] = bitsOf(scaleType, float(zero));
    }
  });
  return k;
}

} // namespace

KernelProjection quantizeForKernels(llvm::ArrayRef<float> w, int64_t out, int64_t in, int bits,
                                    int64_t group, bool symmetric, QuantFormat format,
                                    io::DType scaleType) {
  return quantizeRows(out, in, bits, group, symmetric, format, scaleType,
                      [&](int64_t j, float *) { return w.data() + j * in; });
}

float KernelProjection::weight(int64_t j, int64_t i) const {
  const int perWord = 32 / bits;
  uint32_t word = codes[size_t(j * (in / perWord) + i / perWord)];
  uint32_t code =
      (word >> kernelCodeSlot(int(i % perWord), int(bits), format)) & ((1u << bits) - 1);
  if (format == QuantFormat::E4M3)
    return e4m3Value(uint8_t(code)) * rowScales[size_t(j)];
  size_t g = size_t(j * (in / group) + i / group);
  float pair[2];
  io::decodeToFloat(scaleType, &scales[2 * g], 2, pair);
  return roundTo(scaleType, (float(code) - pair[1]) * pair[0]);
}

namespace {

// A checkpoint tensor's bytes, checked to be `dtype` and to lie in its file.
llvm::Expected<llvm::ArrayRef<char>> tensorBytes(const Checkpoint &ck,
                                                 const std::vector<io::MappedFile> &maps,
                                                 const std::string &name, io::DType dtype) {
  auto it = ck.tensors.find(name);
  if (it == ck.tensors.end())
    return makeOneLineError(ck.dir + ": tensor '" + name + "' is missing");
  const CheckpointTensor &t = it->second;
  const io::SafetensorsHeader &h = ck.files[t.file];
  uint64_t begin = h.dataOffset() + t.info.dataBegin, end = h.dataOffset() + t.info.dataEnd;
  if (t.info.dtype != dtype || t.info.dataEnd < t.info.dataBegin ||
      t.info.dataEnd - t.info.dataBegin != t.info.numBytes() || end > maps[t.file].size())
    return makeOneLineError(h.path + ": tensor '" + name + "' is not " +
                            io::dtypeName(dtype) + " data inside the file");
  return llvm::ArrayRef<char>(maps[t.file].bytes().data() + begin, end - begin);
}

template <class T> std::vector<T> copyOut(llvm::ArrayRef<char> bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

io::DType scaleTypeOf(const Checkpoint &ck, const QuantizedWeightRef &w);

// A projection of a checkpoint stored quantized, repacked.
llvm::Expected<KernelProjection> repackFromCheckpoint(const Checkpoint &ck,
                                                      const std::vector<io::MappedFile> &maps,
                                                      const QuantizedWeightRef &w) {
  const Quantization &q = ck.quant;
  std::string base = llvm::StringRef(w.name).drop_back(std::strlen("weight")).str();
  if (q.method == QuantMethod::CompressedTensors) {
    llvm::Expected<llvm::ArrayRef<char>> packed =
        tensorBytes(ck, maps, base + "weight_packed", io::DType::I32);
    if (!packed)
      return packed.takeError();
    const io::DType scaleType = scaleTypeOf(ck, w);
    llvm::Expected<llvm::ArrayRef<char>> scales =
        tensorBytes(ck, maps, base + "weight_scale", scaleType);
    if (!scales)
      return scales.takeError();
    std::vector<float> sf(scales->size() / 2);
    io::decodeToFloat(scaleType, scales->data(), sf.size(), sf.data());
    llvm::Expected<GptqTensors> t =
        gptqFromCompressedTensors(q, w.name, w.out, w.in, copyOut<int32_t>(*packed), sf);
    if (!t)
      return t.takeError();
    return repackForKernels(q, w.name, t->view(), scaleType);
  }
  llvm::Expected<llvm::ArrayRef<char>> qweight =
      tensorBytes(ck, maps, base + "qweight", io::DType::I32);
  if (!qweight)
    return qweight.takeError();
  llvm::Expected<llvm::ArrayRef<char>> qzeros =
      tensorBytes(ck, maps, base + "qzeros", io::DType::I32);
  if (!qzeros)
    return qzeros.takeError();
  llvm::Expected<llvm::ArrayRef<char>> scales =
      tensorBytes(ck, maps, base + "scales", io::DType::F16);
  if (!scales)
    return scales.takeError();
  std::vector<int32_t> qw = copyOut<int32_t>(*qweight), qz = copyOut<int32_t>(*qzeros), gi;
  std::vector<float> sf(scales->size() / 2);
  io::decodeToFloat(io::DType::F16, scales->data(), sf.size(), sf.data());
  if (q.method == QuantMethod::Gptq) {
    llvm::Expected<llvm::ArrayRef<char>> g = tensorBytes(ck, maps, base + "g_idx", io::DType::I32);
    if (!g)
      return g.takeError();
    gi = copyOut<int32_t>(*g);
  }
  PackedProjection p;
  p.out = w.out;
  p.in = w.in;
  p.qweight = qw;
  p.qzeros = qz;
  p.scales = sf;
  p.gIdx = gi;
  return repackForKernels(q, w.name, p);
}

// The 16-bit type of a projection's scales in the file beside the plan:
// the checkpoint's scales (F16) when it is stored quantized, else the
// type of its weight (which the kernels compute in).
io::DType scaleTypeOf(const Checkpoint &ck, const QuantizedWeightRef &w) {
  std::string scales = llvm::StringRef(w.name).drop_back(std::strlen("weight")).str() +
                       "weight_scale";
  if (ck.quant.method == QuantMethod::CompressedTensors &&
      ck.quant.quantizes(w.name)) { // in the model's dtype
    auto it = ck.tensors.find(scales);
    return it != ck.tensors.end() && it->second.info.dtype == io::DType::BF16 ? io::DType::BF16
                                                                             : io::DType::F16;
  }
  if (ck.quant.active() && ck.quant.quantizes(w.name))
    return io::DType::F16;
  auto it = ck.tensors.find(w.name);
  return it != ck.tensors.end() && it->second.info.dtype == io::DType::BF16 ? io::DType::BF16
                                                                           : io::DType::F16;
}

// A projection of a 16-bit checkpoint, quantized.
llvm::Expected<KernelProjection> quantizeFromCheckpoint(const Checkpoint &ck,
                                                        const std::vector<io::MappedFile> &maps,
                                                        const QuantizedWeightRef &w) {
  auto it = ck.tensors.find(w.name);
  if (it == ck.tensors.end())
    return makeOneLineError(ck.dir + ": tensor '" + w.name + "' is missing");
  const io::DType type = it->second.info.dtype;
  if (type != io::DType::F16 && type != io::DType::BF16)
    return makeOneLineError(ck.dir + ": tensor '" + w.name + "' is " + io::dtypeName(type) +
                            ": quantizing at compile time takes F16 or BF16 weights");
  llvm::Expected<llvm::ArrayRef<char>> bytes = tensorBytes(ck, maps, w.name, type);
  if (!bytes)
    return bytes.takeError();
  if (bytes->size() != size_t(w.out * w.in * 2))
    return makeOneLineError(ck.dir + ": tensor '" + w.name + "' is not " +
                            std::to_string(w.out) + " x " + std::to_string(w.in));
  // Each row decoded to f32 by the thread that quantizes it: no f32 copy
  // of the whole matrix.
  const char *data = bytes->data();
  return quantizeRows(w.out, w.in, w.bits, w.group, /*symmetric=*/w.bits == 8, w.format, type,
                      [&](int64_t j, float *scratch) {
                        io::decodeToFloat(type, data + j * w.in * 2, size_t(w.in), scratch);
                        return static_cast<const float *>(scratch);
                      });
}

} // namespace

namespace {
// Calls `move(row-major index, tiled index)` for every word of the codes.
template <class F> void forEachTiledWord(int64_t out, int64_t in, int bits, F move) {
  const int64_t words = in * bits / 32, rowWords = 128 * bits / 32; // a row's, a tile step's
  for (int64_t j = 0; j < out; ++j)
    for (int64_t w = 0; w < words; ++w)
      move(size_t(j * words + w),
           size_t(((j / 16) * (in / 128) + w / rowWords) * 16 * rowWords + (j % 16) * rowWords +
                  w % rowWords));
}
} // namespace

std::vector<uint32_t> tileCodes(llvm::ArrayRef<uint32_t> rows, int64_t out, int64_t in,
                                int bits) {
  std::vector<uint32_t> tiles(rows.size());
  forEachTiledWord(out, in, bits, [&](size_t r, size_t t) { tiles[t] = rows[r]; });
  return tiles;
}

std::vector<uint32_t> untileCodes(llvm::ArrayRef<uint32_t> tiles, int64_t out, int64_t in,
                                  int bits) {
  std::vector<uint32_t> rows(tiles.size());
  forEachTiledWord(out, in, bits, [&](size_t r, size_t t) { rows[r] = tiles[t]; });
  return rows;
}

llvm::Expected<KernelWeightsFile>
writeKernelWeights(const Checkpoint &ck, llvm::ArrayRef<QuantizedWeightRef> weights,
                   llvm::StringRef path,
                   const std::function<void(uint64_t, uint64_t)> &progress) {
  const Quantization &q = ck.quant;
  for (const QuantizedWeightRef &w : weights)
    if (w.group <= 0 || w.in % w.group != 0 || (w.bits != 4 && w.bits != 8) ||
        (w.format == QuantFormat::E4M3 && (w.bits != 8 || w.group != w.in)))
      return makeOneLineError(w.name + ": " + std::to_string(w.bits) + "-bit codes in groups of " +
                              std::to_string(w.group) + " cannot hold " + std::to_string(w.in) +
                              " inputs");
    else if (w.tiled && !codesTileable(w.bits, w.format, w.out, w.in))
      return makeOneLineError(w.name + ": " + std::to_string(w.out) + " x " +
                              std::to_string(w.in) +
                              " codes cannot be stored in tiles of 16 rows and 128 inputs");
  std::vector<io::MappedFile> maps;
  for (const io::SafetensorsHeader &h : ck.files) {
    StatusOr<io::MappedFile> m = io::MappedFile::open(h.path);
    if (!m.isOk())
      return makeOneLineError(m.status().message());
    maps.push_back(std::move(m.value()));
  }
  // The header: every tensor's place is known from the shapes.
  llvm::json::Object header;
  uint64_t offset = 0;
  for (const QuantizedWeightRef &w : weights) {
    // Int: a 16-bit (scale, zero) pair per group; E4M3: an f32 per row.
    const bool e4m3 = w.format == QuantFormat::E4M3;
    const int64_t scaleColumns = e4m3 ? 1 : 2 * (w.in / w.group);
    const io::DType scaleType = e4m3 ? io::DType::F32 : scaleTypeOf(ck, w);
    uint64_t codeBytes = uint64_t(w.out) * uint64_t(w.in) * uint64_t(w.bits) / 8;
    uint64_t scaleBytes = uint64_t(w.out) * uint64_t(scaleColumns) * io::dtypeSize(scaleType);
    header[w.name + ".codes"] = llvm::json::Object{
        {"dtype", "I32"},
        {"shape", w.tiled ? llvm::json::Array{w.out / 16, 16 * w.in * w.bits / 32}
                          : llvm::json::Array{w.out, w.in * w.bits / 32}},
        {"data_offsets", llvm::json::Array{offset, offset + codeBytes}}};
    offset += codeBytes;
    header[w.name + ".scales"] = llvm::json::Object{
        {"dtype", io::dtypeName(scaleType)},
        {"shape", llvm::json::Array{w.out, scaleColumns}},
        {"data_offsets", llvm::json::Array{offset, offset + scaleBytes}}};
    offset += scaleBytes;
  }
  std::string json;
  llvm::raw_string_ostream(json) << llvm::json::Value(std::move(header));
  while (json.size() % 8)
    json += ' ';

  std::error_code ec;
  std::string tmp = (path + ".partial").str();
  llvm::raw_fd_ostream os(tmp, ec, llvm::sys::fs::OF_None);
  if (ec)
    return makeOneLineError(tmp + ": cannot write: " + ec.message());
  uint64_t headerSize = json.size();
  char size[8];
  for (int b = 0; b < 8; ++b)
    size[b] = char((headerSize >> (8 * b)) & 0xff);
  os.write(size, 8);
  os << json;
  uint64_t done = 0;
  for (const QuantizedWeightRef &w : weights) {
    // A quantized checkpoint's projections are repacked; what it keeps in
    // 16 bits (the LM head under --lm-head-dtype) is quantized here.
    llvm::Expected<KernelProjection> k = q.active() && q.quantizes(w.name)
                                             ? repackFromCheckpoint(ck, maps, w)
                                             : quantizeFromCheckpoint(ck, maps, w);
    if (!k) {
      os.close();
      llvm::sys::fs::remove(tmp);
      return k.takeError();
    }
    if (w.tiled)
      k->codes = tileCodes(k->codes, w.out, w.in, w.bits);
    os.write(reinterpret_cast<const char *>(k->codes.data()), k->codes.size() * 4);
    os.write(reinterpret_cast<const char *>(k->scales.data()), k->scales.size() * 2);
    os.write(reinterpret_cast<const char *>(k->rowScales.data()), k->rowScales.size() * 4);
    done += k->codes.size() * 4 + k->scales.size() * 2 + k->rowScales.size() * 4;
    if (progress)
      progress(done, offset);
  }
  os.close();
  if (os.has_error()) {
    std::string msg = os.error().message();
    os.clear_error();
    llvm::sys::fs::remove(tmp);
    return makeOneLineError(tmp + ": write failed: " + msg);
  }
  if (std::error_code rc = llvm::sys::fs::rename(tmp, path))
    return makeOneLineError((path + ": cannot move the written file into place: ").str() +
                            rc.message());
  KernelWeightsFile f;
  f.headerSize = headerSize;
  f.fileSize = 8 + headerSize + offset;
  f.headerFnv = plan::fnv1a64(json.data(), json.size());
  return f;
}

} // namespace weft
