// Training rows (jsonl), the seed's format: one JSON object a line.
//   sft: {image, name, code, memory?}        ppo: + {adv, vllm_logp}
// `image` is a PNG path (relative paths resolve against the working directory, as in the seed), `code` the policy's
// digits, `memory` the two 0/1 strings of the decision's prompt. Unknown fields are ignored. Every row of one file
// must have the same code length: the seed scores the last len(code) + 1 tokens of each row of a batch.
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { z } from "zod";
import { TrainInputError, shown } from "./errors.js";

const bits = z.string({ error: "must be a string of 0/1 characters" }).regex(/^[01]*$/, "must be a string of 0/1 characters");

export const SftRowSchema = z.object({
  image: z.string().min(1, "must be a non-empty path"),
  name: z.string(),
  code: z.string().regex(/^[0-9]+$/, "must be a non-empty string of digits"),
  memory: z.tuple([bits, bits], { error: "must be two strings of 0/1 characters" }).optional(),
});

export const PpoRowSchema = SftRowSchema.extend({
  adv: z.number({ error: "must be a finite number" }),
  vllm_logp: z.number({ error: "must be a finite number" }).max(0, "must be <= 0 (a summed log-probability)"),
});

/** A validated row and the line of the file it came from (1-based), for messages about it later (images). */
export type SftRow = z.infer<typeof SftRowSchema> & { line: number };
export type PpoRow = z.infer<typeof PpoRowSchema> & { line: number };
export type RowKind = "sft" | "ppo";
export type RowOf<K extends RowKind> = K extends "ppo" ? PpoRow : SftRow;

/**
 * Reads and validates a jsonl file; `flag` names the option it came from, for messages. With `imageBase`, relative
 * image paths are resolved against it (the resident trainer's rounds: paths relative to the round folder); without,
 * they stay as written, relative to the working directory as in the seed.
 */
export async function readRows<K extends RowKind>(path: string, kind: K, flag = "--data", imageBase: string | null = null): Promise<RowOf<K>[]> {
  const text = await readText(path, flag);
  const schema = kind === "ppo" ? PpoRowSchema : SftRowSchema;
  const rows: RowOf<K>[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "") continue;
    const row = parseRow(line, schema, `${path} line ${i + 1}`) as SftRow;
    const image = imageBase === null ? row.image : resolve(imageBase, row.image);
    rows.push({ ...row, image, line: i + 1 } as RowOf<K>);
  }
  if (rows.length === 0) throw new TrainInputError(`${flag} ${path}: no rows (the file is empty)`);
  checkCodeLengths(rows, path);
  return rows;
}

async function readText(path: string, flag: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "is a directory" : String(err);
    throw new TrainInputError(`${flag} ${path}: cannot read (${why})`, { cause: err });
  }
}

function parseRow(line: string, schema: z.ZodType, where: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    throw new TrainInputError(`${where}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.path.join(".");
  if (field === "") throw new TrainInputError(`${where}: must be a JSON object, got ${shown(value)}`);
  const got = issue.path.reduce<unknown>((v, key) => (v as Record<PropertyKey, unknown> | undefined)?.[key], value);
  throw new TrainInputError(`${where}: field '${field}' ${issue.message}, got ${shown(got)}`);
}

function checkCodeLengths(rows: SftRow[], path: string): void {
  const first = rows[0]!;
  const bad = rows.find((r) => r.code.length !== first.code.length);
  if (bad === undefined) return;
  throw new TrainInputError(
    `${path} line ${bad.line}: field 'code' has ${bad.code.length} digits but line ${first.line} has ` +
      `${first.code.length} (all rows of a run must share the code length)`,
  );
}
