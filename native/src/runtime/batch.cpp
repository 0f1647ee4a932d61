#include "runtime/batch.h"

#include <algorithm>

#include "base/check.h"
#include "model/mrope.h"

namespace rlloop {

namespace {

bool is_cached(const ImageInput& img, const VisionCache* cache) {
  return cache && !img.cache_key.empty() && cache->contains(img.cache_key);
}

void check_row(const RowInput& row, size_t index, const Qwen35Config& config, int64_t K, const VisionCache* cache) {
  const int64_t len = static_cast<int64_t>(row.input_ids.size());
  RLLOOP_CHECK(len > 0, Invalid, "row " << index << ": inputIds is empty");
  RLLOOP_CHECK(row.score_count == K, Invalid,
               "row " << index << ": scoreCount " << row.score_count << " differs from row 0's " << K
                      << " (all rows of a batch score the same number of tokens)");
  RLLOOP_CHECK(row.score_count > 0, Invalid, "row " << index << ": scoreCount must be positive");
  RLLOOP_CHECK(row.score_start >= 1 && row.score_start + row.score_count <= len, Invalid,
               "row " << index << ": scored tokens [" << row.score_start << ", " << row.score_start + row.score_count
                      << ") must lie within [1, " << len << ")");
  int64_t image_tokens = 0;
  for (int64_t id : row.input_ids) {
    RLLOOP_CHECK(id >= 0 && id < config.text.vocab_size, Invalid,
                 "row " << index << ": token id " << id << " is outside the vocabulary [0, " << config.text.vocab_size << ")");
    RLLOOP_CHECK(id != config.video_token_id, Unsupported, "row " << index << ": video tokens are not supported");
    if (id == config.image_token_id) ++image_tokens;
  }
  if (row.images.empty()) {
    RLLOOP_CHECK(image_tokens == 0, Invalid,
                 "row " << index << ": " << image_tokens << " image tokens (id " << config.image_token_id << ") but no images");
    return;
  }
  RLLOOP_CHECK(config.vision.has_value(), Unsupported, "row " << index << ": images given but the model has no vision_config");
  const VisionConfig& v = *config.vision;
  const int64_t patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  const int64_t merge2 = v.spatial_merge_size * v.spatial_merge_size;
  int64_t expected = 0;
  for (size_t i = 0; i < row.images.size(); ++i) {
    const ImageInput& img = row.images[i];
    const auto [t, gh, gw] = img.grid;
    RLLOOP_CHECK(t >= 1 && gh > 0 && gw > 0 && gh % v.spatial_merge_size == 0 && gw % v.spatial_merge_size == 0, Invalid,
                 "row " << index << " image " << i << ": grid [" << t << ", " << gh << ", " << gw
                        << "] must be positive with gh, gw multiples of " << v.spatial_merge_size);
    if (is_cached(img, cache)) {
      expected += t * gh * gw / merge2;
      continue;
    }
    RLLOOP_CHECK(img.pixel_values.defined(), Invalid,
                 "row " << index << " image " << i << ": no pixelValues, and its cacheKey \"" << img.cache_key
                        << "\" is not in the model's vision cache (cleared, full, or never computed)");
    RLLOOP_CHECK(img.pixel_values.dim() == 2 && img.pixel_values.size(0) == t * gh * gw &&
                     img.pixel_values.size(1) == patch_dim,
                 Shape,
                 "row " << index << " image " << i << ": pixelValues has " << img.pixel_values.numel()
                        << " values, grid [" << t << ", " << gh << ", " << gw << "] needs " << t * gh * gw << " x "
                        << patch_dim);
    expected += t * gh * gw / merge2;
  }
  RLLOOP_CHECK(image_tokens == expected, Invalid,
               "row " << index << ": " << image_tokens << " image tokens but its " << row.images.size()
                      << " image(s) need " << expected << " (gh*gw/" << merge2 << " each)");
}

// The images' patches in one host buffer of the model dtype, converted while copied (the tower casts its float32
// input to its dtype first, qwen35.md §11: the same rounding, done here on this thread instead of on the device).
at::Tensor concatenated_pixels(const std::vector<at::Tensor>& pixels, at::ScalarType dtype, const DeviceUpload& upload) {
  int64_t patches = 0;
  for (const at::Tensor& p : pixels) patches += p.size(0);
  at::Tensor out = upload.host_buffer({patches, pixels.front().size(1)}, dtype);
  int64_t offset = 0;
  for (const at::Tensor& p : pixels) {
    out.narrow(0, offset, p.size(0)).copy_(p);
    offset += p.size(0);
  }
  return out;
}

}  // namespace

PreparedBatch prepare_batch(const std::vector<RowInput>& rows, const Qwen35Config& config, at::ScalarType dtype,
                            at::Device device, uint64_t owner, const VisionCache* cache,
                            std::optional<c10::Stream> upload_stream) {
  RLLOOP_CHECK(!rows.empty(), Invalid, "prepare: no rows");
  PreparedBatch b;
  b.owner = owner;
  b.B = static_cast<int64_t>(rows.size());
  b.K = rows[0].score_count;
  for (size_t i = 0; i < rows.size(); ++i) {
    check_row(rows[i], i, config, b.K, cache);
    b.lengths.push_back(static_cast<int64_t>(rows[i].input_ids.size()));
  }
  b.L = *std::max_element(b.lengths.begin(), b.lengths.end());

  auto i64 = at::TensorOptions().dtype(at::kLong);
  at::Tensor ids = at::zeros({b.B, b.L}, i64);
  at::Tensor positions = at::ones({3, b.B, b.L}, i64);
  at::Tensor logit_positions = at::empty({b.B, b.K}, i64), targets = at::empty({b.B, b.K}, i64);
  std::vector<at::Tensor> pixels;
  const int64_t merge = config.vision ? config.vision->spatial_merge_size : 2;
  for (int64_t r = 0; r < b.B; ++r) {
    const RowInput& row = rows[r];
    const int64_t len = b.lengths[r];
    at::Tensor row_ids = at::tensor(row.input_ids, i64);
    ids[r].narrow(0, 0, len).copy_(row_ids);
    std::vector<Grid> grids;
    for (const ImageInput& img : row.images) {
      grids.push_back(img.grid);
      b.grids.push_back(img.grid);
      b.image_tokens.push_back(img.grid[0] * img.grid[1] * img.grid[2] / (merge * merge));
      b.image_keys.push_back(img.cache_key);
      b.image_cached.push_back(is_cached(img, cache));
      if (b.image_cached.back()) continue;
      pixels.push_back(img.pixel_values);
    }
    positions.select(1, r).narrow(1, 0, len).copy_(mrope_position_ids(row_ids, grids, config.image_token_id, merge));
    auto lp = logit_positions.accessor<int64_t, 2>();
    auto tg = targets.accessor<int64_t, 2>();
    for (int64_t j = 0; j < b.K; ++j) {
      lp[r][j] = row.score_start + j - 1;
      tg[r][j] = row.input_ids[row.score_start + j];
    }
  }
  b.upload = std::make_shared<DeviceUpload>(device, upload_stream);
  DeviceUpload& upload = *b.upload;
  b.input_ids = upload.copy(ids);
  b.position_ids = upload.copy(positions);
  b.logit_positions = upload.copy(logit_positions);
  b.targets = upload.copy(targets);
  if (*std::min_element(b.lengths.begin(), b.lengths.end()) < b.L) {
    at::Tensor mask = at::zeros({b.B, b.L}, at::TensorOptions().dtype(dtype));
    for (int64_t r = 0; r < b.B; ++r) mask[r].narrow(0, 0, b.lengths[r]).fill_(1);
    b.padding_mask = upload.copy(mask);
  }
  if (!pixels.empty()) b.pixel_values = upload.copy(concatenated_pixels(pixels, dtype, upload));
  upload.finish();
  return b;
}

}  // namespace rlloop
