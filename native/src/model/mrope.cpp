// get_rope_index for one row (qwen35.md §10.1), written as a walk over runs of text and image tokens.
#include "model/mrope.h"

#include <algorithm>

#include "base/check.h"

namespace rlloop {

at::Tensor mrope_position_ids(const at::Tensor& input_ids, const std::vector<Grid>& grids, int64_t image_token_id,
                              int64_t spatial_merge_size) {
  RLLOOP_CHECK(input_ids.defined(), Invalid, "mrope_position_ids: input_ids is undefined");
  RLLOOP_CHECK(input_ids.dim() == 1, Shape,
               "mrope_position_ids: input_ids must be a 1-D row, got " << input_ids.sizes());
  RLLOOP_CHECK(input_ids.scalar_type() == at::kLong && input_ids.device().is_cpu(), Invalid,
               "mrope_position_ids: input_ids must be int64 on the CPU, got " << input_ids.scalar_type() << " on "
                                                                              << input_ids.device());
  RLLOOP_CHECK(spatial_merge_size > 0, Invalid,
               "mrope_position_ids: spatial_merge_size must be positive, got " << spatial_merge_size);

  const at::Tensor ids = input_ids.contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t L = ids.size(0), m = spatial_merge_size;
  at::Tensor positions = at::empty({3, L}, at::kLong);
  int64_t* T = positions.data_ptr<int64_t>();
  int64_t* H = T + L;
  int64_t* W = H + L;

  int64_t cur = 0;  // next free position
  size_t image = 0;
  for (int64_t i = 0; i < L;) {
    const bool is_image = id[i] == image_token_id;
    int64_t end = i;
    while (end < L && (id[end] == image_token_id) == is_image) ++end;
    if (!is_image) {
      for (int64_t p = i; p < end; ++p) T[p] = H[p] = W[p] = cur + (p - i);
      cur += end - i;
    } else {
      RLLOOP_CHECK(image < grids.size(), Shape,
                   "mrope_position_ids: image run " << image << " at token " << i << " has no grid (" << grids.size()
                                                    << " grids given)");
      const Grid& g = grids[image];
      RLLOOP_CHECK(g[0] > 0 && g[1] > 0 && g[2] > 0 && g[1] % m == 0 && g[2] % m == 0, Shape,
                   "mrope_position_ids: grid " << image << " (" << g[0] << ", " << g[1] << ", " << g[2]
                                               << ") must be positive with gh, gw multiples of " << m);
      const int64_t rows = g[1] / m, cols = g[2] / m;
      RLLOOP_CHECK(end - i == g[0] * rows * cols, Shape,
                   "mrope_position_ids: image " << image << " at token " << i << " has " << end - i
                                                << " image tokens but its grid (" << g[0] << ", " << g[1] << ", "
                                                << g[2] << ") needs " << g[0] * rows * cols);
      int64_t p = i;
      for (int64_t t = 0; t < g[0]; ++t)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c, ++p) {
            T[p] = cur + t;
            H[p] = cur + r;
            W[p] = cur + c;
          }
      cur += std::max(g[1], g[2]) / m;  // not the token count (§10.1)
      ++image;
    }
    i = end;
  }
  RLLOOP_CHECK(image == grids.size(), Shape,
               "mrope_position_ids: " << grids.size() << " grids given but the row has " << image << " image runs");
  return positions;
}

}  // namespace rlloop
