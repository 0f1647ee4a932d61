// Whether the project's own CUDA kernels (gdn_kernels.cu, norm_kernels.cu) take CUDA tensors: built with
// RLLOOP_CUDA and not turned off by RLLOOP_KERNELS=0, which forces the ATen formulations on the GPU too (the ones
// the CPU conformance suite checks), so bench/gpu/kernel_check.sh can compare the two there.
#pragma once

namespace rlloop {

bool cuda_kernels_enabled();

}  // namespace rlloop
