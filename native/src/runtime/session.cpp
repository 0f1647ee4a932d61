#include "runtime/session.h"

#include "diagnostics/backward_timeline.h"
#include "diagnostics/profiler.h"

#include <c10/core/GradMode.h>

#include <ATen/detail/CUDAHooksInterface.h>

#include "base/check.h"
#include "lora/peft_files.h"

namespace rlloop {

at::Device parse_device(const std::string& text) {
  if (text == "cpu") return at::Device(at::kCPU);
  RLLOOP_CHECK(text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.find_first_not_of("0123456789", 5) == std::string::npos,
               Invalid, "device must be \"cpu\" or \"cuda:N\", got \"" << text << "\"");
  const int index = std::stoi(text.substr(5));
  const int count = at::detail::getCUDAHooks().deviceCount();
  RLLOOP_CHECK(index < count, NotFound,
               "device " << text << " is not available (" << count << " CUDA device(s) visible"
                         << (count == 0 ? "; a CPU-only build sees none: rebuild with npm run build:native on the GPU machine" : "")
                         << ")");
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

at::ScalarType parse_dtype(const std::string& text) {
  if (text == "float32") return at::kFloat;
  if (text == "bfloat16") return at::kBFloat16;
  RLLOOP_FAIL(Invalid, "dtype must be \"float32\" or \"bfloat16\", got \"" << text << "\"");
}

ModelSession::ModelSession(const std::string& dir, const LoadOptions& options)
    : dir_(dir),
      model_(dir, parse_dtype(options.dtype), parse_device(options.device), options.model),
      adapters_(model_.lora_linears()),
      upload_stream_(DeviceUpload::side_stream(model_.device())) {}

std::vector<std::string> ModelSession::module_paths() {
  std::vector<std::string> out;
  for (LoraLinear* l : model_.lora_linears()) out.push_back(l->path());
  return out;
}

std::shared_ptr<PreparedBatch> ModelSession::prepare(const std::vector<RowInput>& rows) {
  return std::make_shared<PreparedBatch>(
      prepare_batch(rows, model_.config(), model_.dtype(), model_.device(), model_.id(), &model_.vision_cache(), upload_stream_));
}

const std::string* ModelSession::checked_adapter(const std::string* adapter) const {
  if (adapter) adapters_.record(*adapter);  // throws for an unknown name
  return adapter;
}

at::Tensor ModelSession::token_logprobs(const at::Tensor& logits, const PreparedBatch& batch) const {
  // As the seed: logits (model dtype) -> float32 -> log_softmax, gathered at the targets.
  return logits.to(at::kFloat).log_softmax(-1).gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1);
}

LogprobsResult ModelSession::logprobs(PreparedBatch& batch, const std::string* adapter) {
  c10::NoGradGuard no_grad;
  ForwardOptions options;
  options.adapter = checked_adapter(adapter);
  at::Tensor logits = model_.forward(batch, options).logits;
  at::Tensor logp = token_logprobs(logits, batch);
  at::Tensor correct = (logits.argmax(-1) == batch.targets).to(at::kByte);
  return {logp.cpu(), correct.cpu()};
}

BackwardResult ModelSession::backward(PreparedBatch& batch, const Objective& objective) {
  const std::string* trainable = adapters_.trainable();
  RLLOOP_CHECK(trainable, Invalid, "backward needs a trainable adapter: call setTrainable(name) first");
  c10::AutoGradMode grad_on(true);
  const std::shared_ptr<BackwardTimeline> timeline = BackwardTimeline::begin(model_.device());  // null unless asked
  ForwardOptions options;
  options.adapter = trainable;
  at::Tensor logp;
  size_t recomputed_layers = 0;
  {  // the forward's output read for its log-probs and count, then dropped (the graph keeps what the backward needs)
    ForwardOutput forward = model_.forward(batch, options);
    recomputed_layers = forward.recomputed_layers;
    logp = token_logprobs(forward.logits, batch);
  }
  ObjectiveResult r = std::holds_alternative<SftObjective>(objective)
                          ? sft_objective(logp, std::get<SftObjective>(objective))
                          : ppo_objective(logp, std::get<PpoObjective>(objective));
  ProfileRange range("backward");
  if (timeline) timeline->start();
  r.loss.backward();
  if (timeline) timeline->finish();
  BackwardResult out;
  out.loss = r.loss.item<double>();
  out.recomputed_layers = static_cast<int64_t>(recomputed_layers);
  out.logp = logp.detach().cpu();
  if (r.pg.defined()) {
    out.pg = r.pg.detach().cpu();
    out.kl = r.kl.detach().cpu();
    out.ratio = r.ratio.detach().cpu();
  }
  return out;
}

InspectResult ModelSession::inspect(PreparedBatch& batch, const std::string* adapter) {
  c10::NoGradGuard no_grad;
  ForwardOptions options;
  options.adapter = checked_adapter(adapter);
  options.record_hidden_states = true;
  ForwardOutput fwd = model_.forward(batch, options);
  InspectResult out;
  if (batch.vision_features.defined()) {
    at::Tensor all = batch.vision_features.to(at::kFloat).cpu();
    int64_t offset = 0;
    for (int64_t n : batch.image_tokens) {
      out.vision_features.push_back(all.narrow(0, offset, n).contiguous());
      offset += n;
    }
  }
  out.position_ids = batch.position_ids.cpu();
  for (const at::Tensor& h : fwd.hidden_states) out.hidden_states.push_back(h.to(at::kFloat).cpu().contiguous());
  out.logits = fwd.logits.to(at::kFloat).cpu().contiguous();
  return out;
}

void ModelSession::save_adapter(const std::string& name, const std::string& dir, const std::vector<DirectoryWriter>& beside) {
  save_peft_adapter(adapters_, name, dir, dir_, beside);
}

void ModelSession::load_adapter(const std::string& name, const std::string& dir) {
  load_peft_adapter(adapters_, name, dir, model_.device());
}

}  // namespace rlloop
