#include "lora/group.h"

#include "lora/matmul.h"

namespace rlloop {

LoraLinearGroup::LoraLinearGroup(const WeightScope& scope, const std::vector<LinearSpec>& members, int64_t in_features)
    : in_features_(in_features), out_features_(0) {
  members_.reserve(members.size());
  std::vector<at::Tensor> weights;
  for (const LinearSpec& m : members) {
    members_.emplace_back(scope, m.name, m.out_features, in_features);
    sizes_.push_back(m.out_features);
    out_features_ += m.out_features;
    weights.push_back(members_.back().weight());
  }
  weight_ = at::cat(weights, 0);
  weights.clear();
  int64_t row = 0;
  for (LoraLinear& m : members_) {
    m.rebind_weight(weight_.narrow(0, row, m.out_features()));  // the loaded copy is freed here
    row += m.out_features();
  }
}

std::vector<LoraLinear*> LoraLinearGroup::linears() {
  std::vector<LoraLinear*> out;
  for (LoraLinear& m : members_) out.push_back(&m);
  return out;
}

at::Tensor LoraLinearGroup::forward(const at::Tensor& x, const std::string* adapter) const {
  std::vector<const LoraWeights*> loras;
  size_t attached = 0;
  for (const LoraLinear& m : members_) {
    loras.push_back(adapter ? m.find(*adapter) : nullptr);
    attached += loras.back() != nullptr;
  }
  if (attached == 0) return at::linear(x, weight_);
  if (attached < members_.size()) {  // an adapter on some members only (its target_modules name them): one by one
    std::vector<at::Tensor> parts;
    for (const LoraLinear& m : members_) parts.push_back(m.forward(x, adapter));
    return at::cat(parts, -1);
  }
  std::vector<at::Tensor> as, bs;
  for (size_t i = 0; i < members_.size(); ++i) {
    auto [a, b] = LoraLinear::factors(*loras[i], x.scalar_type());
    as.push_back(a);
    bs.push_back(b);
  }
  // B's zero blocks add (members − 1)·r multiply-adds an output (48 for the four GDN projections at r = 16, ~1% of
  // the base product's 4096), in forward and again in backward's dy·b and b's gradient (whose off-diagonal blocks
  // block_diag's backward drops): cheaper than a narrow GEMM a member.
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = out_features_;
  return lora_matmul(x.reshape({-1, in_features_}), weight_, at::cat(as, 0), at::block_diag(bs)).view(out_shape);
}

std::vector<at::Tensor> LoraLinearGroup::forward_split(const at::Tensor& x, const std::string* adapter) const {
  return forward(x, adapter).split_with_sizes(sizes_, -1);
}

}  // namespace rlloop
