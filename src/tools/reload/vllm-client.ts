// A typed client of one vLLM replica's dynamic-LoRA API (server started with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True):
// POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter, GET /v1/models. Errors are classified once here:
// `transient` (unreachable, timed out, 408/429/502/503/504) is worth a retry; anything else is an answer that
// will not change (a bad adapter is a 500 in vLLM, a missing path a 404, a duplicate name a 400).

export interface ModelCard {
  id: string;
  object: string;
  root: string | null;
  parent: string | null;
}

/** The replica could not be reached or did not answer in time. */
export class VllmUnreachableError extends Error {
  override name = "VllmUnreachableError";
  readonly transient = true;
  constructor(readonly replica: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The replica answered with an error status; `type` and the message are vLLM's. */
export class VllmHttpError extends Error {
  override name = "VllmHttpError";
  readonly transient: boolean;
  constructor(readonly replica: string, readonly status: number, readonly type: string, message: string) {
    super(message);
    this.transient = TRANSIENT_STATUS.has(status);
  }
}

const TRANSIENT_STATUS = new Set([408, 429, 502, 503, 504]);

export const isTransient = (err: unknown): boolean =>
  (err instanceof VllmUnreachableError || err instanceof VllmHttpError) && err.transient;

/** vLLM refuses a second load of a name without load_inplace; the reloader treats it as "already there". */
export const isAlreadyLoaded = (err: unknown): boolean =>
  err instanceof VllmHttpError && err.status === 400 && /has already been loaded/.test(err.message);

/** Unloading a name vLLM does not know is a 404: the goal (not loaded) is reached. */
export const isUnknownAdapter = (err: unknown): boolean => err instanceof VllmHttpError && err.status === 404;

export interface VllmClientOptions {
  /** per request; loading an adapter reads it from disk onto the GPU, allow for that */
  timeoutMs: number;
  /** sent as `Authorization: Bearer` when the server runs with --api-key */
  apiKey: string | null;
}

export class VllmClient {
  readonly replica: string;
  constructor(baseUrl: string, private readonly opts: VllmClientOptions) {
    this.replica = baseUrl.replace(/\/+$/, "");
  }

  /** Registers `name` from a local adapter directory. Never in place: a versioned name per round. */
  async load(name: string, path: string): Promise<string> {
    return this.post("/v1/load_lora_adapter", { lora_name: name, lora_path: path });
  }

  async unload(name: string): Promise<string> {
    return this.post("/v1/unload_lora_adapter", { lora_name: name });
  }

  async models(): Promise<ModelCard[]> {
    const text = await this.request("GET", "/v1/models");
    const body = parseJson(text) as { data?: unknown } | undefined;
    if (!body || !Array.isArray(body.data)) {
      throw new VllmHttpError(this.replica, 200, "InvalidResponse", `GET /v1/models answered without a data list: ${text.slice(0, 200)}`);
    }
    return body.data.map((card: Record<string, unknown>) => ({
      id: String(card.id),
      object: String(card.object),
      root: typeof card.root === "string" ? card.root : null,
      parent: typeof card.parent === "string" ? card.parent : null,
    }));
  }

  private post(path: string, body: Record<string, unknown>): Promise<string> {
    return this.request("POST", path, JSON.stringify(body));
  }

  private async request(method: "GET" | "POST", path: string, body?: string): Promise<string> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    let response: Response;
    try {
      response = await fetch(this.replica + path, { method, headers, body, signal: AbortSignal.timeout(this.opts.timeoutMs) });
    } catch (cause) {
      const why = cause instanceof Error && cause.name === "TimeoutError" ? `no answer within ${this.opts.timeoutMs} ms` : describeNetworkError(cause);
      throw new VllmUnreachableError(this.replica, `${method} ${this.replica}${path}: ${why}`, { cause });
    }
    const text = await response.text();
    if (response.ok) return text;
    const { type, message } = errorBody(text);
    throw new VllmHttpError(this.replica, response.status, type, `${method} ${path} answered ${response.status} ${type}: ${message}`);
  }
}

/** vLLM errors are {"error": {message, type, code}}; FastAPI's own are {"detail": ...}; proxies send text. */
function errorBody(text: string): { type: string; message: string } {
  const body = parseJson(text) as { error?: { message?: unknown; type?: unknown }; detail?: unknown } | undefined;
  if (body?.error && typeof body.error.message === "string") {
    return { type: typeof body.error.type === "string" ? body.error.type : "Error", message: body.error.message };
  }
  if (body?.detail !== undefined) return { type: "HTTPException", message: typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail) };
  return { type: "Error", message: text.slice(0, 500) || "(empty body)" };
}

function describeNetworkError(cause: unknown): string {
  // undici reports "fetch failed" with the socket error (ECONNREFUSED, ENOTFOUND...) as its cause
  const inner = cause instanceof Error && cause.cause instanceof Error ? cause.cause : cause;
  return inner instanceof Error ? inner.message : String(inner);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
