// Does the stream kernel of layer_stream_lab.cu free batch-1 4-bit decode
// from the loop that loads codes into registers (persistent_lab.cu: 58-61
// us a layer in mma kernels against 35-38 for a plain read of the codes)?
// The four projections of Llama 3.1 8B layers at one token in 4-bit codes
// with a (scale, zero) pair per row and group of 128 inputs (QKV, O reading
// the first 4096 of QKV's outputs, gate/up with SwiGLU, down; no attention
// or norms), LAYERS layers with weights of their own, run as one persistent
// kernel: a producer lane per block copies chunks of rows (codes and their
// pairs, 30-34 KiB) of every projection of every layer into a ring of
// shared-memory stages by bulk copies, never waiting for an input; the
// consumer warps expand each 32-bit word of 8 codes as f16 pairs (a LOP3
// gives 1024 + code, a HSUB2 code - zero, exact), multiply them with their
// inputs by HFMA2 (8 products summed in f16, then f32 times the group's
// scale), and sum a stage's rows over the warp with one butterfly.
//
// A second kernel (stream4mmaT) takes the products to tensor cores: below.
//
// Codes in this lab: word w of a row holds inputs 8w .. 8w + 7, nibble t
// (bits 4t .. 4t + 3) input 8w + t; the pairs are [row][input / 128] as
// half2 (scale, zero). Every projection's outputs are checked against a
// plain f32 kernel on the same inputs. Printed: us per layer, TB/s of the
// bytes read (codes and pairs), and the plain reads of the same bytes.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I targets/CUDA/kernels \
//        test/gpu/lab/layer_stream_int4_lab.cu -o layer_stream_int4_lab && ./layer_stream_int4_lab
#include "lab.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

constexpr int HIDDEN = 4096, QKV = 6144, FFN = 14336, LAYERS = 8, PROJS = 4, GROUP = 128;

struct Proj {
  int K, nout, glu;
  const unsigned *c, *cu;   // codes [rows][K / 8]; SwiGLU's up rows
  const __half2 *z, *zu;    // (scale, zero) [rows][K / GROUP]
  const __half *x;
  __half *y;
  const unsigned char *tiles; // stream4mmaT: the chunks repacked (repackTiles)
  unsigned long long *llOut;  // FLAGGED: each output as (epoch << 32 | f16 bits)
  const unsigned long long *llIn; // FLAGGED: the input's, null for the first
};
struct Params {
  Proj proj[LAYERS * PROJS];
  unsigned *done; // [LAYERS * PROJS] finished blocks, zero at launch
  unsigned *doneW; // [LAYERS * PROJS][CW] finished warps (WARP_RELEASE), zero at launch
  unsigned long long *stamps; // stream4mmaT's timeline of layer STAMP_LAYER, or null
  unsigned epoch;             // FLAGGED: this launch's flag, new each launch
};

// stream4mmaT's timeline of one layer (global timer, ns), per block and
// projection: input ready, input staged, first chunk landed, chunks done,
// outputs written.
constexpr int STAMP_LAYER = 4, STAMP_EVENTS = 5, STAMPS = PROJS * STAMP_EVENTS;
__device__ __forceinline__ void stamp(const Params &P, int q, int event) {
  if (P.stamps && q / PROJS == STAMP_LAYER && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    P.stamps[((q % PROJS) * STAMP_EVENTS + event) * gridDim.x + blockIdx.x] = t;
  }
}

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

constexpr int CW = 8, STHREADS = (CW + 1) * 32;
constexpr int STAGE_BYTES = 36 * 1024, MAX_ROWS = 320;
// Outputs per stage: 16 rows of K 4096, 8 SwiGLU outputs, 4 rows of K 14336.
__host__ __device__ constexpr int outsPerStage(int K, bool glu) {
  return K > 4096 ? 4 : glu ? 8 : 16;
}
__host__ __device__ constexpr int codeBytes(int K) { return K / 2; }
__host__ __device__ constexpr int pairBytes(int K) { return K / GROUP * 4; }

__device__ __forceinline__ void consumerBarrier() {
  asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
}
__device__ __forceinline__ void waitCount(const unsigned *c, unsigned n) {
  while (loadAcquire(c) < n)
    __nanosleep(32);
}

// R values per lane summed over the warp by one butterfly: lane L ends with
// the sum of row L / (32 / R) (R - 1 + log2(32 / R) shuffles, not 5 R).
template <int R> __device__ __forceinline__ float reduceRows(float (&v)[R], int lane) {
#pragma unroll
  for (int n = R, o = 16; n > 1; n >>= 1, o >>= 1) {
    const bool up = lane & o;
#pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float send = up ? v[i] : v[i + n / 2], keep = up ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
  float s = v[0];
#pragma unroll
  for (int o = 16 / R; o > 0; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// One word of 8 codes times its inputs (pairs (t, t + 4) in xh), with the
// group's (scale, zero): scale * sum (code - zero) * x.
__device__ __forceinline__ float dotWord(unsigned word, __half2 sz, const __half2 *xh) {
  const __half2 bias = __hadd2(__half2half2(__high2half(sz)), __float2half2_rn(1024.f));
  __half2 acc = __float2half2_rn(0.f);
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const unsigned u = ((word >> (4 * t)) & 0x000F000Fu) | 0x64006400u;
    acc = __hfma2(__hsub2(*reinterpret_cast<const __half2 *>(&u), bias), xh[t], acc);
  }
  return __low2float(sz) * (__low2float(acc) + __high2float(acc));
}

struct Ring {
  unsigned char *stage;
  unsigned long long *full, *empty;
};
// The ring at the start of shared memory, its barriers `gap` bytes past the
// stages, initialized; returns where the room after the barriers starts.
template <int STAGES>
__device__ __forceinline__ unsigned char *makeRing(unsigned char *smem, size_t gap, Ring &r) {
  r.stage = smem;
  r.full = reinterpret_cast<unsigned long long *>(smem + STAGES * STAGE_BYTES + gap);
  r.empty = r.full + STAGES;
  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(&r.full[s], 1);
      mbarInit(&r.empty[s], CW);
    }
  __syncthreads();
  return reinterpret_cast<unsigned char *>(r.empty + STAGES);
}
// The consumers' wait for projection q's input, and their count once its
// outputs are written.
__device__ __forceinline__ void waitInput(const Params &P, int q) {
  if (q > 0) {
    if (threadIdx.x == 0)
      waitCount(&P.done[q - 1], gridDim.x);
    consumerBarrier();
  }
}
__device__ __forceinline__ void outputsWritten(const Params &P, int q) {
  consumerBarrier();
  if (threadIdx.x == 0)
    addRelease(&P.done[q]);
}

template <int K, bool GLU, int STAGES>
__device__ __forceinline__ void consume(const Params &P, int q, int &it, const Ring &r,
                                        float (*part)[CW]) {
  constexpr int VPW = K / (CW * 256), OPS = outsPerStage(K, GLU), RPO = GLU ? 2 : 1;
  constexpr int R = OPS * RPO, WORDS = K / 8;
  static_assert(K % (CW * 256) == 0 && R <= 32, "whole words per lane");
  const Proj &p = P.proj[q];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  waitInput(P, q);
  // This lane's words: w * WORDS / CW + lane + 32 j; their inputs as pairs.
  const int word0 = w * (WORDS / CW) + lane;
  __half2 xh[VPW * 4];
#pragma unroll
  for (int j = 0; j < VPW; ++j) {
    const uint4 v = __ldcg(reinterpret_cast<const uint4 *>(p.x + 8 * (word0 + 32 * j)));
    const __half *h = reinterpret_cast<const __half *>(&v);
#pragma unroll
    for (int t = 0; t < 4; ++t)
      xh[4 * j + t] = __halves2half2(h[t], h[t + 4]);
  }
  const int total = (p.nout + OPS - 1) / OPS;
  const int c0 = (int)((long long)total * blockIdx.x / gridDim.x);
  const int c1 = (int)((long long)total * (blockIdx.x + 1) / gridDim.x);
  for (int c = c0; c < c1; ++c, ++it) {
    const int s = it % STAGES, n = min(OPS, p.nout - c * OPS);
    mbarWait(&r.full[s], (it / STAGES) & 1);
    const unsigned char *st = r.stage + (size_t)s * STAGE_BYTES;
    const unsigned *codes = reinterpret_cast<const unsigned *>(st);
    const __half2 *pairs = reinterpret_cast<const __half2 *>(st + R * codeBytes(K));
    float v[R];
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      float a = 0.f;
      if (rr % OPS < n) {
#pragma unroll
        for (int j = 0; j < VPW; ++j) {
          const int word = word0 + 32 * j;
          a += dotWord(codes[rr * WORDS + word], pairs[rr * (K / GROUP) + word / 16],
                       xh + 4 * j);
        }
      }
      v[rr] = a;
    }
    const float sum = reduceRows<R>(v, lane);
    const int row = lane / (32 / R); // rows: outputs 0..OPS-1, then their up rows
    if (lane % (32 / R) == 0)
      part[((c - c0) * OPS + row % OPS) * RPO + row / OPS][w] = sum;
    __syncwarp();
    if (lane == 0)
      mbarArrive(&r.empty[s]);
  }
  consumerBarrier();
  const int o0 = c0 * OPS, o1 = min(c1 * OPS, p.nout);
  for (int t = threadIdx.x; t < o1 - o0; t += CW * 32) {
    float a = 0.f, b = 0.f;
#pragma unroll
    for (int v2 = 0; v2 < CW; ++v2) {
      a += part[t * RPO][v2];
      if constexpr (GLU)
        b += part[t * RPO + 1][v2];
    }
    p.y[o0 + t] = __float2half(GLU ? silu(a) * b : a);
  }
  outputsWritten(P, q);
}

template <int STAGES>
__global__ void __launch_bounds__(STHREADS, 1) stream4(const __grid_constant__ Params P) {
  extern __shared__ __align__(128) unsigned char smem[];
  Ring r;
  float(*part)[CW] = reinterpret_cast<float(*)[CW]>(makeRing<STAGES>(smem, 0, r));
  int it = 0;
  if (threadIdx.x >= CW * 32) {
    if (threadIdx.x != CW * 32)
      return;
    for (int q = 0; q < LAYERS * PROJS; ++q) {
      const Proj &p = P.proj[q];
      const int ops = outsPerStage(p.K, p.glu), total = (p.nout + ops - 1) / ops;
      const int c0 = (int)((long long)total * blockIdx.x / gridDim.x);
      const int c1 = (int)((long long)total * (blockIdx.x + 1) / gridDim.x);
      const int R = ops * (p.glu ? 2 : 1), cb = codeBytes(p.K), pb = pairBytes(p.K);
      for (int c = c0; c < c1; ++c, ++it) {
        const int s = it % STAGES, o = c * ops, n = min(ops, p.nout - o);
        mbarWait(&r.empty[s], ((it / STAGES) & 1) ^ 1);
        mbarExpectTx(&r.full[s], (unsigned)n * (cb + pb) * (p.glu ? 2 : 1));
        unsigned char *dst = r.stage + (size_t)s * STAGE_BYTES;
        bulkCopy(dst, p.c + (size_t)o * (p.K / 8), n * cb, &r.full[s]);
        bulkCopy(dst + R * cb, p.z + (size_t)o * (p.K / GROUP), n * pb, &r.full[s]);
        if (p.glu) {
          bulkCopy(dst + ops * cb, p.cu + (size_t)o * (p.K / 8), n * cb, &r.full[s]);
          bulkCopy(dst + R * cb + ops * pb, p.zu + (size_t)o * (p.K / GROUP), n * pb, &r.full[s]);
        }
      }
    }
    return;
  }
  for (int q = 0; q < LAYERS * PROJS; ++q) {
    switch (q % PROJS) {
    case 0: consume<HIDDEN, false, STAGES>(P, q, it, r, part); break;
    case 1: consume<HIDDEN, false, STAGES>(P, q, it, r, part); break;
    case 2: consume<HIDDEN, true, STAGES>(P, q, it, r, part); break;
    default: consume<FFN, false, STAGES>(P, q, it, r, part); break;
    }
  }
}

// ---- The same stream with the products on tensor cores (stream4mmaT) ----
//
// A chunk is a tile of 16 rows (8 SwiGLU outputs: their gate rows, then
// their up rows) over K / KP inputs (KP = 1 for K 4096, 7 for K 14336;
// a block takes whole tiles, so each output's sum is its own). Warp w
// takes inputs [w, w + 1) * K / KP / CW of the tile; lane (g, q) reads
// word W = 4 s + q of rows g and g + 8 and expands it to four f16 pairs
// (code - zero, exact) as mma.m16n8k16's A for two k16 steps. The order of
// k is free in a dot product, so the token's B fragment (column 0: lanes
// with g = 0) holds the same inputs: (8W + t, 8W + t + 4) for pair t, read
// from the projection's input staged in shared memory in that order. A
// group's (128 inputs) sums are scaled once by its scale (sums of exact
// (code - zero) products, as SUM_SCALE in weft/gemv.cuh).
//
// Run 2's version copied each of a chunk's 16 rows (and its row of pairs)
// by its own bulk copy, 32 copies a stage, into padded rows: 112 us a
// layer, held by the copies (removed after run 6; in git history at
// 986d935). Here the codes are repacked once (as a compiler or loader
// would) so that a chunk (tile, kp) is one contiguous run: its 16 rows of
// KS / 8 words, word j of row r at j ^ ((r & 7) << 2) (an XOR swizzle:
// lane (g, q) reads words 4 s + q of rows g and g + 8, 32 banks apart
// without padding), then its 16 rows of KS / GROUP (scale, zero) pairs.
// The consumer expands a word in 9 instructions (odd nibbles masked in
// place as 1024 + 16 code and scaled by 1/16 in the same HFMA2 that
// subtracts the zero), keeps one mma chain per group (the groups' chains
// independent), and scales each group's sum once.
constexpr int TILE = 16;
__host__ __device__ constexpr int kParts(int K) { return K > 4096 ? 7 : 1; } // K / KP: groups of 1024
__host__ __device__ constexpr int tileOuts(bool glu) { return glu ? TILE / 2 : TILE; }
constexpr int MMA_X_BYTES = FFN / 8 * 16; // the staged input: a uint4 per word
constexpr int MMA_PART_FLOATS = 256 * CW; // [rows][KP * CW]

__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__host__ __device__ constexpr int chunkCodeBytes(int K) { return TILE * (K / kParts(K)) / 2; }
__host__ __device__ constexpr int chunkBytes(int K) {
  return chunkCodeBytes(K) + TILE * (K / kParts(K)) / GROUP * 4;
}

__global__ void repackTiles(Proj p, unsigned char *dst) {
  const int KP = kParts(p.K), KS = p.K / KP, WORDS = KS / 8, GROUPS = KS / GROUP;
  const int outs = p.glu ? TILE / 2 : TILE, tiles = p.nout / outs;
  const size_t cb = (size_t)TILE * KS / 2, chunk = cb + (size_t)TILE * GROUPS * 4;
  const size_t total = (size_t)tiles * KP * TILE * (WORDS + GROUPS);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    const size_t c = i / (TILE * (WORDS + GROUPS));
    const int rem = (int)(i % (TILE * (WORDS + GROUPS)));
    const int tile = (int)(c / KP), kp = (int)(c % KP);
    unsigned char *base = dst + c * chunk;
    if (rem < TILE * WORDS) {
      const int r = rem / WORDS, j = rem % WORDS;
      const bool up = p.glu && r >= TILE / 2;
      const int o = tile * outs + (up ? r - TILE / 2 : r);
      const unsigned *src = up ? p.cu : p.c;
      reinterpret_cast<unsigned *>(base)[r * WORDS + (j ^ ((r & 7) << 2))] =
          src[(size_t)o * (p.K / 8) + kp * WORDS + j];
    } else {
      const int r = (rem - TILE * WORDS) / GROUPS, gi = (rem - TILE * WORDS) % GROUPS;
      const bool up = p.glu && r >= TILE / 2;
      const int o = tile * outs + (up ? r - TILE / 2 : r);
      const __half2 *src = up ? p.zu : p.z;
      reinterpret_cast<__half2 *>(base + cb)[r * GROUPS + gi] =
          src[(size_t)o * (p.K / GROUP) + kp * GROUPS + gi];
    }
  }
}

// A word's four pairs (t, t + 4) as (code - zero), exact: t = 0, 2 from the
// low nibbles (1024 + code), t = 1, 3 from the high ones in place (1024 +
// 16 code, times 1/16 = 64 + code).
__device__ __forceinline__ void expand9(unsigned word, __half2 bias, __half2 bias16,
                                        unsigned (&h)[4]) {
  const __half2 s16 = __float2half2_rn(1.f / 16.f);
  const unsigned hi = word >> 8;
  unsigned u[4] = {(word & 0x000F000Fu) | 0x64006400u, (word & 0x00F000F0u) | 0x64006400u,
                   (hi & 0x000F000Fu) | 0x64006400u, (hi & 0x00F000F0u) | 0x64006400u};
  __half2 d[4];
  d[0] = __hsub2(*reinterpret_cast<const __half2 *>(&u[0]), bias);
  d[1] = __hfma2(*reinterpret_cast<const __half2 *>(&u[1]), s16, bias16);
  d[2] = __hsub2(*reinterpret_cast<const __half2 *>(&u[2]), bias);
  d[3] = __hfma2(*reinterpret_cast<const __half2 *>(&u[3]), s16, bias16);
#pragma unroll
  for (int t = 0; t < 4; ++t)
    h[t] = *reinterpret_cast<const unsigned *>(&d[t]);
}

// RELAXED (timing only, no ordering): the finished-block count by a relaxed
// add, without the release that orders the block's outputs before it.
__device__ __forceinline__ void outputsWrittenRelaxed(const Params &P, int q) {
  consumerBarrier();
  if (threadIdx.x == 0)
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(&P.done[q]) : "memory");
}

// How a block says its outputs are written: thread 0's release after a
// barrier (as the library), a relaxed add (timing only: no ordering), or
// each warp's lane 0 releasing the warp's own outputs into its own count.
// FLAGGED: no counts, no fences: each output is stored with its flag in
// one 8-byte store (the launch's epoch beside the value), and readers poll
// the values themselves until every flag is this launch's.
enum { BLOCK_RELEASE = 0, RELAXED_ADD = 1, WARP_RELEASE = 2, FLAGGED = 3 };

template <int K, bool GLU, int STAGES, bool MATH, int REL = BLOCK_RELEASE>
__device__ __forceinline__ void consumeMmaT(const Params &P, int q, int &it, const Ring &r,
                                            float *part, uint4 *xs) {
  constexpr int KP = kParts(K), KS = K / KP, WORDS = KS / 8, WPW = WORDS / CW;
  constexpr int OUTS = tileOuts(GLU), GROUPS = KS / GROUP, NG = WPW / 16;
  static_assert(WPW % 16 == 0, "whole groups per warp");
  const Proj &p = P.proj[q];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, qd = lane & 3;
  if constexpr (REL == WARP_RELEASE) {
    if (q > 0) {
      if (threadIdx.x == 0)
        for (int v = 0; v < CW; ++v)
          waitCount(&P.doneW[(q - 1) * CW + v], gridDim.x);
      consumerBarrier();
    }
  } else if constexpr (REL != FLAGGED) {
    waitInput(P, q);
  }
  stamp(P, q, 0);
  for (int wd = threadIdx.x; wd < K / 8; wd += CW * 32) {
    uint4 v;
    if (REL == FLAGGED && p.llIn != nullptr) {
      // Poll the 8 flagged inputs (four 16-byte loads) until all are this
      // launch's.
      unsigned long long e[8];
      bool ready;
      do {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                       : "=l"(e[2 * k]), "=l"(e[2 * k + 1])
                       : "l"(p.llIn + 8 * wd + 2 * k));
        ready = true;
#pragma unroll
        for (int k = 0; k < 8; ++k)
          ready &= (unsigned)(e[k] >> 32) == P.epoch;
      } while (!ready);
      unsigned short hv[8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        hv[k] = (unsigned short)(e[k] & 0xffffu);
      v = *reinterpret_cast<const uint4 *>(hv);
    } else {
      v = __ldcg(reinterpret_cast<const uint4 *>(p.x + 8 * wd));
    }
    const __half *h = reinterpret_cast<const __half *>(&v);
    __half2 pr[4];
#pragma unroll
    for (int t = 0; t < 4; ++t)
      pr[t] = __halves2half2(h[t], h[t + 4]);
    xs[wd] = *reinterpret_cast<const uint4 *>(pr);
  }
  consumerBarrier();
  stamp(P, q, 1);
  const int tiles = p.nout / OUTS;
  const int tile0 = (int)((long long)tiles * blockIdx.x / gridDim.x);
  const int t1 = (int)((long long)tiles * (blockIdx.x + 1) / gridDim.x);
  const int c0 = tile0 * KP, c1 = t1 * KP;
  const int swz = g << 2;
  for (int c = c0; c < c1; ++c, ++it) {
    const int s = it % STAGES, tile = c / KP, kp = c % KP;
    mbarWait(&r.full[s], (it / STAGES) & 1);
    if (c == c0)
      stamp(P, q, 2);
    const unsigned char *st = r.stage + (size_t)s * STAGE_BYTES;
    const unsigned *rowG = reinterpret_cast<const unsigned *>(st) + g * WORDS;
    const unsigned *rowG8 = rowG + 8 * WORDS;
    const __half2 *pairs = reinterpret_cast<const __half2 *>(st + chunkCodeBytes(K));
    const uint4 *xk = xs + kp * WORDS;
    float d[NG][4];
    __half2 zG[NG], zG8[NG], bG[NG], bG8[NG], b16G[NG], b16G8[NG];
#pragma unroll
    for (int grp = 0; grp < NG; ++grp) {
      const int gi = (w * WPW) / 16 + grp;
      zG[grp] = pairs[g * GROUPS + gi];
      zG8[grp] = pairs[(g + 8) * GROUPS + gi];
      // Biases: 1024 + zero for the low nibbles, -64 - zero for the high.
      const __half2 h1024 = __float2half2_rn(1024.f), h64 = __float2half2_rn(-64.f);
      const __half2 zg = __half2half2(__high2half(zG[grp])), zg8 = __half2half2(__high2half(zG8[grp]));
      bG[grp] = __hadd2(zg, h1024), bG8[grp] = __hadd2(zg8, h1024);
      b16G[grp] = __hsub2(h64, zg), b16G8[grp] = __hsub2(h64, zg8);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        d[grp][e] = 0.f;
    }
#pragma unroll
    for (int st4 = 0; st4 < (MATH ? 4 : 0); ++st4) {
#pragma unroll
      for (int grp = 0; grp < NG; ++grp) { // NG independent mma chains
        const int word = w * WPW + grp * 16 + 4 * st4 + qd;
        unsigned hg[4], hg8[4];
        expand9(rowG[word ^ swz], bG[grp], b16G[grp], hg);
        expand9(rowG8[word ^ swz], bG8[grp], b16G8[grp], hg8);
        uint4 xb = make_uint4(0u, 0u, 0u, 0u);
        if (g == 0)
          xb = xk[word];
        const unsigned a0[4] = {hg[0], hg8[0], hg[1], hg8[1]};
        const unsigned a1[4] = {hg[2], hg8[2], hg[3], hg8[3]};
        mma16816(d[grp], a0, xb.x, xb.y);
        mma16816(d[grp], a1, xb.z, xb.w);
      }
    }
    float totG = 0.f, totG8 = 0.f;
#pragma unroll
    for (int grp = 0; grp < NG; ++grp) {
      totG = fmaf(__low2float(zG[grp]), d[grp][0], totG);
      totG8 = fmaf(__low2float(zG8[grp]), d[grp][2], totG8);
    }
    if (qd == 0) {
      const int base = (tile - tile0) * TILE;
      part[(base + g) * (KP * CW) + kp * CW + w] = totG;
      part[(base + g + 8) * (KP * CW) + kp * CW + w] = totG8;
    }
    __syncwarp();
    if (lane == 0)
      mbarArrive(&r.empty[s]);
  }
  stamp(P, q, 3);
  consumerBarrier();
  const int o0 = tile0 * OUTS, o1 = min(t1 * OUTS, p.nout);
  for (int t = threadIdx.x; t < o1 - o0; t += CW * 32) {
    const int tile = t / OUTS, i = t % OUTS;
    const int rowA = tile * TILE + i, rowB = rowA + (GLU ? TILE / 2 : 0);
    float a = 0.f, b = 0.f;
    for (int v = 0; v < KP * CW; ++v) {
      a += part[rowA * (KP * CW) + v];
      if constexpr (GLU)
        b += part[rowB * (KP * CW) + v];
    }
    const __half out = __float2half(GLU ? silu(a) * b : a);
    p.y[o0 + t] = out;
    if constexpr (REL == FLAGGED)
      asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p.llOut + o0 + t),
                   "l"((unsigned long long)P.epoch << 32 | __half_as_ushort(out))
                   : "memory");
  }
  if constexpr (REL == FLAGGED) {
  } else if constexpr (REL == RELAXED_ADD) {
    outputsWrittenRelaxed(P, q);
  } else if constexpr (REL == WARP_RELEASE) {
    __syncwarp();
    if (lane == 0)
      addRelease(&P.doneW[q * CW + w]);
  } else {
    outputsWritten(P, q);
  }
  stamp(P, q, 4);
}

// MATH false: the same copies, waits and sums without the products (what
// the copies and the projections' boundaries cost alone; wrong sums).
template <int STAGES, bool MATH = true, int REL = BLOCK_RELEASE>
__global__ void __launch_bounds__(STHREADS, 1) stream4mmaT(const __grid_constant__ Params P) {
  extern __shared__ __align__(128) unsigned char smem[];
  Ring r;
  float *part = reinterpret_cast<float *>(makeRing<STAGES>(smem, MMA_X_BYTES, r));
  uint4 *xs = reinterpret_cast<uint4 *>(smem + STAGES * STAGE_BYTES);
  int it = 0;
  if (threadIdx.x >= CW * 32) {
    if (threadIdx.x != CW * 32)
      return;
    for (int q = 0; q < LAYERS * PROJS; ++q) {
      const Proj &p = P.proj[q];
      const int KP = kParts(p.K), outs = tileOuts(p.glu), tiles = p.nout / outs;
      const int c0 = (int)((long long)tiles * blockIdx.x / gridDim.x) * KP;
      const int c1 = (int)((long long)tiles * (blockIdx.x + 1) / gridDim.x) * KP;
      const unsigned bytes = (unsigned)chunkBytes(p.K);
      for (int c = c0; c < c1; ++c, ++it) {
        const int s = it % STAGES;
        mbarWait(&r.empty[s], ((it / STAGES) & 1) ^ 1);
        mbarExpectTx(&r.full[s], bytes);
        bulkCopy(r.stage + (size_t)s * STAGE_BYTES, p.tiles + (size_t)c * bytes, bytes, &r.full[s]);
      }
    }
    return;
  }
  for (int q = 0; q < LAYERS * PROJS; ++q) {
    switch (q % PROJS) {
    case 0: consumeMmaT<HIDDEN, false, STAGES, MATH, REL>(P, q, it, r, part, xs); break;
    case 1: consumeMmaT<HIDDEN, false, STAGES, MATH, REL>(P, q, it, r, part, xs); break;
    case 2: consumeMmaT<HIDDEN, true, STAGES, MATH, REL>(P, q, it, r, part, xs); break;
    default: consumeMmaT<FFN, false, STAGES, MATH, REL>(P, q, it, r, part, xs); break;
    }
  }
}

// The reference: a warp per output, f32 from the same codes.
__global__ void reference(Proj p, float *out) {
  const int o = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (o >= p.nout)
    return;
  float a = 0.f, b = 0.f;
  for (int k = lane; k < p.K; k += 32) {
    const float x = __half2float(p.x[k]);
    auto weight = [&](const unsigned *c, const __half2 *z) {
      const unsigned code = (c[(size_t)o * (p.K / 8) + k / 8] >> (4 * (k % 8))) & 15u;
      const __half2 sz = z[(size_t)o * (p.K / GROUP) + k / GROUP];
      return __low2float(sz) * ((float)code - __high2float(sz));
    };
    a += weight(p.c, p.z) * x;
    if (p.glu)
      b += weight(p.cu, p.zu) * x;
  }
  a = warpSum(a);
  b = warpSum(b);
  if (lane == 0)
    out[o] = p.glu ? silu(a) * b : a;
}

__global__ void fillWords(unsigned *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    p[i] = h;
  }
}
// (scale, zero): scale in [0.5, 1.5] * base, zero an integer in [0, 15].
__global__ void fillPairs(__half2 *p, size_t n, unsigned seed, float base) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __floats2half2_rn(base * (0.5f + (h & 0xffff) / 65536.f), (float)((h >> 16) & 15));
  }
}
__global__ void fillHalves(__half *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2half((h & 0xffffff) / 8388608.0f - 1.0f);
  }
}

int main() {
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // Rows and inputs of the four projections (gate/up: gate rows, then up).
  const int rows[PROJS] = {QKV, HIDDEN, 2 * FFN, HIDDEN}, ks[PROJS] = {HIDDEN, HIDDEN, HIDDEN, FFN};
  size_t words = 0, pairs = 0;
  for (int i = 0; i < PROJS; ++i)
    words += (size_t)rows[i] * ks[i] / 8, pairs += (size_t)rows[i] * ks[i] / GROUP;
  unsigned *codes;
  __half2 *sz;
  CHECK(cudaMalloc(&codes, words * LAYERS * 4));
  CHECK(cudaMalloc(&sz, pairs * LAYERS * 4));
  fillWords<<<4 * sms, 256, 0, st>>>(codes, words * LAYERS, 7u);
  // Outputs of about the inputs' size: a var(code - zero) of about 42.
  fillPairs<<<4 * sms, 256, 0, st>>>(sz, pairs * LAYERS, 9u, 1.0f / std::sqrt(42.f * HIDDEN));
  const double layerBytes = (words + pairs) * 4.0;
  std::printf("one H200: %d SMs; %d layers of %.1f MB of 4-bit codes and (scale, zero) pairs\n",
              sms, LAYERS, layerBytes / 1e6);

  const size_t actPerLayer = QKV + HIDDEN + FFN + HIDDEN;
  __half *act;
  CHECK(cudaMalloc(&act, (HIDDEN + actPerLayer * LAYERS) * sizeof(__half)));
  fillHalves<<<16, 256, 0, st>>>(act, HIDDEN, 11u);
  Params P{};
  {
    const unsigned *c = codes;
    const __half2 *z = sz;
    const __half *x = act;
    __half *y = act + HIDDEN;
    for (int l = 0; l < LAYERS; ++l) {
      Proj *p = &P.proj[l * PROJS];
      p[0] = {HIDDEN, QKV, 0, c, nullptr, z, nullptr, x, y};
      c += (size_t)QKV * HIDDEN / 8, z += (size_t)QKV * HIDDEN / GROUP;
      p[1] = {HIDDEN, HIDDEN, 0, c, nullptr, z, nullptr, y, y + QKV}; // O reads Q
      c += (size_t)HIDDEN * HIDDEN / 8, z += (size_t)HIDDEN * HIDDEN / GROUP;
      p[2] = {HIDDEN, FFN, 1, c, c + (size_t)FFN * HIDDEN / 8, z, z + (size_t)FFN * HIDDEN / GROUP,
              y + QKV, y + QKV + HIDDEN};
      c += (size_t)2 * FFN * HIDDEN / 8, z += (size_t)2 * FFN * HIDDEN / GROUP;
      p[3] = {FFN, HIDDEN, 0, c, nullptr, z, nullptr, y + QKV + HIDDEN, y + QKV + HIDDEN + FFN};
      c += (size_t)HIDDEN * FFN / 8, z += (size_t)HIDDEN * FFN / GROUP;
      x = y + QKV + HIDDEN + FFN;
      y += actPerLayer;
    }
  }
  CHECK(cudaMalloc(&P.done, LAYERS * PROJS * sizeof(unsigned)));
  CHECK(cudaMalloc(&P.doneW, LAYERS * PROJS * CW * sizeof(unsigned)));
  const int reps = 20;
  auto report = [&](const char *what, float ms) {
    const double us = ms * 1e3 / LAYERS;
    std::printf("| %-58s | %6.1f | %5.2f |\n", what, us, layerBytes / (us * 1e-6) / 1e12);
  };
  std::printf("\n| one layer's 4-bit projections, one token | us | TB/s |\n|---|---|---|\n");
  // Every projection against the reference on the same inputs (the last
  // run's outputs).
  float *ref;
  CHECK(cudaMalloc(&ref, FFN * sizeof(float)));
  std::vector<std::string> checks;
  auto check = [&](const char *what) {
    CHECK(cudaStreamSynchronize(st));
    double worst = 0, maxAbs = 0;
    for (int q = 0; q < LAYERS * PROJS; ++q) {
      const Proj &p = P.proj[q];
      reference<<<(p.nout + 7) / 8, 256, 0, st>>>(p, ref);
      CHECK(cudaStreamSynchronize(st)); // cudaMemcpy's stream does not wait for st
      std::vector<float> r(p.nout);
      std::vector<__half> g(p.nout);
      CHECK(cudaMemcpy(r.data(), ref, p.nout * 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(g.data(), p.y, p.nout * 2, cudaMemcpyDeviceToHost));
      double qmax = 0, qdiff = 0;
      for (int i = 0; i < p.nout; ++i) {
        qmax = std::max(qmax, (double)std::fabs(r[i]));
        qdiff = std::max(qdiff, (double)std::fabs(r[i] - __half2float(g[i])));
      }
      worst = std::max(worst, qdiff / std::max(qmax, 1e-6));
      maxAbs = std::max(maxAbs, qmax);
    }
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s vs f32 reference, every projection: worst max |difference| / max |value| "
                  "%.3g, largest |value| %.3g (%s)",
                  what, worst, maxAbs, worst < 1e-2 ? "ok" : "DIFFER");
    checks.push_back(line);
  };
  auto stream = [&](auto kernel, size_t smem, const char *what) {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int perSm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, STHREADS, smem));
    if (perSm < 1) {
      std::printf("| %-58s | does not fit |\n", what);
      return;
    }
    void *args[] = {(void *)&P};
    report(what, timeMs(st, reps, [&] {
             ++P.epoch;
             CHECK(cudaMemsetAsync(P.done, 0, LAYERS * PROJS * sizeof(unsigned), st));
             CHECK(cudaMemsetAsync(P.doneW, 0, LAYERS * PROJS * CW * sizeof(unsigned), st));
             CHECK(cudaLaunchCooperativeKernel((void *)kernel, sms, STHREADS, args, smem, st));
           }));
  };
  auto dotSmem = [](int stages) {
    return (size_t)stages * STAGE_BYTES + 2 * stages * 8 + MAX_ROWS * CW * 4;
  };
  auto mmaSmem = [](int stages) {
    return (size_t)stages * STAGE_BYTES + MMA_X_BYTES + 2 * stages * 8 + MMA_PART_FLOATS * 4;
  };
  stream(stream4<4>, dotSmem(4), "stream kernel, HFMA2, 4 stages of 36 KiB");
  stream(stream4<5>, dotSmem(5), "stream kernel, HFMA2, 5 stages of 36 KiB");
  check("stream kernel, HFMA2");
  // The chunks repacked once (timed apart: a compiler or loader's work).
  unsigned char *tiled;
  CHECK(cudaMalloc(&tiled, (size_t)layerBytes * LAYERS));
  {
    unsigned char *t = tiled;
    for (int q = 0; q < LAYERS * PROJS; ++q) {
      Proj &p = P.proj[q];
      p.tiles = t;
      repackTiles<<<4 * sms, 256, 0, st>>>(p, t);
      CHECK(cudaGetLastError());
      const int KP = kParts(p.K), tiles = p.nout / tileOuts(p.glu);
      t += (size_t)tiles * KP * chunkBytes(p.K);
    }
    CHECK(cudaStreamSynchronize(st));
  }
  {
    size_t outs = 0;
    for (int q = 0; q < LAYERS * PROJS; ++q)
      outs += P.proj[q].nout;
    unsigned long long *ll;
    CHECK(cudaMalloc(&ll, outs * 8));
    CHECK(cudaMemset(ll, 0, outs * 8));
    for (int q = 0; q < LAYERS * PROJS; ++q) {
      P.proj[q].llOut = ll, ll += P.proj[q].nout;
      P.proj[q].llIn = nullptr;
      for (int k = 0; k < q; ++k) // the input is an earlier projection's output (O: Q's)
        if (P.proj[k].y == P.proj[q].x)
          P.proj[q].llIn = P.proj[k].llOut;
    }
  }
  stream(stream4mmaT<4>, mmaSmem(4), "stream kernel, mma, one copy a chunk, 4 stages");
  stream(stream4mmaT<5>, mmaSmem(5), "stream kernel, mma, one copy a chunk, 5 stages");
  check("stream kernel, mma, one copy a chunk");
  stream(stream4mmaT<4, false>, mmaSmem(4),
         "same, copies and boundaries only (no products: timing only)");
  // One more launch of each with the timeline of layer STAMP_LAYER.
  std::vector<std::string> timelines;
  auto timeline = [&](auto kernel, size_t smem, const char *what) {
    unsigned long long *stamps;
    CHECK(cudaMalloc(&stamps, (size_t)STAMPS * sms * 8));
    CHECK(cudaMemsetAsync(stamps, 0, (size_t)STAMPS * sms * 8, st));
    CHECK(cudaMemsetAsync(P.done, 0, LAYERS * PROJS * sizeof(unsigned), st));
    CHECK(cudaMemsetAsync(P.doneW, 0, LAYERS * PROJS * CW * sizeof(unsigned), st));
    P.stamps = stamps;
    ++P.epoch;
    void *args[] = {(void *)&P};
    CHECK(cudaLaunchCooperativeKernel((void *)kernel, sms, STHREADS, args, smem, st));
    CHECK(cudaStreamSynchronize(st));
    P.stamps = nullptr;
    std::vector<unsigned long long> t((size_t)STAMPS * sms);
    CHECK(cudaMemcpy(t.data(), stamps, t.size() * 8, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(stamps));
    unsigned long long t0 = ~0ull;
    for (int b = 0; b < sms; ++b)
      t0 = std::min(t0, t[b]);
    static const char *proj[PROJS] = {"QKV", "O", "gate/up", "down"};
    static const char *ev[STAMP_EVENTS] = {"input ready", "input staged", "first chunk landed",
                                           "chunks done", "outputs written"};
    std::string out = std::string("\n| layer 4, ") + what +
                      ": event | first block, us | last block, us | blocks |\n|---|---|---|---|\n";
    for (int e = 0; e < STAMPS; ++e) {
      unsigned long long lo = ~0ull, hi = 0;
      int n = 0;
      for (int b = 0; b < sms; ++b) {
        const unsigned long long v = t[(size_t)e * sms + b];
        if (v == 0)
          continue;
        lo = std::min(lo, v), hi = std::max(hi, v), ++n;
      }
      char line[160];
      std::snprintf(line, sizeof line, "| %s %s | %.2f | %.2f | %d |\n", proj[e / STAMP_EVENTS],
                    ev[e % STAMP_EVENTS], n ? (lo - t0) / 1e3 : 0.0, n ? (hi - t0) / 1e3 : 0.0, n);
      out += line;
    }
    timelines.push_back(out);
  };
  stream(stream4mmaT<4, true, RELAXED_ADD>, mmaSmem(4),
         "same, relaxed block counts (no release: timing only)");
  stream(stream4mmaT<4, true, WARP_RELEASE>, mmaSmem(4), "same, each warp releases its outputs");
  check("stream kernel, mma, one copy a chunk, warp releases");
  stream(stream4mmaT<4, true, FLAGGED>, mmaSmem(4), "same, flags in the data (no counts, no fences)");
  check("stream kernel, mma, one copy a chunk, flags in the data");
  timeline(stream4mmaT<4>, mmaSmem(4), "mma, one copy a chunk");
  timeline(stream4mmaT<4, true, FLAGGED>, mmaSmem(4), "flags in the data");
  timeline(stream4mmaT<4, false>, mmaSmem(4), "copies and boundaries only");
  unsigned *sink;
  CHECK(cudaMalloc(&sink, 4));
  report("plain read of the same bytes, one kernel", timeMs(st, reps, [&] {
           streamKernel<<<4 * sms, 512, 0, st>>>(reinterpret_cast<const uint4 *>(codes),
                                                  words * LAYERS / 4, sink);
           streamKernel<<<4 * sms, 512, 0, st>>>(reinterpret_cast<const uint4 *>(sz),
                                                  pairs * LAYERS / 4, sink);
         }));
  std::printf("\n");
  for (const std::string &c : checks)
    std::printf("%s\n", c.c_str());
  for (const std::string &c : timelines)
    std::printf("%s", c.c_str());
  CHECK(cudaGetLastError());
  return 0;
}
