// On the GPU machine, what the CPU suite cannot reach of the native module's CUDA side (one GPU):
// 1. A CUDA model holds its tf32 / attention choice for its life: a second CUDA model with another choice is
//    refused naming both, one with the same choice loads, and deltaRuleCheck with the other tf32 is refused.
// 2. NCCL through c10d's ProcessGroupNCCL, a group of one rank: allReduce sum and mean give back the input,
//    barrier completes, close. (Two ranks need two GPUs: one rank a GPU, NCCL refuses two on one device.)
// Prints one JSON line a check and exits 1 when any fails. Usage: node bench/gpu/native_cuda_checks.mjs TINY_MODEL
import getPort from "get-port";
import { Model, ProcessGroup, deltaRuleCheck } from "../../dist/native.js";

const [tinyModel] = process.argv.slice(2);
let failed = 0;
const report = (check, ok, detail = {}) => {
  if (!ok) failed++;
  console.log(JSON.stringify({ check, ok, ...detail }));
};
const rejection = async (promise) => promise.then(() => null, (e) => e);

const first = await Model.load(tinyModel, { device: "cuda:0", dtype: "bfloat16", tf32: "on" });
const other = await rejection(Model.load(tinyModel, { device: "cuda:0", dtype: "float32", tf32: "off" }));
report("a CUDA model with tf32 off beside one with tf32 on is refused, naming both", !!other && /tf32 on/.test(other.message) && /tf32 off/.test(other.message), { code: other?.code, message: other?.message });
const cudnn = await rejection(Model.load(tinyModel, { device: "cuda:0", dtype: "bfloat16", tf32: "on", attention: "cudnn" }));
report("a CUDA model with attention cudnn beside one with flash is refused", !!cudnn && /cudnn/.test(cudnn.message), { message: cudnn?.message });
const same = await rejection(Model.load(tinyModel, { device: "cuda:0", dtype: "float32", tf32: "on" }));
report("a CUDA model with the same choice loads beside it", same === null, { message: same?.message });
const cpu = await rejection(Model.load(tinyModel, { device: "cpu", dtype: "float32", tf32: "off" }));
report("a CPU model with another choice loads beside it (the settings are CUDA's)", cpu === null, { message: cpu?.message });
let check = null;
try {
  deltaRuleCheck({ device: "cuda:0", dim: 128, tf32: false });
} catch (e) {
  check = e;
}
report("deltaRuleCheck with tf32 off is refused while the tf32-on model is open", !!check && /tf32/.test(check.message), { message: check?.message });
void first; // open (and holding its claim) until here

const port = await getPort({ host: "127.0.0.1" });
const group = await ProcessGroup.init({ backend: "nccl", rank: 0, worldSize: 1, masterAddr: "127.0.0.1", masterPort: port, device: "cuda:0", timeoutS: 60 });
const data = Float32Array.from([1, -2.5, 3e5, 7]);
const sum = await group.allReduce(data, "sum");
const mean = await group.allReduce(data, "mean");
report("NCCL allReduce sum and mean of one rank give back the input", [...sum].join() === [...data].join() && [...mean].join() === [...data].join(), { sum: [...sum], mean: [...mean] });
await group.barrier();
report("NCCL barrier completes", true);
await group.close();
report("NCCL group closes", true);
process.exit(failed ? 1 : 0);
