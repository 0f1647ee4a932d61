// The checkpoint's chat template, rendered with @huggingface/jinja as transformers' apply_chat_template renders it.
// Source, in the order the seed's processor (transformers 5.17 ProcessorMixin.from_pretrained) reads them: the
// legacy chat_template.json ({"chat_template": "..."}) when present, which then wins even over a
// chat_template.jinja beside it; else chat_template.jinja. Where a checkpoint has neither, the processor has no
// template and the seed fails; rlloop falls back to the `chat_template` of tokenizer_config.json (a string, or a
// list of {name, template} where the one named "default" is used), as a tokenizer's apply_chat_template would.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { TrainInputError } from "./errors.js";

export type ContentItem = { type: "image" } | { type: "text"; text: string };
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string | ContentItem[];
}

export interface ChatTemplate {
  /** apply_chat_template(messages, tokenize=False, ...): vars are passed as the template's globals. */
  render(messages: ChatMessage[], vars?: { add_generation_prompt?: boolean; enable_thinking?: boolean }): string;
  /** A row's text up to the answer: one user turn [image, prompt], generation prompt on, thinking off. */
  renderPrompt(prompt: string): string;
}

export function compileChatTemplate(text: string, source = "chat template"): ChatTemplate {
  let template: Template;
  try {
    template = new Template(text);
  } catch (err) {
    throw new TrainInputError(`${source}: not a valid Jinja template (${(err as Error).message})`, { cause: err });
  }
  const render: ChatTemplate["render"] = (messages, vars = {}) => template.render({ messages, ...vars });
  return {
    render,
    renderPrompt: (prompt) =>
      render([{ role: "user", content: [{ type: "image" }, { type: "text", text: prompt }] }], {
        add_generation_prompt: true,
        enable_thinking: false,
      }),
  };
}

export async function loadChatTemplate(modelDir: string): Promise<ChatTemplate> {
  const legacyPath = join(modelDir, "chat_template.json");
  const legacy = await readOptional(legacyPath);
  if (legacy !== undefined) return compileChatTemplate(templateFromConfig(legacy, legacyPath), `${legacyPath} chat_template`);
  const jinjaPath = join(modelDir, "chat_template.jinja");
  const jinja = await readOptional(jinjaPath);
  if (jinja !== undefined) return compileChatTemplate(jinja, jinjaPath);
  const configPath = join(modelDir, "tokenizer_config.json");
  const configText = await readOptional(configPath);
  if (configText === undefined) {
    throw new TrainInputError(`--model ${modelDir}: no chat template (chat_template.json, chat_template.jinja or tokenizer_config.json)`);
  }
  return compileChatTemplate(templateFromConfig(configText, configPath), `${configPath} chat_template`);
}

function templateFromConfig(text: string, path: string): string {
  let config: { chat_template?: unknown };
  try {
    config = JSON.parse(text) as { chat_template?: unknown };
  } catch (err) {
    throw new TrainInputError(`${path}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const value = config.chat_template;
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    const named = value.find((t: { name?: unknown }) => t?.name === "default") as { template?: unknown } | undefined;
    if (typeof named?.template === "string") return named.template;
  }
  throw new TrainInputError(`${path}: has no chat_template (a string, or a list with one named "default")`);
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new TrainInputError(`${path}: cannot read (${(err as Error).message})`, { cause: err });
  }
}
