// The base model's files a recipe reads besides its weights (tokenizer.json, the chat template, the image
// processor's options), read once per process that holds the model: they belong to the loaded model, which does not
// change under a resident rank, and building the tokenizer alone blocks the JS thread for ~1 s with Qwen3.5's real
// vocabulary (`tokenizers`' fromFile on the 2-core dev machine) — on every round's critical path when read per job.
// A read that failed is not kept: the next job reads again (and reports its own error).
import { loadOnce } from "../load-once.js";
import { loadChatTemplate, type ChatTemplate } from "./chat-template.js";
import { loadImageOptions } from "./images.js";
import type { ImageProcessorOptions } from "../native.js";
import { loadTokenizer, type TextTokenizer } from "./tokenizer.js";

export interface CollatorAssets {
  chatTemplate: ChatTemplate;
  tokenizer: TextTokenizer;
  imageOptions: ImageProcessorOptions;
}

export class ModelAssets {
  readonly collator: () => Promise<CollatorAssets>;

  constructor(readonly dir: string) {
    this.collator = loadOnce(() => loadCollatorAssets(dir));
  }
}

async function loadCollatorAssets(modelDir: string): Promise<CollatorAssets> {
  const [chatTemplate, tokenizer, imageOptions] = await Promise.all([
    loadChatTemplate(modelDir),
    loadTokenizer(modelDir),
    loadImageOptions(modelDir),
  ]);
  return { chatTemplate, tokenizer, imageOptions };
}
