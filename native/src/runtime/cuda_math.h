// libtorch's process-wide math settings that a CUDA model's numerics depend on: TF32 in cuBLAS's float32 matrix
// products (the delta rule's chunk terms; the fused delta-rule kernels follow the same setting) and whether scaled
// dot-product attention may pick cuDNN. libtorch keeps one of each per process, so two models with different
// choices cannot both be right at once: each CUDA model holds a claim on the settings it loaded with for its whole
// life, and a model whose choice differs from a live claim's is refused with an error that says so, rather than
// silently changing the first model's numerics. CPU models claim nothing (neither setting applies to them).
#pragma once
#include <functional>

namespace rlloop {

struct CudaMath {
  bool tf32 = false;             // float32 products in TF32
  bool cudnn_attention = false;  // SDPA may use cuDNN (else PyTorch's flash / memory-efficient kernels)
  bool operator==(const CudaMath& o) const { return tf32 == o.tf32 && cudnn_attention == o.cudnn_attention; }
};

class CudaMathClaim {
 public:
  // Applies `wanted` process-wide, or fails (Invalid) when a live claim holds other settings.
  explicit CudaMathClaim(CudaMath wanted);
  ~CudaMathClaim();
  CudaMathClaim(const CudaMathClaim&) = delete;
  CudaMathClaim& operator=(const CudaMathClaim&) = delete;

  // Runs `body` with cuBLAS TF32 set to `tf32`, then restores it (diagnostics comparing TF32 with float32
  // products); refused while a model holds the other setting.
  static void with_tf32(bool tf32, const std::function<void()>& body);
};

}  // namespace rlloop
