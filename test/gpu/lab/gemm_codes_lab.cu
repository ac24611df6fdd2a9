// A bench for a candidate many-token quantized GEMM (gemm_codes.cuh here,
// built on the library's templates in targets/CUDA/kernels) alone: the 4-bit projections of one Llama 3.1 8B
// layer (AWQ group 128, codes in 16-row tiles) at batch sizes of batched
// decode, in candidate configurations, next to what plans run (the GEMV
// template's tensor-core engine up to 64 tokens; above, the codes expanded
// to an f16 matrix, then cuBLAS) on the same weights and tokens; each
// result is checked against that f16 matrix times the tokens in f32
// (cuBLAS).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I targets/CUDA/kernels \
//        test/gpu/lab/gemm_codes_lab.cu -lcublas -o gemm_codes_lab && ./gemm_codes_lab
//
// LAB_PROFILE=1 launches each kernel once, untimed, for Nsight Compute.
#include "gemm_codes.cuh"

#include <cublas_v2.h>
#include "lab.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace weft::kernels;

constexpr int kCopies = 2; // weights in turn (gate/up codes: 2 x 59 MB, past L2)

// K splits for at least `want` blocks, each split whole chunks, at least 4.
constexpr int autoSplits(int blocks, int chunks, int want) {
  int s = 1;
  while (blocks * s < want && chunks % (2 * s) == 0 && chunks / (2 * s) >= 4)
    s *= 2;
  return s;
}

// Rows j * NC + col (gate rows first, then up rows, as the lab's layer).
// WANT: blocks the K splits should make.
template <int T_, int TILES_, int K_, int NW_, int RPC_, int WARPS_, int KW_, int CPW_, int WANT_,
          int KC_, int STAGES_ = 3>
struct Cfg {
  static constexpr int STAGES = STAGES_;
  static constexpr int T = T_, TILES = TILES_, TP = (T_ + 7) / 8 * 8, K = K_, NW = NW_,
                       NC = NW_ / RPC_;
  static constexpr int THREADS = WARPS_ * 32, WARPS = WARPS_, KW = KW_, CPW = CPW_, RPC = RPC_;
  static constexpr int CPB = WARPS / KW * CPW;
  static constexpr int GX = (NC + CPB - 1) / CPB;
  static constexpr int SPLITS = autoSplits(TILES * GX, K / KC_, WANT_), KS = K / SPLITS;
  static constexpr int KC = KC_, XS = KC_ + 32;
  static constexpr bool NORM = false, PRENORM = false, ARGMAX = false;
  static constexpr float EPS = 0.0f;
  static constexpr int GROUP = 128;
  using x_t = __half;
  using m_t = __half;
  using W = PackedRows<4, 128, 32, __half, Codes::Int, true>;
  static __device__ __forceinline__ int row(int col, int j) { return j * NC + col; }
};

// What plans ran for up to 64 tokens before: the GEMV template's
// tensor-core engine (weft/gemv.cuh), configured as KernelEmitter's
// planGemv does for 4-bit codes (8 warps of 16 columns, K split for two
// blocks per SM, 32 KiB of tokens staged at a time).
constexpr int roundUpTo(int v, int m) { return (v + m - 1) / m * m; }
template <int T_, int K_, int NW_, int RPC_> struct GemvCfg {
  // Tiles of at most 64 / RPC tokens (T_ is a power of two here).
  static constexpr int T = T_ < 64 / RPC_ ? T_ : 64 / RPC_, TILES = T_ / T, K = K_, NW = NW_,
                       NC = NW_ / RPC_;
  static constexpr int VEC = 8, THREADS = 256, WARPS = 8, KW = 1, CPW = 16, RPC = RPC_;
  static constexpr int CPB = WARPS / KW * CPW, GX = (NC + CPB - 1) / CPB;
  static constexpr int WANT = GX * TILES >= 132 ? 1 : (264 + GX * TILES - 1) / (GX * TILES);
  static constexpr int MAXS = K / 512;
  static constexpr int S0 = WANT < 1 ? 1 : WANT > MAXS ? MAXS : WANT;
  static constexpr int KS0 = roundUpTo((K + S0 - 1) / S0, 256);
  static constexpr int KS = KS0 > K ? K : KS0, SPLITS = (K + KS - 1) / KS;
  static constexpr int FIT = 32 * 1024 / (T * 2) / 256 * 256 < 256 ? 256 : 32 * 1024 / (T * 2) / 256 * 256;
  static constexpr int KC = FIT < roundUpTo(KS, 256) ? FIT : roundUpTo(KS, 256), XS = KC + 16;
  static constexpr bool NORM = false, PRENORM = false, MMA = true, ARGMAX = false;
  static constexpr float EPS = 0.0f, NORM_OFFSET = 0.0f;
  using x_t = __half;
  using w_t = unsigned;
  using s_t = __half;
  using m_t = __half;
  using norm_t = __half;
  using W = PackedRows<4, 128, 32, __half, Codes::Int, true>;
  static __device__ __forceinline__ int row(int col, int j) { return j * NC + col; }
};

// f32 outputs [T][NC], SwiGLU's product for two rows per column.
template <class C> struct Store {
  float *out;
  __device__ __forceinline__ void operator()(int t, int col, float (&v)[C::RPC],
                                             unsigned long long &) const {
    out[(size_t)t * C::NC + col] = C::RPC == 2 ? wf_silu(v[0]) * v[C::RPC - 1] : v[0];
  }
};

template <class C>
__global__ void __launch_bounds__(C::THREADS)
    gemmKernel(const __half *x, const unsigned *w, const void *s, float *partials, float *out) {
  if constexpr (C::SPLITS > 1)
    gemmCodes<C>(x, w, s, NoEpilogue{}, partials);
  else
    gemmCodes<C>(x, w, s, Store<C>{out}, partials);
}
template <class C>
__global__ void __launch_bounds__(C::THREADS) reduceKernel(const float *partials, float *out) {
  gemvReduce<C>(partials, Store<C>{out}, nullptr);
}

template <class C>
__global__ void __launch_bounds__(C::THREADS)
    gemvKernel(const __half *x, const unsigned *w, const void *s, float *partials, float *out) {
  if constexpr (C::SPLITS > 1)
    gemv<C>(x, nullptr, w, s, NoEpilogue{}, partials, nullptr);
  else
    gemv<C>(x, nullptr, w, s, Store<C>{out}, nullptr, nullptr);
}

// The codes expanded to f16 [NW][K] (what plans did for many tokens).
template <int K_, int NW_> struct ExpandCfg {
  static constexpr int NW = NW_, K = K_, BITS = 4, GROUP = 128, THREADS = 256;
  static constexpr Codes FORMAT = Codes::Int;
  static constexpr bool TILED = true;
  using m_t = __half;
};
template <class C>
__global__ void __launch_bounds__(256) expandKernel(const unsigned *codes, const void *sz,
                                                   __half *out) {
  expandCodes<C>(codes, sz, out);
}

struct Layer {
  int K, NW, T;
  unsigned *codes[kCopies], *sz[kCopies];
  size_t codeBytes, szBytes;
  __half *x, *expanded, *y16;
  float *partials, *out, *ref;
};

Layer make(int K, int NW, int T, unsigned seed) {
  Layer l{K, NW, T, {}, {}, 0, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  std::mt19937 rng(seed);
  std::vector<unsigned> codes((size_t)NW * K / 8), sz((size_t)NW * K / 128);
  for (auto &c : codes)
    c = rng();
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  std::uniform_int_distribution<int> zero(4, 11);
  for (auto &v : sz) {
    const __half2 p = __floats2half2_rn(scale(rng), (float)zero(rng));
    std::memcpy(&v, &p, 4);
  }
  l.codeBytes = codes.size() * 4, l.szBytes = sz.size() * 4;
  for (int i = 0; i < kCopies; ++i) {
    CHECK(cudaMalloc(&l.codes[i], l.codeBytes));
    CHECK(cudaMalloc(&l.sz[i], l.szBytes));
    CHECK(cudaMemcpy(l.codes[i], codes.data(), l.codeBytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(l.sz[i], sz.data(), l.szBytes, cudaMemcpyHostToDevice));
  }
  std::vector<__half> x((size_t)T * K);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto &v : x)
    v = __float2half(nd(rng));
  CHECK(cudaMalloc(&l.x, x.size() * 2));
  CHECK(cudaMemcpy(l.x, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&l.expanded, (size_t)NW * K * 2));
  CHECK(cudaMalloc(&l.y16, (size_t)T * NW * 2));
  CHECK(cudaMalloc(&l.partials, (size_t)16 * T * NW * 4));
  CHECK(cudaMalloc(&l.out, (size_t)T * NW * 4));
  CHECK(cudaMalloc(&l.ref, (size_t)T * NW * 4));
  return l;
}

void release(Layer &l) {
  for (int i = 0; i < kCopies; ++i)
    cudaFree(l.codes[i]), cudaFree(l.sz[i]);
  cudaFree(l.x), cudaFree(l.expanded), cudaFree(l.y16), cudaFree(l.partials), cudaFree(l.out),
      cudaFree(l.ref);
}

constexpr int kIters = 50;

// LAB_PROFILE=1 (under Nsight Compute): each kernel once, untimed.
const bool kProfile = std::getenv("LAB_PROFILE") != nullptr;

template <class F> float timeUs(F launch) {
  if (kProfile) {
    launch(0);
    return 1.0f;
  }
  for (int i = 0; i < 4; ++i)
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

cublasHandle_t blas;
std::vector<float> reference; // [T][NC] of the current layer
float baselineUs = 0;

// y[T][NW] = x[T][K] * expanded[NW][K]^T, column-major: y^T = E^T(op T) x^T.
void gemm16(Layer &l, void *y, cudaDataType yType) {
  const float one = 1.0f, zero = 0.0f;
  CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, l.NW, l.T, l.K, &one, l.expanded,
                          CUDA_R_16F, l.K, l.x, CUDA_R_16F, l.K, &zero, y, yType, l.NW,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <int K, int NW, int RPC> void baseline(const char *shape, Layer &l) {
  using E = ExpandCfg<K, NW>;
  const int blocks = int(((size_t)NW * K / 8 + 255) / 256);
  auto step = [&](int i) {
    expandKernel<E><<<blocks, 256>>>(l.codes[i % kCopies], l.sz[i % kCopies], l.expanded);
    gemm16(l, l.y16, CUDA_R_16F);
  };
  baselineUs = timeUs(step);
  // The reference: the expanded matrix times the tokens in f32.
  expandKernel<E><<<blocks, 256>>>(l.codes[0], l.sz[0], l.expanded);
  gemm16(l, l.ref, CUDA_R_32F);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> full((size_t)l.T * NW);
  CHECK(cudaMemcpy(full.data(), l.ref, full.size() * 4, cudaMemcpyDeviceToHost));
  constexpr int NC = NW / RPC;
  reference.assign((size_t)l.T * NC, 0.0f);
  for (int t = 0; t < l.T; ++t)
    for (int c = 0; c < NC; ++c) {
      const float g = full[(size_t)t * NW + c];
      reference[(size_t)t * NC + c] =
          RPC == 2 ? g / (1.0f + std::exp(-g)) * full[(size_t)t * NW + NC + c] : g;
    }
  std::printf("| %s | %d | codes expanded to f16, then cuBLAS | | | %.2f | 1.00 | %.2f | |\n",
              shape, l.T, baselineUs, double(l.codeBytes + l.szBytes) / baselineUs / 1e6);
}

// Its result against the reference; `what` names the configuration.
template <class C>
void report(const char *shape, const char *what, Layer &l, float us, const void *kernel, int smem,
            dim3 grid) {
  std::vector<float> out((size_t)l.T * C::NC);
  CHECK(cudaMemcpy(out.data(), l.out, out.size() * 4, cudaMemcpyDeviceToHost));
  double err = 0, mag = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = std::fabs(double(out[i]) - reference[i]);
    err = std::isfinite(out[i]) ? std::fmax(err, d) : INFINITY;
    mag = std::fmax(mag, std::fabs(reference[i]));
  }
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, kernel));
  int perSm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, C::THREADS, smem));
  std::printf("| %s | %d | %s | %d x %d x %d | %d, %d/SM | %.2f | %.2f | %.2f | %.1e |\n", shape,
              l.T, what, grid.x, grid.y, grid.z, attr.numRegs, perSm, us, baselineUs / us,
              double(l.codeBytes + l.szBytes) / us / 1e6, err / (mag > 0 ? mag : 1));
}

template <class C> void runGemv(const char *shape, Layer &l) {
  const dim3 grid(C::GX, C::SPLITS, C::TILES);
  auto step = [&](int i) {
    gemvKernel<C><<<grid, C::THREADS>>>(l.x, l.codes[i % kCopies], l.sz[i % kCopies], l.partials,
                                        l.out);
    if constexpr (C::SPLITS > 1)
      reduceKernel<C><<<dim3(C::GX, 1, C::TILES), C::THREADS>>>(l.partials, l.out);
  };
  const float us = timeUs(step);
  CHECK(cudaMemset(l.out, 0, (size_t)l.T * C::NC * 4));
  step(0);
  CHECK(cudaDeviceSynchronize());
  char what[160];
  std::snprintf(what, sizeof what, "GEMV engine (before): %d splits, KC %d", C::SPLITS, C::KC);
  report<C>(shape, what, l, us, reinterpret_cast<const void *>(gemvKernel<C>), 0, grid);
}

template <class C> void run(const char *shape, Layer &l) {
  constexpr int smem = gemmCodesSharedBytes<C>();
  auto kernel = gemmKernel<C>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(C::TILES, C::GX, C::SPLITS);
  auto step = [&](int i) {
    kernel<<<grid, C::THREADS, smem>>>(l.x, l.codes[i % kCopies], l.sz[i % kCopies], l.partials,
                                       l.out);
    if constexpr (C::SPLITS > 1)
      reduceKernel<C><<<dim3(C::GX, 1, C::TILES), C::THREADS>>>(l.partials, l.out);
  };
  const float us = timeUs(step);
  CHECK(cudaMemset(l.out, 0, (size_t)l.T * C::NC * 4));
  step(0);
  CHECK(cudaDeviceSynchronize());
  char what[160];
  std::snprintf(what, sizeof what,
                "tiles of %d, %d warps (KW %d), %d rows each, %d splits, KC %d, %d stages", C::T,
                C::WARPS, C::KW, C::CPW * C::RPC, C::SPLITS, C::KC, C::STAGES);
  report<C>(shape, what, l, us, reinterpret_cast<const void *>(kernel), smem, grid);
}

// Candidate configurations of one projection at `T` tokens.
template <int T, int K, int NW, int RPC> void shape(const char *name) {
  Layer l = make(K, NW, T, 99 + K + NW + T);
  baseline<K, NW, RPC>(name, l);
  constexpr int CPW = 32 / RPC; // two 16-row tiles per warp
  if constexpr (T <= 64) {
    runGemv<GemvCfg<T, K, NW, RPC>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 4, 1, CPW, 132, 128, 2>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 4, 1, CPW, 132, 128, 3>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 4, 1, CPW, 132, 128, 4>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 4, 1, CPW, 264, 128, 4>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 8, 2, CPW, 264, 256, 3>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 2, 1, CPW, 264, 128, 4>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 8, 1, CPW, 132, 128, 3>>(name, l);
    run<Cfg<T, 1, K, NW, RPC, 4, 1, 2 * CPW, 132, 128, 3>>(name, l);
  } else {
    run<Cfg<T / 2, 2, K, NW, RPC, 4, 1, CPW, 132, 128, 3>>(name, l);
    run<Cfg<T / 2, 2, K, NW, RPC, 4, 1, CPW, 264, 128, 3>>(name, l);
    run<Cfg<T / 4, 4, K, NW, RPC, 4, 1, CPW, 264, 128, 3>>(name, l);
    run<Cfg<T / 4, 4, K, NW, RPC, 4, 1, CPW, 528, 128, 3>>(name, l);
    run<Cfg<T / 2, 2, K, NW, RPC, 8, 2, CPW, 264, 256, 3>>(name, l);
    run<Cfg<T / 2, 2, K, NW, RPC, 8, 1, CPW, 132, 128, 3>>(name, l);
    run<Cfg<T / 4, 4, K, NW, RPC, 8, 1, CPW, 132, 128, 3>>(name, l);
    run<Cfg<T / 4, 4, K, NW, RPC, 4, 1, 2 * CPW, 132, 128, 3>>(name, l);
  }
  release(l);
}

template <int T> void layer() {
  shape<T, 4096, 6144, 1>("QKV");
  shape<T, 4096, 4096, 1>("O");
  shape<T, 4096, 28672, 2>("gate/up + SwiGLU");
  shape<T, 14336, 4096, 1>("down");
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MiB\n\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  CHECK_BLAS(cublasCreate(&blas));
  std::printf("| projection | tokens | configuration | grid | registers, blocks | us | "
              "vs expanded | codes TB/s | rel. diff |\n|---|---|---|---|---|---|---|---|---|\n");
  layer<100>();
  layer<32>();
  layer<64>();
  layer<16>();
  cublasDestroy(blas);
  return 0;
}
