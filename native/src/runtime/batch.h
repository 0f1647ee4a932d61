// A prepared batch: rows right-padded into [B, L] on the model's device, M-RoPE positions, the scored positions and
// targets, the images' patches, and (filled on first use) the frozen vision tower's features.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/config.h"
#include "runtime/device_upload.h"
#include "vision/feature_cache.h"

namespace rlloop {

struct ImageInput {
  at::Tensor pixel_values;  // [t*gh*gw, C*T*P*P] float32, CPU; may be undefined when cache_key is in the cache
  Grid grid;                // (t, gh, gw)
  std::string cache_key;    // "" or the key of its vision features in the model's VisionCache
};

struct RowInput {
  std::vector<int64_t> input_ids;  // the whole row, image pads expanded
  std::vector<ImageInput> images;  // one per run of image tokens, in order
  int64_t score_start = 0;         // first scored token
  int64_t score_count = 0;         // K
};

struct PreparedBatch {
  uint64_t owner = 0;            // the id of the model it was prepared for (a batch is bound to one model)
  int64_t B = 0, L = 0, K = 0;
  std::vector<int64_t> lengths;  // real tokens per row
  at::Tensor input_ids;          // [B, L] int64 (padding id 0)
  at::Tensor position_ids;       // [3, B, L] int64; padded positions hold 1, as transformers' get_rope_index
  at::Tensor padding_mask;       // [B, L] model dtype (1 real, 0 pad); undefined when no row is padded
  at::Tensor logit_positions;    // [B, K] int64: score_start + j - 1 (the position whose logits predict token j)
  at::Tensor targets;            // [B, K] int64: input_ids[score_start + j]
  std::vector<Grid> grids;       // one per image, in order (rows first, then within a row)
  std::vector<int64_t> image_tokens;  // LLM tokens per image (t*gh*gw / merge²)
  std::vector<std::string> image_keys;  // VisionCache key per image ("" none)
  std::vector<bool> image_cached;       // its features were in the cache when the batch was prepared
  at::Tensor pixel_values;       // [patches, C*T*P*P] model dtype: the images not cached, in order; undefined if none
                                 // (and released once vision_features is assembled)
  at::Tensor vision_features;    // [sum image_tokens, hidden] model dtype; assembled once, on first use
  std::shared_ptr<DeviceUpload> upload;  // the tensors above reached the device through it: ready() before use
};

// Validates the rows against the config (ids in the vocabulary, image runs vs grids, equal K, score range) and builds
// the batch on `device` (on CUDA its copies are still in flight on `upload_stream`, the model's
// DeviceUpload::side_stream: batch.upload->ready() before use). Runs on a thread
// of its own, concurrently with the model's worker. Images whose cache_key is in `cache` need no pixels (theirs are dropped if given).
// Errors name the row and what is wrong.
PreparedBatch prepare_batch(const std::vector<RowInput>& rows, const Qwen35Config& config, at::ScalarType dtype,
                            at::Device device, uint64_t owner, const VisionCache* cache,
                            std::optional<c10::Stream> upload_stream);

}  // namespace rlloop
