#include "runtime/io/GgufQuants.h"

#include "runtime/io/Gguf.h"
#include "runtime/io/MappedFile.h"

#include <cstring>
#include <string>

namespace weft::io {

namespace {

float f16At(const uint8_t *p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return halfToFloat(bits);
}

// f32 products and sums, each rounded on its own: this file is compiled
// with -ffp-contract=off (runtime/io/CMakeLists.txt), so no product and
// sum become one fused multiply-add, which would round once.
inline float mul(float a, float b) { return a * b; }
inline float add(float a, float b) { return a + b; }
inline float sub(float a, float b) { return a - b; }

// Q4_0 and Q4_1 (32 values): the scale d (and the minimum m), then 16
// bytes: value j is the low nibble of byte j, value j + 16 its high nibble;
// Q4_0 stores q + 8.
void q4(const uint8_t *b, float *y, bool withMin) {
  const float d = f16At(b), m = withMin ? f16At(b + 2) : 0.0f;
  const uint8_t *qs = b + (withMin ? 4 : 2);
  for (int j = 0; j < 16; ++j) {
    int lo = qs[j] & 0xF, hi = qs[j] >> 4;
    if (withMin) {
      y[j] = add(mul(d, float(lo)), m);
      y[j + 16] = add(mul(d, float(hi)), m);
    } else {
      y[j] = mul(d, float(lo - 8));
      y[j + 16] = mul(d, float(hi - 8));
    }
  }
}

// Q5_0 and Q5_1: as Q4, plus a 32-bit word of fifth bits (bit j for value
// j, bit j + 16 for value j + 16); Q5_0 stores q + 16.
void q5(const uint8_t *b, float *y, bool withMin) {
  const float d = f16At(b), m = withMin ? f16At(b + 2) : 0.0f;
  const uint8_t *p = b + (withMin ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t *qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    int lo = (qs[j] & 0xF) | int(((qh >> j) & 1u) << 4);
    int hi = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
    if (withMin) {
      y[j] = add(mul(d, float(lo)), m);
      y[j + 16] = add(mul(d, float(hi)), m);
    } else {
      y[j] = mul(d, float(lo - 16));
      y[j + 16] = mul(d, float(hi - 16));
    }
  }
}

// Q8_0: d, then 32 signed bytes.
void q8(const uint8_t *b, float *y) {
  const float d = f16At(b);
  for (int j = 0; j < 32; ++j)
    y[j] = mul(d, float(int8_t(b[2 + j])));
}

// The 6-bit scale and minimum of sub-block j (0..7) of a Q4_K/Q5_K block's
// 12 scale bytes: sub-blocks 0-3 in the low six bits of bytes j and j + 4;
// 4-7 in the nibbles of bytes j + 4 with their top two bits in the top
// bits of bytes j - 4 and j.
void scaleMin(const uint8_t *s, int j, int &sc, int &mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K and Q5_K (256 values, 8 sub-blocks of 32): d, dmin, 12 scale bytes,
// (Q5_K: 32 bytes of fifth bits), 128 bytes of nibbles; each 64 values take
// 32 bytes: the low nibbles the first 32, the high nibbles the next 32.
void k4or5(const uint8_t *b, float *y, bool five) {
  const float d = f16At(b), dmin = f16At(b + 2);
  const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
  for (int c = 0; c < 4; ++c) {
    int sc0, m0, sc1, m1;
    scaleMin(scales, 2 * c, sc0, m0);
    scaleMin(scales, 2 * c + 1, sc1, m1);
    const float d0 = mul(d, float(sc0)), dm0 = mul(dmin, float(m0));
    const float d1 = mul(d, float(sc1)), dm1 = mul(dmin, float(m1));
    for (int l = 0; l < 32; ++l) {
      int lo = qs[l] & 0xF, hi = qs[l] >> 4;
      if (five) {
        lo += (qh[l] >> (2 * c)) & 1 ? 16 : 0;
        hi += (qh[l] >> (2 * c + 1)) & 1 ? 16 : 0;
      }
      y[64 * c + l] = sub(mul(d0, float(lo)), dm0);
      y[64 * c + 32 + l] = sub(mul(d1, float(hi)), dm1);
    }
    qs += 32;
  }
}

// Q6_K (256 values, 16 sub-blocks of 16): 128 bytes of low nibbles, 64 of
// high bit pairs, 16 signed scales, d; each 128 values take 64 low-nibble
// bytes and 32 high-bit bytes: value l + 32 i (i = 0..3) of a half has the
// low nibble of byte l (i even) or l + 32 (i odd), low or high nibble by
// i / 2, and bits 2i, 2i + 1 of its high byte l; q - 32.
void k6(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
  const float d = f16At(b + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      int q[4] = {(ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4),
                  (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
                  (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                  (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
      for (int i = 0; i < 4; ++i)
        y[l + 32 * i] = mul(mul(d, float(sc[is + 2 * i])), float(q[i] - 32));
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

} // namespace

Status dequantizeGgml(uint32_t type, const void *src, uint64_t blocks, float *dst) {
  std::optional<GgmlBlock> block = ggmlBlock(type);
  if (!block)
    return invalidArgument("ggml type " + std::to_string(type) + " has no known layout");
  const uint8_t *b = static_cast<const uint8_t *>(src);
  switch (GgmlType(type)) {
  case GgmlType::F32:
    return decodeToFloat(DType::F32, src, blocks, dst);
  case GgmlType::F16:
    return decodeToFloat(DType::F16, src, blocks, dst);
  case GgmlType::BF16:
    return decodeToFloat(DType::BF16, src, blocks, dst);
  case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
  case GgmlType::Q8_0: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    break;
  default:
    return invalidArgument(std::string("ggml type ") + std::string(*ggmlTypeName(type)) +
                           " cannot be dequantized here (supported: F32, F16, BF16, Q4_0, "
                           "Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)");
  }
  for (uint64_t i = 0; i < blocks; ++i, b += block->bytes, dst += block->elements) {
    switch (GgmlType(type)) {
    case GgmlType::Q4_0: q4(b, dst, false); break;
    case GgmlType::Q4_1: q4(b, dst, true); break;
    case GgmlType::Q5_0: q5(b, dst, false); break;
    case GgmlType::Q5_1: q5(b, dst, true); break;
    case GgmlType::Q8_0: q8(b, dst); break;
    case GgmlType::Q4_K: k4or5(b, dst, false); break;
    case GgmlType::Q5_K: k4or5(b, dst, true); break;
    case GgmlType::Q6_K: k6(b, dst); break;
    default:
      break; // refused above
    }
  }
  return Status::ok();
}

} // namespace weft::io
