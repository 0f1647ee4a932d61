// Text to token ids with the checkpoint's tokenizer.json, through `tokenizers` (the Node binding of the Rust
// library transformers uses), so ids equal the Python processor's by construction. Special tokens such as
// <|image_pad|> are added tokens of tokenizer.json and come out as single ids; no BOS/EOS is added (Qwen has none).
import { access } from "node:fs/promises";
import { join } from "node:path";
import tokenizers from "tokenizers";
import { TrainInputError } from "./errors.js";

export interface TextTokenizer {
  encode(text: string): Promise<Int32Array>;
  /** The id of a token that must exist (a special token), else an error naming it. */
  idOf(token: string): number;
  decode(ids: ArrayLike<number>): Promise<string>;
}

export async function loadTokenizer(modelDir: string): Promise<TextTokenizer> {
  const path = join(modelDir, "tokenizer.json");
  try {
    await access(path);
  } catch (err) {
    throw new TrainInputError(`--model ${modelDir}: no tokenizer.json`, { cause: err });
  }
  let tokenizer: tokenizers.Tokenizer;
  try {
    tokenizer = tokenizers.Tokenizer.fromFile(path);
  } catch (err) {
    throw new TrainInputError(`${path}: cannot load (${(err as Error).message})`, { cause: err });
  }
  return {
    async encode(text) {
      const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
      return Int32Array.from(encoding.getIds());
    },
    idOf(token) {
      const id = tokenizer.tokenToId(token);
      if (id === null || id === undefined) throw new TrainInputError(`${path}: has no token ${token}`);
      return id;
    },
    decode: (ids) => tokenizer.decode(Array.from(ids), false),
  };
}
