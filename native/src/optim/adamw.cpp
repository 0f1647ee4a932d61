#include "diagnostics/profiler.h"
#include "optim/adamw.h"

#include <c10/core/GradMode.h>

#include <cmath>
#include <map>

#include "base/check.h"
#include "io/files.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace rlloop {

std::string optimizer_sidecar_path(const std::string& path) {
  const std::string ext = ".safetensors";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + ".json";
  return path + ".json";
}

AdamW::AdamW(std::vector<std::string> keys, std::vector<at::Tensor> params, AdamWOptions options)
    : keys_(std::move(keys)), params_(std::move(params)), options_(options) {
  RLLOOP_CHECK(keys_.size() == params_.size() && !params_.empty(), Internal, "AdamW: keys and params differ or are empty");
  if (params_.front().is_cuda()) {
    int64_t bytes = 0;
    for (const at::Tensor& p : params_) bytes += p.numel() * static_cast<int64_t>(p.element_size());
    // exp_avg and exp_avg_sq (host_state), then the adapter, whose tensors are these params (save_peft_adapter)
    host_reserved_ = std::async(std::launch::async, reserve_host_copies, std::vector<int64_t>{2 * bytes, bytes});
  }
}

void AdamW::ensure_state() {
  if (!exp_avg_.empty()) return;
  for (const at::Tensor& p : params_) {
    exp_avg_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
    exp_avg_sq_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
  }
}

// DDP's rule: every rank applies the update of the averaged gradient.
static void average_over_ranks(std::vector<at::Tensor>& params, const AdamW::Reducer& all_reduce_mean) {
  std::vector<at::Tensor> flat_parts;
  for (at::Tensor& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    flat_parts.push_back(p.grad().reshape({-1}));
  }
  at::Tensor flat = at::cat(flat_parts).contiguous();
  all_reduce_mean(flat);
  int64_t offset = 0;
  for (at::Tensor& p : params) {
    p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

double AdamW::step(double lr, double max_grad_norm, const Reducer& all_reduce_mean) {
  c10::NoGradGuard no_grad;
  ProfileRange range("optimizer");
  ensure_state();
  if (all_reduce_mean) average_over_ranks(params_, all_reduce_mean);
  std::vector<at::Tensor> params, grads, m, v;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& g = params_[i].grad();
    if (!g.defined()) continue;
    params.push_back(params_[i]);
    grads.push_back(g);
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
  }
  RLLOOP_CHECK(!grads.empty(), Invalid, "optimizer step without gradients: run backward first");

  // clip_grad_norm_: total = ||(||g_i||)_i||, grads *= clamp(max / (total + 1e-6), max = 1)
  at::Tensor total = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads, 2)), 2);
  if (max_grad_norm > 0) {
    at::Tensor coef = (max_grad_norm / (total + 1e-6)).clamp_max(1.0);
    at::_foreach_mul_(grads, coef);
  }
  const double grad_norm = total.item<double>();

  ++step_;
  const auto& o = options_;
  const double bias_correction1 = 1.0 - std::pow(o.beta1, static_cast<double>(step_));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(step_)));
  at::_foreach_mul_(params, 1.0 - lr * o.weight_decay);
  at::_foreach_lerp_(m, grads, 1.0 - o.beta1);
  at::_foreach_mul_(v, o.beta2);
  at::_foreach_addcmul_(v, grads, grads, 1.0 - o.beta2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, bias_correction2_sqrt);
  at::_foreach_add_(denom, o.eps);
  at::_foreach_addcdiv_(params, m, denom, -lr / bias_correction1);
  options_.lr = lr;

  for (at::Tensor& p : params_) p.mutable_grad() = at::Tensor();  // set_to_none
  return grad_norm;
}

AdamW::HostState AdamW::host_state() const {
  if (host_reserved_.valid()) host_reserved_.wait();
  NamedTensorList tensors;
  for (size_t i = 0; i < keys_.size(); ++i) {
    tensors.emplace_back(keys_[i] + ".exp_avg", exp_avg_.empty() ? at::zeros_like(params_[i]) : exp_avg_[i]);
    tensors.emplace_back(keys_[i] + ".exp_avg_sq", exp_avg_sq_.empty() ? at::zeros_like(params_[i]) : exp_avg_sq_[i]);
  }
  Json side;
  side["step"] = Json(step_);
  side["lr"] = Json(options_.lr);
  side["betas"] = Json::array({options_.beta1, options_.beta2});
  side["eps"] = Json(options_.eps);
  side["weight_decay"] = Json(options_.weight_decay);
  return HostState{SafetensorsImage(tensors), side.dump(2) + "\n"};
}

void AdamW::HostState::write(const std::string& path) const {
  tensors.write(path);
  write_file_atomic(optimizer_sidecar_path(path), sidecar);
}

void AdamW::save(const std::string& path) const { host_state().write(path); }

void AdamW::load(const std::string& path) {
  const std::string side_path = optimizer_sidecar_path(path);
  Json side = parse_json(read_text_file(side_path), side_path);
  auto field = [&](const char* key) -> const Json& {
    const Json* v = json_member(side, key);
    RLLOOP_CHECK(v, Format, side_path << ": missing field '" << key << "'");
    return *v;
  };
  const int64_t step = json_int(field("step"), "step");
  const auto& betas = json_array(field("betas"), "betas");
  RLLOOP_CHECK(betas.size() == 2, Format, side_path << ": 'betas' must have 2 entries");

  SafetensorsFile file(path);
  // names, shapes and count checked before anything is uploaded
  const auto check_entry = [&](size_t i, const std::string& suffix) {
    const std::string key = keys_[i] + suffix;
    const SafetensorsEntry* e = file.find(key);
    RLLOOP_CHECK(e, NotFound, path << ": missing tensor '" << key << "' (optimizer state of another adapter?)");
    RLLOOP_CHECK(e->shape == params_[i].sizes().vec(), Shape,
                 path << ": tensor '" << key << "' has shape " << shape_string(e->shape) << ", expected "
                      << shape_string(params_[i].sizes()));
  };
  for (size_t i = 0; i < keys_.size(); ++i) {
    check_entry(i, ".exp_avg");
    check_entry(i, ".exp_avg_sq");
  }
  RLLOOP_CHECK(file.entries().size() == 2 * keys_.size(), Invalid,
               path << ": holds " << file.entries().size() << " tensors, the adapter has " << 2 * keys_.size()
                    << " (optimizer state of another adapter?)");
  std::map<std::string, at::Tensor> loaded = file.load_all(at::kFloat, params_.empty() ? at::Device(at::kCPU) : params_.front().device());
  std::vector<at::Tensor> m, v;
  for (size_t i = 0; i < keys_.size(); ++i) {
    m.push_back(std::move(loaded.at(keys_[i] + ".exp_avg")));
    v.push_back(std::move(loaded.at(keys_[i] + ".exp_avg_sq")));
  }
  exp_avg_ = std::move(m);
  exp_avg_sq_ = std::move(v);
  step_ = step;
  options_.beta1 = json_double(betas[0], "betas[0]");
  options_.beta2 = json_double(betas[1], "betas[1]");
  options_.eps = json_double(field("eps"), "eps");
  options_.weight_decay = json_double(field("weight_decay"), "weight_decay");
  options_.lr = json_double(field("lr"), "lr");
}

}  // namespace rlloop
