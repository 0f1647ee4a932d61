// What the delta rule's forward kernels keep for their backward (delta_rule/sequences.h).
#pragma once
#include <ATen/ATen.h>

namespace rlloop::delta_rule {

// Every chunk's starting state S_n [B, H, N, D, D], the solve's U and W [B, H, N, 64, D] and its inverse T
// [B, H, N, 64, 64]: the backward reads them instead of running the solve again (programs.h).
struct ForwardSaved {
  at::Tensor states, U, W, T;
};

}  // namespace rlloop::delta_rule
