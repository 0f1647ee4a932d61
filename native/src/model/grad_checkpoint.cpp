#include "model/grad_checkpoint.h"

#include <c10/core/GradMode.h>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

namespace rlloop {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Arguments of apply(), in order: layer (not a tensor), adapter name (not a tensor), cos, sin, padding mask
// (optional: an undefined tensor cannot be an autograd input), x,
// trainable tensors. backward returns one entry per argument (undefined for the non-differentiable ones).
struct LayerCheckpoint : public torch::autograd::Function<LayerCheckpoint> {
  static at::Tensor forward(AutogradContext* ctx, int64_t layer_address, std::string adapter, at::Tensor cos,
                            at::Tensor sin, std::optional<at::Tensor> mask_arg, at::Tensor x,
                            at::TensorList trainable) {
    at::Tensor mask = mask_arg.has_value() ? *mask_arg : at::Tensor();
    ctx->saved_data["layer"] = layer_address;
    ctx->saved_data["adapter"] = adapter;
    ctx->saved_data["has_mask"] = mask.defined();
    std::vector<at::Tensor> saved = {x, cos, sin, mask.defined() ? mask : at::Tensor()};
    saved.insert(saved.end(), trainable.begin(), trainable.end());
    ctx->save_for_backward(saved);
    const auto* layer = reinterpret_cast<const DecoderLayer*>(layer_address);  // NOLINT: owned by the model
    LayerInputs in{{cos, sin}, mask, adapter.empty() ? nullptr : &adapter};
    return layer->forward(x, in);  // autograd is off inside Function::forward: nothing is kept
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list saved = ctx->get_saved_variables();
    const auto* layer = reinterpret_cast<const DecoderLayer*>(ctx->saved_data["layer"].toInt());
    std::string adapter = ctx->saved_data["adapter"].toStringRef();
    at::Tensor mask = ctx->saved_data["has_mask"].toBool() ? saved[3] : at::Tensor();
    std::vector<at::Tensor> trainable(saved.begin() + 4, saved.end());

    c10::AutoGradMode grad_on(true);
    at::Tensor x = saved[0].detach().requires_grad_(true);
    LayerInputs in{{saved[1], saved[2]}, mask, adapter.empty() ? nullptr : &adapter};
    at::Tensor out = layer->forward(x, in);

    variable_list wrt = {x};
    wrt.insert(wrt.end(), trainable.begin(), trainable.end());
    variable_list grads = torch::autograd::grad({out}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    variable_list result = {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), grads[0]};
    result.insert(result.end(), grads.begin() + 1, grads.end());
    return result;
  }
};

}  // namespace

at::Tensor checkpointed_layer_forward(const DecoderLayer& layer, const at::Tensor& x, const LayerInputs& in,
                                      const std::vector<at::Tensor>& trainable) {
  return LayerCheckpoint::apply(reinterpret_cast<int64_t>(&layer), in.adapter ? *in.adapter : std::string(),
                                in.rotary.cos, in.rotary.sin,
                                in.padding_mask.defined() ? std::optional<at::Tensor>(in.padding_mask) : std::nullopt, x, at::TensorList(trainable));
}

}  // namespace rlloop
