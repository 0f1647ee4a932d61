#include "dist/process_group.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstring>

#include "base/check.h"

namespace rlloop {

namespace {

// Collectives through the TCPStore: every rank posts its bytes under a per-collective key, waits for all ranks'
// keys and sums them in rank order, so every rank computes the bitwise-same result.
class StoreCommunicator : public Communicator {
 public:
  StoreCommunicator(c10d::Store& store, int rank, int world_size) : Communicator(rank, world_size), store_(store) {}

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    at::Tensor mine = t.to(at::kCPU, at::kFloat).contiguous();
    const auto* bytes = static_cast<const uint8_t*>(mine.data_ptr());
    const size_t size = mine.numel() * sizeof(float);
    const std::vector<std::string> keys = post("ar", std::vector<uint8_t>(bytes, bytes + size));
    at::Tensor sum = at::zeros_like(mine);
    for (int r = 0; r < world_size_; ++r) {
      std::vector<uint8_t> theirs = store_.get(keys[r]);
      RLLOOP_CHECK(theirs.size() == size, Invalid,
                   "allReduce: rank " << r << " sent " << theirs.size() / sizeof(float) << " values, rank " << rank_
                                      << " has " << mine.numel() << " (ranks must reduce the same shapes)");
      at::Tensor other = at::empty_like(mine);
      std::memcpy(other.data_ptr(), theirs.data(), size);
      sum.add_(other);
    }
    if (op == ReduceOp::Mean) sum.div_(static_cast<double>(world_size_));
    t.copy_(sum);
  }

  void barrier() override { post("barrier", {1}); }

 private:
  c10d::Store& store_;
  int64_t sequence_ = 0;

  // Posts this rank's value for the next collective and waits until every rank has posted; returns all keys.
  std::vector<std::string> post(const std::string& kind, const std::vector<uint8_t>& value) {
    const int64_t s = sequence_++;
    auto key = [&](int64_t seq, int r) { return "rlloop/" + kind + "/" + std::to_string(seq) + "/" + std::to_string(r); };
    store_.set(key(s, rank_), value);
    std::vector<std::string> keys;
    for (int r = 0; r < world_size_; ++r) keys.push_back(key(s, r));
    store_.wait(keys);
    // Every rank has finished reading collective s-1 before posting s: our key of s-1 can go.
    if (s > 0) store_.deleteKey(key(s - 1, rank_));
    return keys;
  }
};

}  // namespace

ProcessGroup::ProcessGroup(const GroupOptions& options) : options_(options) {
  RLLOOP_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size, Invalid,
               "process group: rank " << options.rank << " is outside [0, worldSize = " << options.world_size << ")");
  RLLOOP_CHECK(options.backend == "gloo" || options.backend == "nccl", Invalid,
               "process group: backend must be \"gloo\" or \"nccl\", got \"" << options.backend << "\"");
  RLLOOP_CHECK(options.master_port > 0 && options.master_port < 65536, Invalid,
               "process group: masterPort " << options.master_port << " is not a TCP port");
  const bool cuda = options.device.rfind("cuda:", 0) == 0;
  RLLOOP_CHECK(options.backend == "nccl" ? cuda : options.device == "cpu", Invalid,
               "process group: backend " << options.backend << " needs device "
                                         << (options.backend == "nccl" ? "cuda:N" : "cpu") << ", got " << options.device);
  guarded("rendezvous", [&] {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.master_port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = static_cast<size_t>(options.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
    store_ = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    if (cuda) {
      comm_ = make_nccl_communicator(store_, options.rank, options.world_size, std::stoi(options.device.substr(5)),
                                     store_options.timeout);
    } else {
      comm_ = std::make_unique<StoreCommunicator>(*store_, options.rank, options.world_size);
    }
  });
}

ProcessGroup::~ProcessGroup() = default;

template <typename F>
void ProcessGroup::guarded(const char* operation, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    RLLOOP_FAIL(Io, "rank " << options_.rank << " of " << options_.world_size << ": " << operation << " failed: " << e.detail());
  } catch (const c10::Error& e) {
    RLLOOP_FAIL(Io, "rank " << options_.rank << " of " << options_.world_size << ": " << operation
                            << " failed: " << e.what_without_backtrace());
  } catch (const std::exception& e) {
    RLLOOP_FAIL(Io, "rank " << options_.rank << " of " << options_.world_size << ": " << operation << " failed: " << e.what());
  }
}

void ProcessGroup::all_reduce(at::Tensor& t, ReduceOp op) {
  std::lock_guard<std::mutex> lock(mutex_);
  RLLOOP_CHECK(comm_, Invalid, "process group of rank " << options_.rank << " is closed");
  const std::string what = "allReduce #" + std::to_string(sequence_++);
  guarded(what.c_str(), [&] { comm_->all_reduce(t, op); });
}

void ProcessGroup::barrier() {
  std::lock_guard<std::mutex> lock(mutex_);
  RLLOOP_CHECK(comm_, Invalid, "process group of rank " << options_.rank << " is closed");
  const std::string what = "barrier #" + std::to_string(sequence_++);
  guarded(what.c_str(), [&] { comm_->barrier(); });
}

void ProcessGroup::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  comm_.reset();
  store_.reset();
}

}  // namespace rlloop
