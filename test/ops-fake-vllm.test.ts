// The fake vLLM must answer like vLLM's dynamic-LoRA API (status codes, error bodies, /v1/models cards), since the
// reloader's tests are only as good as it. Messages are asserted exactly, as vLLM's code writes them.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startFakeVllm, type FakeVllm } from "./helpers/fake-vllm.js";
import { writeAdapterDir } from "./helpers/lora-adapter.js";

let vllm: FakeVllm;
let root: string;

beforeAll(async () => {
  vllm = await startFakeVllm({ baseModel: "Qwen/Qwen3.5-9B", maxLoraRank: 16 });
  root = await mkdtemp(join(tmpdir(), "rlloop-fake-vllm-"));
});

afterAll(async () => {
  await vllm.close();
  await rm(root, { recursive: true, force: true });
});

async function post(path: string, body: unknown, contentType = "application/json") {
  const res = await fetch(vllm.url + path, { method: "POST", headers: { "content-type": contentType }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) as { error: { message: string; type: string; code: number } } };
}

describe("fake vLLM - dynamic LoRA API", () => {
  test("loads an adapter, lists it in /v1/models with parent and root, unloads it", async () => {
    const dir = join(root, "good");
    await writeAdapterDir(dir, { r: 16, alpha: 32, fill: 0.5 });
    const loaded = await post("/v1/load_lora_adapter", { lora_name: "bt-r1", lora_path: dir });
    expect(loaded).toMatchObject({ status: 200, text: "Success: LoRA adapter 'bt-r1' added successfully." });

    const models = (await (await fetch(`${vllm.url}/v1/models`)).json()) as { object: string; data: Array<Record<string, unknown>> };
    expect(models.object).toBe("list");
    expect(models.data[0]).toMatchObject({ id: "Qwen/Qwen3.5-9B", object: "model", owned_by: "vllm", parent: null });
    expect(models.data[1]).toMatchObject({ id: "bt-r1", object: "model", owned_by: "vllm", root: dir, parent: "Qwen/Qwen3.5-9B", max_model_len: null });

    const unloaded = await post("/v1/unload_lora_adapter", { lora_name: "bt-r1" });
    expect(unloaded).toMatchObject({ status: 200, text: "Success: LoRA adapter 'bt-r1' removed successfully." });
    expect(vllm.loaded()).toEqual([]);
  });

  test("a second load of a name is a 400 that points at load_inplace", async () => {
    const dir = join(root, "dup");
    await writeAdapterDir(dir, { r: 8, alpha: 16, fill: 1 });
    expect((await post("/v1/load_lora_adapter", { lora_name: "dup", lora_path: dir })).status).toBe(200);
    const again = await post("/v1/load_lora_adapter", { lora_name: "dup", lora_path: dir });
    expect(again.status).toBe(400);
    expect(again.json().error).toEqual({
      message: "The lora adapter 'dup' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.",
      type: "InvalidUserInput", param: null, code: 400,
    });
  });

  test("a path without adapter_config.json is a 404 NotFoundError", async () => {
    const missing = join(root, "nowhere");
    const res = await post("/v1/load_lora_adapter", { lora_name: "ghost", lora_path: missing });
    expect(res.status).toBe(404);
    expect(res.json().error).toMatchObject({ message: `Loading lora ghost failed: No adapter found for ${missing}`, type: "NotFoundError", code: 404 });
  });

  const invalid: Array<[string, Parameters<typeof writeAdapterDir>[1], string]> = [
    ["no r in the config", { r: 16, alpha: 32, fill: 0, dropConfigKeys: ["r"] }, "Missing required configuration fields: {'r'}"],
    ["rank above --max-lora-rank", { r: 64, alpha: 128, fill: 0 }, "LoRA rank 64 is greater than max_lora_rank 16."],
    ["no adapter_model.safetensors", { r: 16, alpha: 32, fill: 0, noWeights: true }, "doesn't contain tensors"],
  ];
  test.each(invalid)("an adapter with %s is refused with a 500 naming the problem", async (label, spec, message) => {
    const dir = join(root, label.replaceAll(" ", "-"));
    await writeAdapterDir(dir, spec);
    const res = await post("/v1/load_lora_adapter", { lora_name: label, lora_path: dir });
    expect(res.status).toBe(500);
    expect(res.json().error.type).toBe("InternalServerError");
    expect(res.json().error.message).toContain(message);
  });

  test("a torn safetensors file is refused", async () => {
    const dir = join(root, "torn");
    await writeAdapterDir(dir, { r: 16, alpha: 32, fill: 0 });
    await writeFile(join(dir, "adapter_model.safetensors"), Buffer.from([200, 0, 0, 0, 0, 0, 0, 0, 123]));
    const res = await post("/v1/load_lora_adapter", { lora_name: "torn", lora_path: dir });
    expect(res.status).toBe(500);
    expect(res.json().error.message).toBe("Error while deserializing header: HeaderTooLarge");
  });

  test("unloading an unknown name is a 404; empty names are 400", async () => {
    const res = await post("/v1/unload_lora_adapter", { lora_name: "never-loaded" });
    expect(res.status).toBe(404);
    expect(res.json().error).toMatchObject({ message: "The lora adapter 'never-loaded' cannot be found.", type: "NotFoundError" });
    expect((await post("/v1/unload_lora_adapter", { lora_name: "" })).status).toBe(400);
    const empty = await post("/v1/load_lora_adapter", { lora_name: "x", lora_path: "" });
    expect(empty.status).toBe(400);
    expect(empty.json().error.message).toBe("Both 'lora_name' and 'lora_path' must be provided.");
  });

  test("only JSON bodies are accepted", async () => {
    const res = await post("/v1/load_lora_adapter", { lora_name: "x", lora_path: "/x" }, "text/plain");
    expect(res.status).toBe(415);
  });

  test("without VLLM_ALLOW_RUNTIME_LORA_UPDATING the routes do not exist", async () => {
    const locked = await startFakeVllm({ runtimeLoraUpdating: false });
    try {
      const res = await fetch(`${locked.url}/v1/load_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ detail: "Not Found" });
    } finally {
      await locked.close();
    }
  });
});
