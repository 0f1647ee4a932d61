"""The bf16 matrix-product rate this GPU gives at the model's own shapes (16 rows x ~420 tokens = 6720 tokens),
next to the 8192^3 reference: the ceiling against which the trainer's GEMM kernels are read."""
import torch

def rate(m, n, k, reps=20):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.nn.functional.linear(a, w)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        torch.nn.functional.linear(a, w)
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / reps
    return ms, 2 * m * n * k / ms / 1e9

for name, (m, n, k) in {"8192^3": (8192, 8192, 8192), "mlp gate/up": (6720, 12288, 4096),
                        "mlp down": (6720, 4096, 12288), "gdn in_proj_qkv": (6720, 8192, 4096),
                        "gdn out_proj": (6720, 4096, 4096)}.items():
    ms, tflops = rate(m, n, k)
    print(f"gemm {name:16s} {m}x{n}x{k}: {ms:.3f} ms, {tflops:.0f} TFLOP/s")
