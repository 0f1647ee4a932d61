// How this process page-locks host memory for the caching host allocator's pinned blocks (a save's device-to-host
// copies, a rank's reserved save buffers: optim/adamw.h). libtorch's default pins a block with cudaHostAlloc,
// which holds the driver's global lock while it allocates and locks every page, and every other thread's CUDA call
// (the training's kernel launches) waits for it: a rank pinning its save buffers (~0.5 GB at the 9B shapes) on a
// thread of its own stalled the first training steps by ~0.3 s (bench/RESULTS.md). Registered pinning takes
// ordinary memory, faults its pages in on worker threads, and only then registers it with the driver, which holds
// the lock for the registration alone.
#pragma once

namespace rlloop {

// Once per process, before the first CUDA model loads: registered pinning on 8 threads (libtorch keeps a pool of
// 128 register threads for it, idle between allocations), unless the user configured libtorch's allocators
// (PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF set), whose settings are left as they are; a host where a first
// registered block cannot be pinned keeps libtorch's default. Every pinned block takes this path: a batch's
// upload too (runtime/device_upload.h). A no-op in a CPU build.
void configure_pinned_memory();

}  // namespace rlloop
