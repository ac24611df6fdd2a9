// A bench for the decode GEMV templates of targets/CUDA/kernels alone: the
// 4-bit projections of one Llama 3.1 8B layer at one token, in the
// configurations the emitter picks and in candidate ones, each timed over
// enough weight copies to miss L2, next to a plain streaming read of the
// same bytes. Candidates are checked against the emitter's configuration
// on the same weights.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I targets/CUDA/kernels \
//        test/gpu/lab/gemv_lab.cu -o gemv_lab && ./gemv_lab
#include "weft/gemv.cuh"

#include "lab.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace weft::kernels;


// One projection shape and launch configuration, as the emitter writes it.
template <int K_, int NW_, int RPC_, int WARPS_, int KW_, int SPLITS_, bool NORM_, bool TILED_>
struct Cfg {
  static constexpr int T = 1, TILES = 1, K = K_, NW = NW_, NC = NW_ / RPC_;
  static constexpr int VEC = 8, THREADS = WARPS_ * 32, WARPS = WARPS_;
  static constexpr int KW = KW_, CPW = 16, RPC = RPC_, CPB = WARPS / KW * CPW;
  static constexpr int KS0 = (K + SPLITS_ - 1) / SPLITS_;
  static constexpr int KS = (KS0 + 255) / 256 * 256 > K ? K : (KS0 + 255) / 256 * 256;
  static constexpr int SPLITS = (K + KS - 1) / KS;
  static constexpr int KC = KS, XS = KC + 16;
  static constexpr bool NORM = NORM_, PRENORM = NORM_, MMA = true, ARGMAX = false;
  static constexpr float EPS = 1e-5f, NORM_OFFSET = 0.0f;
  static constexpr bool TILED = TILED_;
  using x_t = __half;
  using w_t = unsigned;
  using s_t = __half;
  using m_t = __half;
  using W = PackedRows<4, 128, 32, m_t, Codes::Int, TILED>;
  using norm_t = __half;
  static __device__ __forceinline__ int row(int col, int j) { return j * NC + col; }
  static constexpr int GX = (NC + CPB - 1) / CPB;
};

// Stores the RPC sums of a column (SwiGLU's product for two) in f32.
template <class C> struct Store {
  float *out;
  __device__ __forceinline__ void operator()(int t, int col, float (&v)[C::RPC],
                                             unsigned long long &) const {
    out[(size_t)t * C::NC + col] = C::RPC == 2 ? wf_silu(v[0]) * v[C::RPC - 1] : v[0];
  }
};

template <class C>
__global__ void __launch_bounds__(C::THREADS)
    gemvKernel(const __half *x, const __half *norm, const unsigned *w, const void *s,
               float *partials, float *out) {
  if constexpr (C::SPLITS > 1)
    gemv<C>(x, norm, w, s, NoEpilogue{}, partials, nullptr);
  else
    gemv<C>(x, norm, w, s, Store<C>{out}, nullptr, nullptr);
}
template <class C> __global__ void __launch_bounds__(C::THREADS) reduceKernel(const float *partials, float *out) {
  gemvReduce<C>(partials, Store<C>{out}, nullptr);
}

struct Weights {
  int K, NW;
  std::vector<unsigned> codes, tiled; // [NW][K / 8] and the tiled order
  std::vector<unsigned> sz;           // [NW][K / 128] (scale, zero) f16 pairs
};

Weights makeWeights(int K, int NW, unsigned seed) {
  Weights w{K, NW, {}, {}, {}};
  std::mt19937 rng(seed);
  w.codes.resize((size_t)NW * K / 8);
  for (auto &c : w.codes)
    c = rng();
  w.tiled.resize(w.codes.size());
  const int wpr = K / 8;
  for (int r = 0; r < NW; ++r)
    for (int word = 0; word < wpr; ++word) {
      const int step = word / 16, within = word % 16;
      w.tiled[((size_t)(r / 16) * (K / 128) + step) * 256 + (r % 16) * 16 + within] =
          w.codes[(size_t)r * wpr + word];
    }
  w.sz.resize((size_t)NW * K / 128);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  std::uniform_int_distribution<int> zero(4, 11);
  for (auto &v : w.sz) {
    const __half2 p = __floats2half2_rn(scale(rng), (float)zero(rng));
    std::memcpy(&v, &p, 4);
  }
  return w;
}

struct Device {
  static constexpr int COPIES = 4; // distinct weights in turn: more than L2 holds
  unsigned *codes[COPIES], *tiled[COPIES], *sz[COPIES];
  size_t codeBytes, szBytes;
  __half *x, *norm;
  float *partials, *out;
  unsigned *sink, *arrivals;
};

Device upload(const Weights &w) {
  Device d{};
  d.codeBytes = w.codes.size() * 4;
  d.szBytes = w.sz.size() * 4;
  for (int i = 0; i < Device::COPIES; ++i) {
    CHECK(cudaMalloc(&d.codes[i], d.codeBytes));
    CHECK(cudaMalloc(&d.tiled[i], d.codeBytes));
    CHECK(cudaMalloc(&d.sz[i], d.szBytes));
    CHECK(cudaMemcpy(d.codes[i], w.codes.data(), d.codeBytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d.tiled[i], w.tiled.data(), d.codeBytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d.sz[i], w.sz.data(), d.szBytes, cudaMemcpyHostToDevice));
  }
  std::vector<__half> x(w.K), norm(w.K);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int i = 0; i < w.K; ++i) {
    x[i] = __float2half(nd(rng));
    norm[i] = __float2half(1.0f + 0.1f * nd(rng));
  }
  CHECK(cudaMalloc(&d.x, w.K * 2));
  CHECK(cudaMalloc(&d.norm, w.K * 2));
  CHECK(cudaMemcpy(d.x, x.data(), w.K * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d.norm, norm.data(), w.K * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&d.partials, (size_t)16 * w.NW * 4 + 64));
  CHECK(cudaMalloc(&d.out, (size_t)w.NW * 4));
  CHECK(cudaMalloc(&d.sink, 4));
  CHECK(cudaMalloc(&d.arrivals, 65536 * 4));
  CHECK(cudaMemset(d.arrivals, 0, 65536 * 4));
  return d;
}

void release(Device &d) {
  for (int i = 0; i < Device::COPIES; ++i) {
    cudaFree(d.codes[i]);
    cudaFree(d.tiled[i]);
    cudaFree(d.sz[i]);
  }
  cudaFree(d.x), cudaFree(d.norm), cudaFree(d.partials), cudaFree(d.out), cudaFree(d.sink), cudaFree(d.arrivals);
}

constexpr int kIters = 200;

template <class F> float timeUs(F launch) {
  for (int i = 0; i < 10; ++i)
    launch(i);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a));
  for (int i = 0; i < kIters; ++i)
    launch(i);
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a), cudaEventDestroy(b);
  return ms * 1000.0f / kIters;
}

std::vector<float> reference; // the emitter configuration's outputs, per shape

template <class C> void run(const char *shape, const char *what, Device &d) {
  const unsigned *const *w = C::TILED ? d.tiled : d.codes;
  auto gemvOnly = [&](int i) {
    gemvKernel<C><<<dim3(C::GX, C::SPLITS), C::THREADS>>>(d.x, d.norm, w[i % Device::COPIES],
                                                        d.sz[i % Device::COPIES], d.partials,
                                                        d.out);
  };
  auto both = [&](int i) {
    gemvOnly(i);
    if constexpr (C::SPLITS > 1)
      reduceKernel<C><<<C::GX, C::THREADS>>>(d.partials, d.out);
  };
  const float us = timeUs(both), usGemv = C::SPLITS > 1 ? timeUs(gemvOnly) : us;
  CHECK(cudaDeviceSynchronize());
  both(0);
  std::vector<float> out(C::NC);
  CHECK(cudaMemcpy(out.data(), d.out, C::NC * 4, cudaMemcpyDeviceToHost));
  double err = 0, mag = 0;
  if (reference.empty())
    reference = out;
  for (int i = 0; i < C::NC; ++i) {
    err = std::fmax(err, std::fabs(out[i] - reference[i]));
    mag = std::fmax(mag, std::fabs(reference[i]));
  }
  const double bytes = double(d.codeBytes + d.szBytes);
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, gemvKernel<C>));
  int perSm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, gemvKernel<C>, C::THREADS, 0));
  std::printf("| %s | %s | %d x %d | %d, %d/SM | %.2f | %.2f | %.2f | %.1e |\n", shape, what, C::GX,
              C::SPLITS, attr.numRegs, perSm, us, usGemv, bytes / usGemv / 1e6,
              err / (mag > 0 ? mag : 1));
}

void stream(const char *shape, Device &d) {
  const size_t n = d.codeBytes / 16;
  const float us = timeUs([&](int i) {
    streamKernel<<<132 * 8, 256>>>(reinterpret_cast<const uint4 *>(d.codes[i % Device::COPIES]), n,
                                  d.sink);
  });
  std::printf("| %s | stream read of the codes | 1056 | | %.2f | %.2f | %.2f | |\n", shape, us, us,
              double(d.codeBytes) / us / 1e6);
}


// A lean one-token 4-bit GEMV for exploring the design space: warp w of a
// block owns one 16-column tile (RPC row kinds: tiles of gate and up rows),
// grid.y splits K, U steps of 128 k have their codes in flight at once,
// and the sums go to `out` by atomicAdd (no epilogue, no reduce kernel).
template <int K, int NW, int RPC, int WARPS, int SPLITS, int U, bool NORM, bool TILED, int CHAINS,
          bool FIX = false>
__global__ void __launch_bounds__(WARPS * 32)
    leanGemv(const __half *__restrict__ x, const __half *__restrict__ normw,
             const unsigned *__restrict__ codes, const unsigned *__restrict__ sz,
             float *__restrict__ out, float *__restrict__ partials = nullptr,
             unsigned *__restrict__ arrivals = nullptr) {
  using P = PackedRows<4, 128, 32, __half>;
  constexpr int NC = NW / RPC, KS = K / SPLITS, STEPS = KS / 128;
  static_assert(KS % 128 == 0, "whole steps");
  __shared__ __align__(16) __half xs[KS];
  __shared__ float red[WARPS];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int col0 = (blockIdx.x * WARPS + warp) * 16;
  const int kBegin = blockIdx.y * KS;
  float inv = 1.0f;
  if constexpr (NORM) {
    float ss = 0.0f;
    for (int i = threadIdx.x * 8; i < K; i += WARPS * 32 * 8) {
      const uint4 v = *reinterpret_cast<const uint4 *>(x + i);
      const __half2 *h = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __half22float2(h[e]);
        ss += f.x * f.x + f.y * f.y;
      }
    }
    ss = wf_warp_sum(ss);
    if (lane == 0)
      red[warp] = ss;
    __syncthreads();
    float t = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w)
      t += red[w];
    inv = 1.0f / sqrtf(t / K + 1e-5f);
  }
  for (int i = threadIdx.x * 8; i < KS; i += WARPS * 32 * 8) {
    uint4 v = *reinterpret_cast<const uint4 *>(x + kBegin + i);
    if constexpr (NORM) {
      const uint4 n = *reinterpret_cast<const uint4 *>(normw + kBegin + i);
      __half2 *h = reinterpret_cast<__half2 *>(&v);
      const __half2 *nh = reinterpret_cast<const __half2 *>(&n);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __half22float2(h[e]), m = __half22float2(nh[e]);
        h[e] = __floats2half2_rn(f.x * inv * m.x, f.y * inv * m.y);
      }
    }
    *reinterpret_cast<uint4 *>(xs + i) = v;
  }
  __syncthreads();
  // Lane (g, q) reads rows g and g + 8 of each tile: 16 bytes, 32 k.
  const unsigned *lo[RPC], *hi[RPC];
  const unsigned *szLo[RPC], *szHi[RPC];
#pragma unroll
  for (int j = 0; j < RPC; ++j) {
    const int r = j * NC + col0 + g;
    if constexpr (TILED) {
      lo[j] = codes + (size_t)(r / 16) * (K / 8) * 16 + (size_t)(kBegin / 128) * 256 + (r % 16) * 16 + 4 * q;
      hi[j] = lo[j] + 8 * 16;
    } else {
      lo[j] = codes + (size_t)r * (K / 8) + kBegin / 8 + 4 * q;
      hi[j] = lo[j] + 8 * (K / 8);
    }
    szLo[j] = sz + (size_t)r * (K / 128) + kBegin / 128;
    szHi[j] = szLo[j] + 8 * (K / 128);
  }
  constexpr int STRIDE = TILED ? 256 : 16; // words between steps
  float acc[RPC][4] = {};
  for (int s0 = 0; s0 < STEPS; s0 += U) {
    uint4 cl[U][RPC], ch[U][RPC];
    unsigned zl[U][RPC], zh[U][RPC];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        const int st = s0 + u < STEPS ? s0 + u : STEPS - 1;
        cl[u][j] = __ldcs(reinterpret_cast<const uint4 *>(lo[j] + (size_t)st * STRIDE));
        ch[u][j] = __ldcs(reinterpret_cast<const uint4 *>(hi[j] + (size_t)st * STRIDE));
        zl[u][j] = __ldg(szLo[j] + st);
        zh[u][j] = __ldg(szHi[j] + st);
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (STEPS % U != 0 && s0 + u >= STEPS)
        break;
      uint4 b[4];
#pragma unroll
      for (int h = 0; h < 4; ++h)
        b[h] = g == 0 ? *reinterpret_cast<const uint4 *>(xs + (s0 + u) * 128 + 32 * q + 8 * h)
                      : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        const unsigned wl[4] = {cl[u][j].x, cl[u][j].y, cl[u][j].z, cl[u][j].w};
        const unsigned wh[4] = {ch[u][j].x, ch[u][j].y, ch[u][j].z, ch[u][j].w};
        // CHAINS independent accumulators: the MMAs of a step do not wait
        // on each other's results.
        float part[CHAINS][4] = {};
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          unsigned el[4], eh[4];
          P::expandWord<false>(wl[h], zl[u][j], el);
          P::expandWord<false>(wh[h], zh[u][j], eh);
          wf_mma_m16n8k16<__half>(part[(2 * h) % CHAINS], el[0], eh[0], el[1], eh[1], b[h].x, b[h].y);
          wf_mma_m16n8k16<__half>(part[(2 * h + 1) % CHAINS], el[2], eh[2], el[3], eh[3], b[h].z, b[h].w);
        }
        float step[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            step[e] += part[c][e];
        const float sl = __low2float(wf_bits_as<__half2>(zl[u][j]));
        const float sh = __low2float(wf_bits_as<__half2>(zh[u][j]));
        acc[j][0] = fmaf(step[0], sl, acc[j][0]);
        acc[j][2] = fmaf(step[2], sh, acc[j][2]);
      }
    }
  }
  if constexpr (!FIX) {
    if (q == 0)
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        atomicAdd(out + j * NC + col0 + g, acc[j][0]);
        atomicAdd(out + j * NC + col0 + g + 8, acc[j][2]);
      }
  } else {
    // Partials [SPLITS][NW]; the last block of a column block sums them.
    if (q == 0)
#pragma unroll
      for (int j = 0; j < RPC; ++j) {
        partials[(size_t)blockIdx.y * NW + j * NC + col0 + g] = acc[j][0];
        partials[(size_t)blockIdx.y * NW + j * NC + col0 + g + 8] = acc[j][2];
      }
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      last = atomicAdd(arrivals + blockIdx.x, 1u) == SPLITS - 1;
      if (last)
        arrivals[blockIdx.x] = 0u;
    }
    __syncthreads();
    if (last) {
      __threadfence();
      for (int c = threadIdx.x; c < WARPS * 16; c += WARPS * 32) {
        const int col = blockIdx.x * WARPS * 16 + c;
        float v[RPC];
#pragma unroll
        for (int j = 0; j < RPC; ++j) {
          float t = 0.0f;
#pragma unroll
          for (int sp = 0; sp < SPLITS; ++sp)
            t += __ldcg(partials + (size_t)sp * NW + j * NC + col);
          v[j] = t;
        }
        out[col] = RPC == 2 ? wf_silu(v[0]) * v[RPC - 1] : v[0];
      }
    }
  }
}

template <int K, int NW, int RPC, int WARPS, int SPLITS, int U, bool NORM, bool TILED, int CHAINS = 1,
          bool FIX = false>
void lean(const char *shape, const char *what, Device &d) {
  auto kernel = leanGemv<K, NW, RPC, WARPS, SPLITS, U, NORM, TILED, CHAINS, FIX>;
  constexpr int GX = NW / RPC / 16 / WARPS;
  const unsigned *const *w = TILED ? d.tiled : d.codes;
  const float us = timeUs([&](int i) {
    kernel<<<dim3(GX, SPLITS), WARPS * 32>>>(d.x, d.norm, w[i % Device::COPIES],
                                             d.sz[i % Device::COPIES], d.out, d.partials,
                                             d.arrivals);
  });
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, kernel));
  int perSm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, WARPS * 32, 0));
  // Its sums against the emitter configuration's outputs (same weights).
  CHECK(cudaMemset(d.out, 0, (size_t)NW * 4));
  kernel<<<dim3(GX, SPLITS), WARPS * 32>>>(d.x, d.norm, w[0], d.sz[0], d.out, d.partials,
                                           d.arrivals);
  std::vector<float> sums(NW);
  CHECK(cudaMemcpy(sums.data(), d.out, (size_t)NW * 4, cudaMemcpyDeviceToHost));
  double err = 0, mag = 0;
  for (int c = 0; c < NW / RPC; ++c) {
    const float v = FIX ? sums[c]
                  : RPC == 2 ? sums[c] / (1.0f + std::exp(-sums[c])) * sums[NW / 2 + c] : sums[c];
    err = std::fmax(err, std::fabs(v - reference[c]));
    mag = std::fmax(mag, std::fabs(reference[c]));
  }
  const double bytes = double(d.codeBytes + d.szBytes);
  std::printf("| %s | lean%s %s: %d warps, %d splits, %d steps in flight, %d chains | %d x %d | %d, %d/SM | %.2f | %.2f | %.2f | %.1e |\n",
              shape, FIX ? " + fixup" : "", what, WARPS, SPLITS, U, CHAINS, GX, SPLITS, attr.numRegs, perSm, us, us,
              bytes / us / 1e6, err / (mag > 0 ? mag : 1));
}

template <int K, int NW, int RPC, bool NORM, int KW0, int S0> void shape(const char *name) {
  Weights w = makeWeights(K, NW, 1234 + K + NW);
  Device d = upload(w);
  reference.clear();
  stream(name, d);
  run<Cfg<K, NW, RPC, 8, KW0, S0, NORM, false>>(name, "emitter (rows)", d);
  run<Cfg<K, NW, RPC, 8, KW0, S0, NORM, true>>(name, "emitter, tiled codes", d);
  lean<K, NW, RPC, 4, 8, 2, NORM, true>(name, "tiled", d);
  lean<K, NW, RPC, 4, 8, 2, NORM, true, 1, true>(name, "tiled", d);
  lean<K, NW, RPC, 4, 4, 2, NORM, true, 1, true>(name, "tiled", d);
  lean<K, NW, RPC, 4, 16, 2, NORM, true, 1, true>(name, "tiled", d);
  lean<K, NW, RPC, 8, 8, 2, NORM, true, 1, true>(name, "tiled", d);
  lean<K, NW, RPC, 2, 8, 2, NORM, true, 1, true>(name, "tiled", d);
  lean<K, NW, RPC, 4, 8, 1, NORM, true, 1, true>(name, "tiled", d);
  lean<K, NW, RPC, 4, 8, 2, NORM, false, 1, true>(name, "rows", d);
  release(d);
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MiB\n\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  std::printf("| projection | configuration | grid | registers, blocks | us (with reduce) | us GEMV | "
              "GB/s GEMV | rel. diff |\n|---|---|---|---|---|---|---|---|\n");
  shape<4096, 6144, 1, true, 8, 1>("QKV + norm");
  shape<4096, 4096, 1, false, 4, 3>("O");
  shape<4096, 28672, 2, true, 1, 3>("gate/up + norm");
  shape<14336, 4096, 1, false, 4, 3>("down");
  return 0;
}
