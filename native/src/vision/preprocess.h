// Image preprocessing of Qwen3.5 (qwen35.md §8): transformers' Qwen2VLImageProcessor, torchvision backend,
// reproduced to the bit: smart_resize, uint8 antialiased bicubic resize, (x/255 - mean)/std, frame duplicated
// along time, patchified in merge-block order. Decoding files is the caller's job (sharp in the trainer).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>

#include "vision/tower.h"

namespace rlloop {

// Defaults are Qwen3.5's preprocessor_config.json (min_pixels = size.shortest_edge, max_pixels = size.longest_edge).
struct ImageProcessorOptions {
  int64_t patch_size = 16, temporal_patch_size = 2, merge_size = 2, min_pixels = 65536, max_pixels = 16777216;
  std::array<double, 3> mean{0.5, 0.5, 0.5}, std{0.5, 0.5, 0.5};
};

struct ImagePatches {
  at::Tensor pixel_values;  // [gh*gw, 3*T*P*P] float32 on the CPU
  Grid grid;                // (1, gh, gw)
};

// Target (height, width), multiples of factor = patch_size * merge_size, with Python's round-half-to-even.
// Throws for an aspect ratio above 200 and when no size within max_pixels exists.
std::array<int64_t, 2> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                    int64_t max_pixels);

// What a frame of width x height becomes: the resized size and the patches' grid and shape. Checks the options
// and the size (cheap: the caller runs it before handing the work to another thread, so bad input fails at once).
struct ImagePlan {
  int64_t width, height;      // the frame's
  int64_t h_bar, w_bar;       // after smart_resize
  Grid grid;                  // (1, h_bar / P, w_bar / P)
  int64_t patches, patch_dim;  // pixel_values' shape
};
ImagePlan plan_image(int64_t width, int64_t height, const ImageProcessorOptions& options);

// rgb: height*width*3 bytes, row-major HWC (what sharp's raw RGB output holds), written as pixel_values into out
// (plan.patches x plan.patch_dim floats). Neither is retained after the call. ATen's loops run on the calling
// thread only (c10::ParallelGuard): calls from several threads at once do not each start a team of OpenMP threads.
void preprocess_image_into(const uint8_t* rgb, const ImageProcessorOptions& options, const ImagePlan& plan, float* out);

// plan_image + preprocess_image_into a new tensor.
ImagePatches preprocess_image(const uint8_t* rgb, int64_t width, int64_t height, const ImageProcessorOptions& options);

}  // namespace rlloop
