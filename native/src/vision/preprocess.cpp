// qwen35.md §8. Each step names the transformers 5.17 / torchvision 0.26 operation it reproduces; the float
// arithmetic is kept in the same order so that pixel_values agree to the bit.
#include "vision/preprocess.h"

#include <c10/util/ParallelGuard.h>

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace rlloop {
namespace {

void check_options(const ImageProcessorOptions& o) {
  RLLOOP_CHECK(o.patch_size > 0 && o.temporal_patch_size > 0 && o.merge_size > 0, Invalid,
               "image options: patchSize, temporalPatchSize and mergeSize must be positive, got "
                   << o.patch_size << ", " << o.temporal_patch_size << ", " << o.merge_size);
  RLLOOP_CHECK(o.min_pixels >= 0 && o.min_pixels <= o.max_pixels, Invalid,
               "image options: need 0 <= minPixels <= maxPixels, got " << o.min_pixels << " and " << o.max_pixels);
  for (int c = 0; c < 3; ++c)
    RLLOOP_CHECK(std::isfinite(o.mean[c]) && std::isfinite(o.std[c]) && o.std[c] != 0.0, Invalid,
                 "image options: mean[" << c << "] = " << o.mean[c] << " and std[" << c << "] = " << o.std[c]
                                        << " must be finite, std non-zero");
}

// Qwen2VLImageProcessor's rescale_and_normalize fuses x/255 into the normalisation: mean and std become fp32
// tensors multiplied by 1/rescale_factor in fp32, then (x - mean) / std in fp32.
at::Tensor normalize(const at::Tensor& image_uint8, const ImageProcessorOptions& o) {
  const double rescale_factor = 1.0 / 255.0;
  auto fused = [&](const std::array<double, 3>& v) {
    const at::Tensor t = at::tensor({static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2])});
    return (t * (1.0 / rescale_factor)).view({1, 3, 1, 1});
  };
  return image_uint8.to(at::kFloat).sub(fused(o.mean)).div_(fused(o.std));
}

// [1, C, gh*P, gw*P] -> [gh*gw, C*T*P*P]: rows in merge-block order, columns [C][T][py][px], frame repeated T times.
at::Tensor patchify(const at::Tensor& image, const ImageProcessorOptions& o) {
  const int64_t C = image.size(1), P = o.patch_size, m = o.merge_size, T = o.temporal_patch_size;
  const int64_t gh = image.size(2) / P, gw = image.size(3) / P;
  const at::Tensor blocks = image.reshape({C, gh / m, m, P, gw / m, m, P})  // C, bh, mh, py, bw, mw, px
                                .permute({1, 4, 2, 5, 0, 3, 6});          // bh, bw, mh, mw, C, py, px
  return blocks.unsqueeze(5).expand({gh / m, gw / m, m, m, C, T, P, P}).reshape({gh * gw, C * T * P * P});
}

}  // namespace

std::array<int64_t, 2> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                    int64_t max_pixels) {
  RLLOOP_CHECK(height > 0 && width > 0, Invalid, "image size must be positive, got " << width << "x" << height);
  const double aspect = static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  RLLOOP_CHECK(aspect <= 200.0, Invalid,
               "image " << width << "x" << height << ": absolute aspect ratio must be at most 200, got " << aspect);
  const double f = static_cast<double>(factor);
  // std::nearbyint rounds half to even under the default rounding mode, as Python's round() does.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(height) / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(width) / f)) * factor;
  const double area = static_cast<double>(height * width);
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(area / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(height) / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(width) / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / area);
    h_bar = static_cast<int64_t>(std::ceil(static_cast<double>(height) * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(static_cast<double>(width) * beta / f)) * factor;
  }
  RLLOOP_CHECK(h_bar * w_bar <= max_pixels, Invalid,
               "image " << width << "x" << height << " cannot be resized to multiples of " << factor
                        << " within maxPixels " << max_pixels << " (smart_resize gives " << w_bar << "x" << h_bar
                        << "); raise maxPixels");
  return {h_bar, w_bar};
}

ImagePlan plan_image(int64_t width, int64_t height, const ImageProcessorOptions& options) {
  check_options(options);
  const auto [h_bar, w_bar] =
      smart_resize(height, width, options.patch_size * options.merge_size, options.min_pixels, options.max_pixels);
  const Grid grid{1, h_bar / options.patch_size, w_bar / options.patch_size};
  const int64_t patch_dim = 3 * options.temporal_patch_size * options.patch_size * options.patch_size;
  return {width, height, h_bar, w_bar, grid, grid[1] * grid[2], patch_dim};
}

void preprocess_image_into(const uint8_t* rgb, const ImageProcessorOptions& options, const ImagePlan& plan, float* out) {
  RLLOOP_CHECK(rgb != nullptr && out != nullptr, Invalid, "preprocess_image: rgb or out is null");
  const c10::ParallelGuard this_thread_only(true);
  // An NCHW view of the caller's HWC bytes; both the resize and the float conversion copy, nothing keeps rgb.
  at::Tensor image =
      at::from_blob(const_cast<uint8_t*>(rgb), {1, plan.height, plan.width, 3}, at::kByte).permute({0, 3, 1, 2});
  // torchvision resizes uint8 with the native antialiased bicubic kernel and skips an identity resize.
  if (plan.h_bar != plan.height || plan.w_bar != plan.width)
    image = at::_upsample_bicubic2d_aa(image, {plan.h_bar, plan.w_bar}, false);
  at::from_blob(out, {plan.patches, plan.patch_dim}, at::kFloat).copy_(patchify(normalize(image, options), options));
}

ImagePatches preprocess_image(const uint8_t* rgb, int64_t width, int64_t height, const ImageProcessorOptions& options) {
  const ImagePlan plan = plan_image(width, height, options);
  at::Tensor pixels = at::empty({plan.patches, plan.patch_dim}, at::kFloat);
  preprocess_image_into(rgb, options, plan, pixels.data_ptr<float>());
  return {pixels, plan.grid};
}

}  // namespace rlloop
