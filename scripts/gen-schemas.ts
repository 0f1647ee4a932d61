// Writes what is generated from the zod schemas, so every default and description has one source:
//   schema/*.schema.json    the JSON Schema of every wire format (src/contract/json-schemas.ts) and of the config
//   config/default.json     every default of the daemon's config
//   config/README.md        the field tables between the `<!-- generated: ... -->` markers
// `npx tsx scripts/gen-schemas.ts --check` writes nothing and exits 1 naming every stale file (test/contract-schemas).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { toJsonSchema, WIRE_SCHEMAS } from "../src/contract/json-schemas.js";
import { ConfigSchema, SECTIONS } from "../src/loop/config/schema.js";

const ROOT = join(import.meta.dirname, "..");

type JsonSchema = { properties?: Record<string, JsonSchema>; default?: unknown; description?: string; anyOf?: JsonSchema[] };

export function generatedFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const [name, { title, schema }] of Object.entries(WIRE_SCHEMAS)) files.set(join("schema", name), json(toJsonSchema(title, schema)));
  const config = toJsonSchema("rlloop daemon configuration", ConfigSchema) as JsonSchema;
  files.set(join("schema", "config.schema.json"), json(config));
  const { $schema: _ignored, ...defaults } = ConfigSchema.parse({});
  files.set(join("config", "default.json"), json({ $schema: "../schema/config.schema.json", ...defaults }));
  files.set(join("config", "README.md"), withTables(readFileSync(join(ROOT, "config", "README.md"), "utf8"), config));
  return files;
}

/** The README with each section's table regenerated between its markers. */
function withTables(readme: string, config: JsonSchema): string {
  const props = config.properties ?? {};
  const top = ["workDir"].map((key) => row(key, props[key] as JsonSchema));
  let out = replaceBlock(readme, "top", table(top));
  for (const section of Object.keys(SECTIONS)) {
    const fields = (props[section] as JsonSchema | undefined)?.properties ?? {};
    out = replaceBlock(out, section, table(Object.entries(fields).map(([key, field]) => row(`${section}.${key}`, field))));
  }
  return out;
}

function replaceBlock(text: string, name: string, body: string): string {
  const start = `<!-- generated: ${name} -->`;
  const end = `<!-- end: ${name} -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`config/README.md has no ${start} … ${end} block`);
  return `${text.slice(0, from + start.length)}\n${body}\n${text.slice(to)}`;
}

function table(rows: string[]): string {
  return ["| field | default | meaning |", "|---|---|---|", ...rows].join("\n");
}

function row(path: string, field: JsonSchema): string {
  const shown = field.default === undefined ? "–" : `\`${JSON.stringify(field.default)}\``;
  return `| \`${path}\` | ${shown} | ${(field.description ?? "").replaceAll("|", "\\|")} |`;
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

if (import.meta.url === `file://${process.argv[1]}`) {
  const check = process.argv.includes("--check");
  const stale: string[] = [];
  for (const [file, text] of generatedFiles()) {
    const path = join(ROOT, file);
    let current: string | null = null;
    try {
      current = readFileSync(path, "utf8");
    } catch {
      current = null;
    }
    if (current === text) continue;
    stale.push(file);
    if (!check) writeFileSync(path, text);
  }
  if (check && stale.length > 0) {
    process.stderr.write(`stale generated files (run: npx tsx scripts/gen-schemas.ts): ${stale.join(", ")}\n`);
    process.exit(1);
  }
  process.stdout.write(stale.length === 0 ? "generated files are current\n" : `${check ? "stale" : "wrote"}: ${stale.join(", ")}\n`);
}
