// One warp's TF32 tensor-core products from shared memory through PTX's mma.sync (sm_80 and later): the
// operand fragments' loads, their rounding to TF32, the product, and the accumulators' loads and stores.
//
// Written against PTX rather than nvcuda::wmma because of what WMMA compiles to here (SASS of the delta-rule
// kernels, `scripts/cuda-sass-stats.sh`): its fragment loads take generic addresses, one element at a time, each
// with its own 64-bit address computation. Here a fragment whose k is contiguous in memory (a row-major A, a
// transposed B) comes in one ldmatrix, the others in 32-bit shared loads whose offsets fold into the instruction.
// The arithmetic is nvcuda::wmma's 16 x 16 x 8 TF32 mma_sync's: operands rounded by cvt.rna.tf32.f32 (NaN and
// infinity kept), and each k-step of 8 as the two k = 4 instructions it issues on sm_90 (mma() below).
#pragma once
#include <cstdint>

namespace rlloop::block::tf32 {

// Lane l of a warp, g = l / 4 and t = l % 4, holds (PTX ISA, "Matrix fragments for mma.m16n8k8", .tf32; the
// m16n8k4 product takes x[0..1] of A with x[0] of B for k = 0-3, x[2..3] with x[1] for k = 4-7):
//   of a 16 x 8 A tile      x[0] = (g, t), x[1] = (g + 8, t), x[2] = (g, t + 4), x[3] = (g + 8, t + 4)
//   of an 8 x 8 B tile      x[0] = (t, g), x[1] = (t + 4, g)
//   of a 16 x 8 accumulator x[0] = (g, 2t), x[1] = (g, 2t + 1), x[2] = (g + 8, 2t), x[3] = (g + 8, 2t + 1)
struct FragmentA {
  uint32_t x[4];
};
struct FragmentB {
  uint32_t x[2];
};
struct Accumulator {
  float x[4];
};

__device__ __forceinline__ uint32_t shared_address(const float* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Round to nearest, ties away from zero, to TF32 (the low 13 bits cleared), as WMMA's conversion: NaN and infinity
// pass unchanged. A bare integer add of half a TF32 ulp would be one instruction fewer, but it turns NaNs into
// zeros or infinities, and a kernel's NaN must reach the round's statistics (the gate rejects non-finite ones;
// deltaRuleCheck's nanLost checks it). On sm_90 this is a compare and a predicated add; cvt.rn (ties to even) is
// one instruction and made the kernels 1.05x faster (with the product's k-loop unrolled by two), but a bf16
// round's update measured further from a float32 round's with it (bench/RESULTS.md, "TF32 rounding to
// nearest-even"): not taken.
__device__ __forceinline__ uint32_t round_tf32(uint32_t bits) {
  uint32_t out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(bits)));
  return out;
}

__device__ __forceinline__ uint32_t load_shared(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(address));
  return round_tf32(v);
}

// Four 8 x 4 matrices of 32-bit elements (ldmatrix's 8 x 8 of 16 bits) from the rows whose addresses lanes 0-7,
// 8-15, 16-23 and 24-31 give; lane l receives (l / 4, l % 4) of each: the A and B layouts above when the rows run
// along k.
__device__ __forceinline__ void load_matrices(uint32_t (&x)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
               : "r"(address));
#pragma unroll
  for (int i = 0; i < 4; ++i) x[i] = round_tf32(x[i]);
}

// C += A B over k = 8 as two m16n8k4 products, k = 0-3 then 4-7: what WMMA's 16 x 16 x 8 TF32 product issues on
// sm_90 for each 8-column half. One m16n8k8 instruction sums the eight products inside the tensor core and rounds
// differently: it changed the frozen log-probs in the second decimal of their mean gap, and a bf16 round's update
// measured no closer to a float32 round's (bench/RESULTS.md, "TF32 products through mma.sync").
__device__ __forceinline__ void mma(Accumulator& c, const FragmentA& a, const FragmentB& b) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
    asm("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
        : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
        : "r"(a.x[2 * h]), "r"(a.x[2 * h + 1]), "r"(b.x[h]));
}

// The A operand of a warp's products: 16-row tiles of op(A) from shared memory, A row-major with leading dimension
// lda (floats), op = transpose when kTransposed. Built once a unit (the lane's base address); load(f, k, r) reads
// rows m0 + 16r … + 15 at columns k … k + 7.
template <bool kTransposed>
class OperandA {
 public:
  __device__ __forceinline__ OperandA(const float* a, int lda, int m0, int lane) : lda_(lda) {
    const int g = lane / 4, t = lane % 4;
    // row-major: lane l addresses row (l % 8) + 8·((l / 8) % 2) at column 4·(l / 16) (ldmatrix's four matrices);
    // transposed: the lane's own element (t, g) of Aᵀ
    base_ = kTransposed ? shared_address(a + t * lda + m0 + g)
                        : shared_address(a + (m0 + lane % 8 + 8 * (lane / 8 % 2)) * lda + 4 * (lane / 16));
  }
  __device__ __forceinline__ void load(FragmentA& f, int k, int r) const {
    if constexpr (kTransposed) {
      const uint32_t p = base_ + 4 * (k * lda_ + 16 * r);
      f.x[0] = load_shared(p);
      f.x[1] = load_shared(p + 4 * 8);
      f.x[2] = load_shared(p + 4 * 4 * lda_);
      f.x[3] = load_shared(p + 4 * (4 * lda_ + 8));
    } else {
      load_matrices(f.x, base_ + 4 * (16 * r * lda_ + k));
    }
  }

 private:
  uint32_t base_;
  int lda_;
};

// The B operand: 16-column tiles of op(B), each two 8-column fragments, B row-major with leading dimension ldb,
// op = transpose when kTransposed; load(f, k, s) reads rows k … k + 7 at columns n0 + 16s … + 15.
template <bool kTransposed>
class OperandB {
 public:
  __device__ __forceinline__ OperandB(const float* b, int ldb, int n0, int lane) : ldb_(ldb) {
    const int g = lane / 4, t = lane % 4;
    // transposed (Bᵀ row-major, k along its rows): lane l addresses row n0 + (l % 8) + 8·(l / 16) at column
    // 4·((l / 8) % 2), so the four matrices are the two fragments' k-halves; row-major: the lane's (t, g)
    base_ = kTransposed ? shared_address(b + (n0 + lane % 8 + 8 * (lane / 16)) * ldb + 4 * (lane / 8 % 2))
                        : shared_address(b + t * ldb + n0 + g);
  }
  __device__ __forceinline__ void load(FragmentB (&f)[2], int k, int s) const {
    if constexpr (kTransposed) {
      uint32_t x[4];
      load_matrices(x, base_ + 4 * (16 * s * ldb_ + k));
      f[0].x[0] = x[0];
      f[0].x[1] = x[1];
      f[1].x[0] = x[2];
      f[1].x[1] = x[3];
    } else {
      const uint32_t p = base_ + 4 * (k * ldb_ + 16 * s);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        f[j].x[0] = load_shared(p + 4 * 8 * j);
        f[j].x[1] = load_shared(p + 4 * (4 * ldb_ + 8 * j));
      }
    }
  }

 private:
  uint32_t base_;
  int ldb_;
};

// A 16 x 8 accumulator tile of C (row-major, leading dimension ldc; shared or global memory) at (m, n): the lane's
// two pairs of adjacent columns, 8-byte moves.
__device__ __forceinline__ void load_accumulator(Accumulator& c, const float* C, int ldc, int m, int n, int lane) {
  const float* p = C + (m + lane / 4) * ldc + n + 2 * (lane % 4);
  const float2 top = *reinterpret_cast<const float2*>(p), bottom = *reinterpret_cast<const float2*>(p + 8 * ldc);
  c.x[0] = top.x;
  c.x[1] = top.y;
  c.x[2] = bottom.x;
  c.x[3] = bottom.y;
}

__device__ __forceinline__ void store_accumulator(const Accumulator& c, float* C, int ldc, int m, int n, int lane) {
  float* p = C + (m + lane / 4) * ldc + n + 2 * (lane % 4);
  *reinterpret_cast<float2*>(p) = make_float2(c.x[0], c.x[1]);
  *reinterpret_cast<float2*>(p + 8 * ldc) = make_float2(c.x[2], c.x[3]);
}

}  // namespace rlloop::block::tf32
