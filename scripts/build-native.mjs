// Builds native/ (the libtorch Node-API addon) with cmake-js against the libtorch of a Python torch install.
// PyPI's torch is a CUDA build whose TorchConfig.cmake insists on a CUDA toolkit, which CPU machines lack, so
// we do not use find_package(Torch): we ask Python where torch's headers and libraries are and link them directly.
// CUDA is linked when that torch sees a GPU (or RLLOOP_CUDA=1), so the same script builds the CPU variant in CI
// and the CUDA variant on a GPU machine.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function findPython() {
  if (process.env.RLLOOP_PYTHON) return process.env.RLLOOP_PYTHON;
  const envFile = join(root, ".rlloop", "env.json");
  if (existsSync(envFile)) return JSON.parse(readFileSync(envFile, "utf8")).python;
  return "python3";
}

const probe = `
import json, os, torch
from torch.utils import cpp_extension
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
print(json.dumps({
  "version": torch.__version__,
  "include": cpp_extension.include_paths(),
  "lib": lib,
  "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
  "cuda": bool(torch.cuda.is_available()),
  "hasCudaLib": os.path.exists(os.path.join(lib, "libtorch_cuda.so")),
}))`;

const python = findPython();
const torch = JSON.parse(execFileSync(python, ["-c", probe], { encoding: "utf8" }));
const cuda = process.env.RLLOOP_CUDA ? process.env.RLLOOP_CUDA === "1" : torch.cuda && torch.hasCudaLib;
console.log(`[build-native] torch ${torch.version} (${torch.lib}), CUDA ${cuda ? "on" : "off"}`);

const cmakeJs = join(root, "node_modules", ".bin", "cmake-js");
const args = [
  "compile",
  "--directory", join(root, "native"),
  "--out", join(root, "native", "build"),
  `--CDTORCH_INCLUDE_DIRS=${torch.include.join(";")}`,
  `--CDTORCH_LIB_DIR=${torch.lib}`,
  `--CDTORCH_CXX11_ABI=${torch.abi}`,
  `--CDRLLOOP_CUDA=${cuda ? "ON" : "OFF"}`,
  "--config", process.env.RLLOOP_BUILD_TYPE ?? "Release",
];
if (process.env.RLLOOP_JOBS) args.push("--parallel", process.env.RLLOOP_JOBS);
execFileSync(cmakeJs, args, { stdio: "inherit", cwd: root });
