// Process groups for multi-rank training (docs/native-api.md "Process groups"): ranks meet through a c10d
// TCPStore (rank 0 hosts it). On CUDA devices the collectives use NCCL through c10d's ProcessGroupNCCL
// (dist/nccl_communicator.cpp); on the CPU they go through the store itself: the PyPI wheel ships Gloo's symbols
// but not its headers, and the CPU path only serves CI's tiny models, for which a store round trip per collective
// is plenty.
// Every rank must issue the same collectives in the same order; a collective whose peer is gone fails after the
// timeout with an error naming this rank and the operation.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace rlloop {

struct GroupOptions {
  std::string backend;  // "gloo" (store-based, CPU) or "nccl"
  int rank = 0, world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::string device;   // "cpu" or "cuda:N"
  double timeout_s = 600;
};

enum class ReduceOp { Sum, Mean };

class Communicator {
 public:
  virtual ~Communicator() = default;
  // In place on `t` (float32, contiguous, on this group's device).
  virtual void all_reduce(at::Tensor& t, ReduceOp op) = 0;
  virtual void barrier() = 0;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 protected:
  Communicator(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  int rank_, world_size_;
};

class ProcessGroup {
 public:
  explicit ProcessGroup(const GroupOptions& options);  // rendezvous; blocks until every rank has joined
  ~ProcessGroup();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  const GroupOptions& options() const { return options_; }

  // Serialised: the model workers and the group's own worker may both call in.
  void all_reduce(at::Tensor& t, ReduceOp op);
  void barrier();
  void close();

 private:
  GroupOptions options_;
  std::mutex mutex_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<Communicator> comm_;
  int64_t sequence_ = 0;

  template <typename F>
  void guarded(const char* operation, F&& body);
};

// dist/nccl_communicator.cpp: c10d's ProcessGroupNCCL; collectives past `timeout` fail. CUDA builds only.
std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int world_size, int device_index, std::chrono::milliseconds timeout);

}  // namespace rlloop
