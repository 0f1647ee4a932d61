// Gradient checkpointing of one decoder layer: the forward keeps only the layer's input; backward recomputes the
// layer with autograd on and back-propagates through the recomputation (PyTorch's reentrant checkpoint).
// Gradients of the layer's trainable LoRA tensors are returned through the custom autograd node, so they
// accumulate into the masters' .grad exactly as without checkpointing.
#pragma once
#include <vector>

#include "model/decoder_layer.h"

namespace rlloop {

// `trainable`: the LoRA tensors of this layer that require grad (may be empty when only x needs a gradient).
at::Tensor checkpointed_layer_forward(const DecoderLayer& layer, const at::Tensor& x, const LayerInputs& in,
                                      const std::vector<at::Tensor>& trainable);

}  // namespace rlloop
