// A training row → the native module's RowInput, as the seed's Collate + processor build it:
//   text   = chat_template([image, prompt(name, memory)], generation prompt, thinking off) + code + "<|im_end|>"
//   ids    = tokenizer(text), each <|image_pad|> repeated gh·gw/merge² times (the processor's expansion)
//   scored = the last len(code) + 1 tokens: the code digits and <|im_end|>
// Batches are right-padded by the native module (model.prepare), so nothing here pads.
import type { ImageInput, ImageProcessorOptions, RowInput } from "../native.js";
import type { CachedFrames } from "./cached-frames.js";
import type { ChatTemplate } from "./chat-template.js";
import { TrainInputError } from "./errors.js";
import { expandImagePads } from "./image-pads.js";
import { readImagePatches } from "./images.js";
import type { ModelAssets } from "./model-assets.js";
import { loadPrompt, type PromptRenderer } from "./prompt.js";
import type { SftRow } from "./rows.js";
import type { TextTokenizer } from "./tokenizer.js";
import type { TrainJob } from "../contract/index.js";

export const END_TOKEN = "<|im_end|>";
export const IMAGE_PAD_TOKEN = "<|image_pad|>";

export interface Collator {
  /** One row; `source` names the data file for messages ("train.jsonl line 4: ..."). */
  row(row: SftRow, source: string): Promise<RowInput>;
  text(row: SftRow): string;
  readonly tokenizer: TextTokenizer;
}

export interface CollatorParts {
  chatTemplate: ChatTemplate;
  tokenizer: TextTokenizer;
  imageOptions: ImageProcessorOptions;
  prompt: PromptRenderer;
  /** When given, frames whose vision features the model holds are sent without pixels (cached-frames.ts). */
  frames?: CachedFrames;
}

export async function loadCollator(assets: ModelAssets, prompt: PromptRenderer, frames?: CachedFrames): Promise<Collator> {
  return makeCollator({ ...(await assets.collator()), prompt, ...(frames ? { frames } : {}) });
}

/** The collator of `job`: the model's assets and the job's prompt (the default one without `--prompt`). */
export async function loadJobCollator(assets: ModelAssets, job: TrainJob, frames?: CachedFrames): Promise<Collator> {
  return loadCollator(assets, await loadPrompt(job.prompt ?? undefined), frames);
}

export function makeCollator({ chatTemplate, tokenizer, imageOptions, prompt, frames }: CollatorParts): Collator {
  const readImage = async (path: string, where: string): Promise<ImageInput> => {
    const key = frames ? await frames.key(path) : null;
    if (key === null) return readImagePatches(path, imageOptions, where);
    const cached = frames!.lookup(key);
    if (cached) return cached;
    const image = await readImagePatches(path, imageOptions, where);
    frames!.remember(key, image.grid);
    return { ...image, cacheKey: key };
  };
  const imagePad = tokenizer.idOf(IMAGE_PAD_TOKEN);
  const end = tokenizer.idOf(END_TOKEN);
  const text = (row: SftRow) => chatTemplate.renderPrompt(prompt(row)) + row.code + END_TOKEN;
  return {
    tokenizer,
    text,
    async row(row, source) {
      const where = `${source} line ${row.line}`;
      const [ids, codeIds, image] = await Promise.all([
        tokenizer.encode(text(row)),
        tokenizer.encode(row.code),
        readImage(row.image, where),
      ]);
      const [, gh, gw] = image.grid;
      const inputIds = expandImagePads(ids, imagePad, [(gh * gw) / imageOptions.mergeSize ** 2], where);
      const scoreCount = row.code.length + 1;
      if (codeIds.length !== row.code.length) {
        throw new TrainInputError(`${where}: the tokenizer splits code '${row.code}' into ${codeIds.length} tokens, not one a digit`);
      }
      checkScoredTail(inputIds, codeIds, end, where);
      return { inputIds, images: [image], scoreStart: inputIds.length - scoreCount, scoreCount };
    },
  };
}

/** The scored tail must be one token per digit (the Qwen3.5 pre-tokenizer splits digits) and <|im_end|>. */
function checkScoredTail(ids: Int32Array, codeIds: Int32Array, end: number, where: string): void {
  const tail = ids.subarray(ids.length - codeIds.length - 1);
  const digitsAlone = codeIds.every((id, i) => tail[i] === id);
  if (tail[tail.length - 1] !== end || !digitsAlone) {
    throw new TrainInputError(`${where}: the code does not tokenize to its own tokens before ${END_TOKEN}`);
  }
}
