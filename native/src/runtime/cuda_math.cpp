#include "runtime/cuda_math.h"

#include <ATen/Context.h>

#include <mutex>

#include "base/check.h"

namespace rlloop {
namespace {

std::mutex claims_mutex;
int live_claims = 0;  // guarded by claims_mutex
CudaMath claimed;     // the settings every live claim holds

const char* on_off(bool on) { return on ? "on" : "off"; }

void apply(const CudaMath& math) {
  at::globalContext().setAllowTF32CuBLAS(math.tf32);
  at::globalContext().setSDPUseCuDNN(math.cudnn_attention);
}

}  // namespace

CudaMathClaim::CudaMathClaim(CudaMath wanted) {
  std::lock_guard<std::mutex> lock(claims_mutex);
  RLLOOP_CHECK(live_claims == 0 || claimed == wanted, Invalid,
               "this process holds a CUDA model loaded with tf32 " << on_off(claimed.tf32) << " and attention "
                   << (claimed.cudnn_attention ? "cudnn" : "flash") << "; libtorch keeps both settings per process, so a "
                   << "model with tf32 " << on_off(wanted.tf32) << " and attention " << (wanted.cudnn_attention ? "cudnn" : "flash")
                   << " cannot load beside it: load it in another process (rlloop runs one model a rank process)");
  if (live_claims++ == 0) {
    claimed = wanted;
    apply(wanted);
  }
}

CudaMathClaim::~CudaMathClaim() {
  std::lock_guard<std::mutex> lock(claims_mutex);
  --live_claims;
}

void CudaMathClaim::with_tf32(bool tf32, const std::function<void()>& body) {
  std::unique_lock<std::mutex> lock(claims_mutex);
  RLLOOP_CHECK(live_claims == 0 || claimed.tf32 == tf32, Invalid,
               "cannot run with tf32 " << on_off(tf32) << " while a CUDA model loaded with tf32 " << on_off(claimed.tf32)
                                       << " is open in this process");
  struct Restore {  // the setting as it was, however `body` ends
    bool before = at::globalContext().allowTF32CuBLAS();
    ~Restore() { at::globalContext().setAllowTF32CuBLAS(before); }
  } restore;
  at::globalContext().setAllowTF32CuBLAS(tf32);
  lock.unlock();
  body();
}

}  // namespace rlloop
