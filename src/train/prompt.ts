// The user prompt of a row, from a Jinja template over {name, memory}. The seed called its own bt_prompt(name,
// memory); that text is the user's, so rlloop takes a template (--prompt FILE, or the daemon's config) and ships a
// neutral default. Rendered with @huggingface/jinja, the engine that renders the chat template.
import { readFile } from "node:fs/promises";
import { Template } from "@huggingface/jinja";
import { TrainInputError } from "./errors.js";

/**
 * The default prompt: names the target and, when the row has memory (two 0/1 strings), lists both.
 * For name "red cup" and memory ["0110", "1"] it renders
 *   "Target: red cup\nMemory: 0110 1\nWrite the behaviour code."
 * and without memory "Target: red cup\nWrite the behaviour code.".
 */
export const DEFAULT_PROMPT_TEMPLATE =
  "Target: {{ name }}\n{% if memory %}Memory: {{ memory[0] }} {{ memory[1] }}\n{% endif %}Write the behaviour code.";

export interface PromptInput {
  name: string;
  memory?: readonly [string, string] | undefined;
}

export type PromptRenderer = (input: PromptInput) => string;

export function compilePrompt(template: string, source = "prompt template"): PromptRenderer {
  let compiled: Template;
  try {
    compiled = new Template(template);
  } catch (err) {
    throw new TrainInputError(`${source}: not a valid Jinja template (${(err as Error).message})`, { cause: err });
  }
  return ({ name, memory }) => compiled.render({ name, memory: memory ? [...memory] : undefined });
}

/** The template in `path`, or the default when no path is given. */
export async function loadPrompt(path: string | undefined): Promise<PromptRenderer> {
  if (path === undefined) return compilePrompt(DEFAULT_PROMPT_TEMPLATE, "default prompt template");
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new TrainInputError(`--prompt ${path}: cannot read (${(err as NodeJS.ErrnoException).code ?? err})`, {
      cause: err,
    });
  }
  return compilePrompt(text, `--prompt ${path}`);
}
