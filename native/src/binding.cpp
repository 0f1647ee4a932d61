// Node-API glue only: the module's exported functions. Placeholder until the model lands.
#include <napi.h>
#include <ATen/ATen.h>

namespace {
Napi::Value TorchVersion(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), std::to_string(at::zeros({2, 3}).numel()));
}
}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("probe", Napi::Function::New(env, TorchVersion));
  return exports;
}
NODE_API_MODULE(rlloop_native, Init)
