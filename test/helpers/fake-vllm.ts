// A faithful fake of vLLM's OpenAI-compatible server, limited to the dynamic-LoRA surface the reloader uses:
// GET /v1/models, POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter.
//
// Behaviour follows vLLM's own code (vllm/entrypoints/serve/lora/api_router.py, openai/models/serving.py,
// lora/worker_manager.py, lora/peft_helper.py, lora/lora_model.py; recent main):
// - The two LoRA routes exist only when the server runs with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; otherwise
//   FastAPI answers 404 {"detail":"Not Found"} (`runtimeLoraUpdating: false` here).
// - Success is a 200 with a plain-text body "Success: LoRA adapter '<name>' added successfully." (or "removed").
// - Errors are JSON {"error": {"message", "type", "param", "code"}} with the HTTP status = code:
//   * lora_name or lora_path empty: 400 InvalidUserInput "Both 'lora_name' and 'lora_path' must be provided."
//   * name already loaded without load_inplace: 400 InvalidUserInput "The lora adapter '<n>' has already been
//     loaded. If you want to load the adapter in place, set 'load_inplace' to True."
//   * no adapter_config.json at the path (FileNotFoundError in PEFTHelper.from_local_dir): 404 NotFoundError
//     "Loading lora <n> failed: No adapter found for <path>"
//   * any other load failure (engine add_lora raising): 500 InternalServerError with the exception text (releases
//     before serving.py's move to openai/models/ answered 400 BadRequestError; the reloader treats both as final), e.g.
//     "Missing required configuration fields: {'r'}", "LoRA rank 64 is greater than max_lora_rank 16.",
//     "<dir> doesn't contain tensors", or a safetensors header error.
//   * unload without lora_name: 400 InvalidUserInput; unload of an unknown name: 404 NotFoundError
//     "The lora adapter '<n>' cannot be found."
//   * a body that is not JSON: 400 (FastAPI validation); a content type other than application/json: 415.
// - GET /v1/models lists the base model card then one card per loaded adapter: {id: lora_name, object "model",
//   created, owned_by "vllm", root: lora_path, parent: base model name, max_model_len: null, permission: [...]}.
//
// Test hooks (not part of vLLM): a list of every request received, injected failures (the next N loads answer 503,
// or every request does) to stand in for a replica that is restarting or down, and a restart that forgets the
// loaded adapters.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { readFile, stat } from "node:fs/promises";
import { isAbsolute, join, resolve } from "node:path";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";

export interface FakeVllmOptions {
  /** Served model name, the `parent` of every adapter card. */
  baseModel: string;
  /** Local path of the base model, the `root` of its card. */
  baseModelPath: string;
  maxModelLen: number;
  /** vLLM's --max-lora-rank (default 16). */
  maxLoraRank: number;
  /** VLLM_ALLOW_RUNTIME_LORA_UPDATING: false hides the load/unload routes. */
  runtimeLoraUpdating: boolean;
}

export interface RecordedRequest {
  method: string;
  path: string;
  body: unknown;
  status: number;
}

export interface LoadedLora {
  name: string;
  path: string;
  intId: number;
  createdS: number;
}

export interface FakeVllm {
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Adapters currently loaded, in load order. */
  loaded(): LoadedLora[];
  /** The next `count` requests to the load route answer 503 (a replica busy or restarting). */
  failNextLoads(count: number): void;
  /** Every request answers 503 until called with false (a replica that is down behind its proxy). */
  setUnavailable(down: boolean): void;
  /** Forgets every loaded adapter, as a restarted vLLM does (runtime-loaded adapters do not survive it). */
  restart(): void;
  close(): Promise<void>;
}

const defaultOptions: FakeVllmOptions = {
  baseModel: "Qwen/Qwen3.5-9B",
  baseModelPath: "/models/Qwen3.5-9B",
  maxModelLen: 8192,
  maxLoraRank: 16,
  runtimeLoraUpdating: true,
};

class EngineError extends Error {
  constructor(message: string, readonly status: number, readonly type: string) {
    super(message);
  }
}

type Reply = { status: number; json?: unknown; text?: string };

export async function startFakeVllm(options: Partial<FakeVllmOptions> = {}): Promise<FakeVllm> {
  const opts: FakeVllmOptions = { ...defaultOptions, ...options };
  const loras = new Map<string, LoadedLora>();
  const requests: RecordedRequest[] = [];
  let nextIntId = 1;
  let failLoads = 0;
  let unavailable = false;

  async function route(method: string, path: string, raw: string, contentType: string): Promise<Reply> {
    if (unavailable) return errorReply(new EngineError("Service Unavailable", 503, "ServiceUnavailableError"));
    if (method === "GET" && path === "/v1/models") return { status: 200, json: modelList(opts, [...loras.values()]) };
    const isLoraRoute = path === "/v1/load_lora_adapter" || path === "/v1/unload_lora_adapter";
    if (method !== "POST" || !isLoraRoute || !opts.runtimeLoraUpdating) return { status: 404, json: { detail: "Not Found" } };
    if (!contentType.toLowerCase().startsWith("application/json")) {
      return errorReply(new EngineError("Unsupported Media Type: Only 'application/json' is allowed", 415, "Unsupported Media Type"));
    }
    const body = parseBody(raw);
    if (body === undefined) return errorReply(new EngineError("JSON decode error", 400, "BadRequestError"));
    if (path === "/v1/load_lora_adapter") {
      if (failLoads > 0) {
        failLoads -= 1;
        return errorReply(new EngineError("Service Unavailable", 503, "ServiceUnavailableError"));
      }
      return load(body);
    }
    return unload(body);
  }

  async function load(body: Record<string, unknown>): Promise<Reply> {
    const name = typeof body.lora_name === "string" ? body.lora_name : "";
    const path = typeof body.lora_path === "string" ? body.lora_path : "";
    if (!name || !path) {
      return errorReply(new EngineError("Both 'lora_name' and 'lora_path' must be provided.", 400, "InvalidUserInput"));
    }
    const inplace = body.load_inplace === true;
    if (!inplace && loras.has(name)) {
      return errorReply(new EngineError(
        `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
        400, "InvalidUserInput"));
    }
    try {
      await validateAdapterDir(name, path, opts.maxLoraRank);
    } catch (err) {
      if (err instanceof EngineError) return errorReply(err);
      throw err;
    }
    const intId = loras.get(name)?.intId ?? nextIntId++;
    loras.set(name, { name, path, intId, createdS: Math.floor(Date.now() / 1000) });
    return { status: 200, text: `Success: LoRA adapter '${name}' added successfully.` };
  }

  function unload(body: Record<string, unknown>): Reply {
    const name = typeof body.lora_name === "string" ? body.lora_name : "";
    if (!name) {
      return errorReply(new EngineError("'lora_name' needs to be provided to unload a LoRA adapter.", 400, "InvalidUserInput"));
    }
    if (!loras.has(name)) return errorReply(new EngineError(`The lora adapter '${name}' cannot be found.`, 404, "NotFoundError"));
    loras.delete(name);
    return { status: 200, text: `Success: LoRA adapter '${name}' removed successfully.` };
  }

  const server: Server = createServer((req, res) => {
    void handle(req, res);
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const method = req.method ?? "GET";
    const path = new URL(req.url ?? "/", "http://fake").pathname;
    let reply: Reply;
    try {
      reply = await route(method, path, raw, req.headers["content-type"] ?? "");
    } catch (err) {
      reply = errorReply(new EngineError(String(err), 500, "InternalServerError"));
    }
    requests.push({ method, path, body: parseBody(raw) ?? raw, status: reply.status });
    send(res, reply);
  }

  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    loaded: () => [...loras.values()],
    failNextLoads: (count) => { failLoads = count; },
    setUnavailable: (down) => { unavailable = down; },
    restart: () => loras.clear(),
    close: () => new Promise<void>((done, fail) => {
      server.closeAllConnections();
      server.close((err) => (err ? fail(err) : done()));
    }),
  };
}

/** The checks vLLM's worker runs before an adapter is accepted (PEFTHelper + LoRAModel.from_local_checkpoint). */
async function validateAdapterDir(name: string, lora_path: string, maxLoraRank: number): Promise<void> {
  // vLLM resolves a relative path against its working directory (get_adapter_absolute_path).
  const dir = isAbsolute(lora_path) ? lora_path : resolve(lora_path);
  const config = await readAdapterConfig(dir);
  if (config === undefined) {
    throw new EngineError(`Loading lora ${name} failed: No adapter found for ${lora_path}`, 404, "NotFoundError");
  }
  const missing = ["r", "lora_alpha", "target_modules"].filter((key) => !(key in config));
  if (missing.length > 0) {
    // Python prints the set of missing names, e.g. {'r', 'lora_alpha'}.
    throw new EngineError(`Missing required configuration fields: {${missing.map((k) => `'${k}'`).join(", ")}}`, 500, "InternalServerError");
  }
  const problems: string[] = [];
  if (Array.isArray(config.modules_to_save) && config.modules_to_save.length > 0) problems.push("vLLM only supports modules_to_save being None.");
  if (config.use_dora === true) problems.push("vLLM does not yet support DoRA.");
  if (typeof config.r === "number" && config.r > maxLoraRank) problems.push(`LoRA rank ${config.r} is greater than max_lora_rank ${maxLoraRank}.`);
  if (config.bias !== undefined && config.bias !== "none") problems.push("Adapter bias is not supported.");
  if (problems.length > 0) throw new EngineError(problems.join(" "), 500, "InternalServerError");
  await checkTensors(dir);
}

async function readAdapterConfig(dir: string): Promise<Record<string, unknown> | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, "adapter_config.json"), "utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch (err) {
    throw new EngineError(`Expecting value: ${(err as Error).message}`, 500, "InternalServerError");
  }
  throw new EngineError("adapter_config.json is not a JSON object", 500, "InternalServerError");
}

/** adapter_model.safetensors must exist and carry a readable safetensors header (8-byte LE length + JSON). */
async function checkTensors(dir: string): Promise<void> {
  const file = join(dir, "adapter_model.safetensors");
  const exists = await stat(file).then((s) => s.isFile(), () => false);
  if (!exists) throw new EngineError(`${dir} doesn't contain tensors`, 500, "InternalServerError");
  const bytes = await readFile(file);
  const headerLength = bytes.length >= 8 ? Number(bytes.readBigUInt64LE(0)) : -1;
  if (headerLength < 0 || 8 + headerLength > bytes.length) {
    throw new EngineError("Error while deserializing header: HeaderTooLarge", 500, "InternalServerError");
  }
  try {
    JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
  } catch {
    throw new EngineError("Error while deserializing header: InvalidHeaderDeserialization", 500, "InternalServerError");
  }
}

function modelList(opts: FakeVllmOptions, loras: LoadedLora[]): unknown {
  const now = Math.floor(Date.now() / 1000);
  const base = card(opts.baseModel, opts.baseModelPath, null, opts.maxModelLen, now);
  const adapters = loras.map((l) => card(l.name, l.path, opts.baseModel, null, l.createdS));
  return { object: "list", data: [base, ...adapters] };
}

function card(id: string, root: string, parent: string | null, maxModelLen: number | null, created: number): unknown {
  return {
    id, object: "model", created, owned_by: "vllm", root, parent, max_model_len: maxModelLen,
    permission: [{
      id: `modelperm-${randomUUID().replaceAll("-", "")}`, object: "model_permission", created,
      allow_create_engine: false, allow_sampling: true, allow_logprobs: true, allow_search_indices: false,
      allow_view: true, allow_fine_tuning: false, organization: "*", group: null, is_blocking: false,
    }],
  };
}

function errorReply(err: EngineError): Reply {
  return { status: err.status, json: { error: { message: err.message, type: err.type, param: null, code: err.status } } };
}

function parseBody(raw: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(raw);
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((done, fail) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => done(Buffer.concat(chunks).toString("utf8")));
    req.on("error", fail);
  });
}

function send(res: ServerResponse, reply: Reply): void {
  if (reply.json !== undefined) {
    res.writeHead(reply.status, { "content-type": "application/json" });
    res.end(JSON.stringify(reply.json));
  } else {
    // vLLM returns Response(content=str) without a media type.
    res.writeHead(reply.status);
    res.end(reply.text ?? "");
  }
}
