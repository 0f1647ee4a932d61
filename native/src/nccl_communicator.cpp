// NCCL collectives for CUDA ranks. The unique id travels through the store; all-reduces run on the device's default
// CUDA stream, where every kernel of the model runs, so they are ordered with them.
// Why libnccl is opened at run time with hand-declared prototypes: nccl.h includes cuda_runtime.h, whose crt/
// headers come with the CUDA compiler, not with the pip wheels this build uses; libtorch_cuda has loaded
// libnccl.so.2 already by the time a CUDA model exists. The declarations below mirror nccl.h (NCCL 2.x ABI).
#include "collectives.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>

#include <cstring>

#include "check.h"

namespace rlloop {

namespace {

// --- from nccl.h ---
struct NcclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
using NcclComm = void*;         // ncclComm_t
using NcclResult = int;         // ncclResult_t, ncclSuccess = 0
using CudaStream = void*;       // cudaStream_t; nullptr = the legacy default stream
constexpr int kNcclFloat32 = 7;  // ncclFloat32
constexpr int kNcclSum = 0;      // ncclSum
constexpr int kNcclAvg = 4;      // ncclAvg

struct NcclApi {
  NcclResult (*get_unique_id)(NcclUniqueId*);
  NcclResult (*comm_init_rank)(NcclComm*, int, NcclUniqueId, int);
  NcclResult (*comm_destroy)(NcclComm);
  NcclResult (*all_reduce)(const void*, void*, size_t, int, int, NcclComm, CudaStream);
  const char* (*error_string)(NcclResult);

  static const NcclApi& get() {
    static const NcclApi api = load();
    return api;
  }

 private:
  static NcclApi load() {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libnccl.so.2", RTLD_NOW);
    RLLOOP_CHECK(lib, Unsupported, "cannot load libnccl.so.2 (" << dlerror() << "); NCCL comes with torch's CUDA wheels");
    NcclApi api{};
    auto symbol = [&](const char* name) {
      void* s = dlsym(lib, name);
      RLLOOP_CHECK(s, Unsupported, "libnccl.so.2 lacks " << name);
      return s;
    };
    api.get_unique_id = reinterpret_cast<decltype(api.get_unique_id)>(symbol("ncclGetUniqueId"));
    api.comm_init_rank = reinterpret_cast<decltype(api.comm_init_rank)>(symbol("ncclCommInitRank"));
    api.comm_destroy = reinterpret_cast<decltype(api.comm_destroy)>(symbol("ncclCommDestroy"));
    api.all_reduce = reinterpret_cast<decltype(api.all_reduce)>(symbol("ncclAllReduce"));
    api.error_string = reinterpret_cast<decltype(api.error_string)>(symbol("ncclGetErrorString"));
    return api;
  }
};

void check_nccl(NcclResult result, const char* call) {
  RLLOOP_CHECK(result == 0, Io, call << ": " << NcclApi::get().error_string(result));
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(c10d::Store& store, int rank, int world_size, int device_index)
      : Communicator(rank, world_size), device_(at::kCUDA, static_cast<c10::DeviceIndex>(device_index)) {
    const NcclApi& nccl = NcclApi::get();
    NcclUniqueId id;
    const std::string key = "rlloop/nccl/unique_id";
    if (rank == 0) {
      check_nccl(nccl.get_unique_id(&id), "ncclGetUniqueId");
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      store.set(key, std::vector<uint8_t>(bytes, bytes + sizeof id));
    } else {
      std::vector<uint8_t> bytes = store.get(key);  // waits for rank 0, up to the store's timeout
      RLLOOP_CHECK(bytes.size() == sizeof id, Io, "NCCL unique id from the store has " << bytes.size() << " bytes");
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    c10::DeviceGuard guard(device_);
    check_nccl(nccl.comm_init_rank(&comm_, world_size, id, rank), "ncclCommInitRank");
  }

  ~NcclCommunicator() override {
    if (comm_) NcclApi::get().comm_destroy(comm_);
  }

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    RLLOOP_CHECK(t.device() == device_ && t.scalar_type() == at::kFloat && t.is_contiguous(), Internal,
                 "NCCL allReduce needs a contiguous float32 tensor on " << device_.str());
    c10::DeviceGuard guard(device_);
    // The model never leaves the default stream (id 0), which is CUDA's legacy NULL stream.
    c10::Stream current = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device_);
    RLLOOP_CHECK(current.id() == 0, Internal, "NCCL allReduce expects the default CUDA stream to be current");
    check_nccl(NcclApi::get().all_reduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), kNcclFloat32,
                                         op == ReduceOp::Mean ? kNcclAvg : kNcclSum, comm_, nullptr),
               "ncclAllReduce");
  }

  void barrier() override {
    at::Tensor one = at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(device_));
    all_reduce(one, ReduceOp::Sum);
    one.cpu();  // waits for the collective to finish
  }

 private:
  at::Device device_;
  NcclComm comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(c10d::Store& store, int rank, int world_size, int device_index) {
  return std::make_unique<NcclCommunicator>(store, rank, world_size, device_index);
}

}  // namespace rlloop
