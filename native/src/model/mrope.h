// 3-D M-RoPE position ids of one prefill row (qwen35.md §10.1, transformers' get_rope_index): text tokens count
// up in all three components; an image's tokens get (T, H, W) = cur + (frame, block row, block col), then cur
// advances by max(gh, gw) / merge. Decode positions (P + rope_delta) are the caller's business.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "vision/tower.h"

namespace rlloop {

// input_ids [L] int64 on the CPU, one unpadded row. Images are the maximal runs of image_token_id, matched in order
// with grids; each run must hold exactly t*(gh/merge)*(gw/merge) tokens and every grid must be used.
// Returns [3, L] int64 (rows T, H, W) on the CPU.
at::Tensor mrope_position_ids(const at::Tensor& input_ids, const std::vector<Grid>& grids, int64_t image_token_id,
                              int64_t spatial_merge_size);

}  // namespace rlloop
