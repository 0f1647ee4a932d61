#include "io/pattern_weights.h"

#include <functional>
#include <numeric>

namespace rlloop {

at::Tensor PatternWeights::get(const std::string&, const std::vector<int64_t>& shape, at::ScalarType dtype,
                               at::Device device) {
  // Not drawn from a generator: a stand-in of the 9B shapes holds ~1.3 billion values (its embedding and head),
  // which a host-side generator takes seconds to draw, and the device's generator belongs to the user. A period of
  // 65,521 (a prime, so no row of any width repeats its neighbour) of golden-ratio steps in ±0.02, tiled on the
  // device in the model's dtype: milliseconds, no float32 copy of the whole.
  constexpr int64_t kPeriod = 65521;
  const int64_t count = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
  const at::Tensor period = at::arange(kPeriod, at::TensorOptions().dtype(at::kDouble).device(device))
                                .mul_(0.6180339887498949)
                                .frac_()
                                .sub_(0.5)
                                .mul_(0.04)
                                .to(dtype);
  return period.repeat({(count + kPeriod - 1) / kPeriod}).narrow(0, 0, count).view(shape);
}

}  // namespace rlloop
