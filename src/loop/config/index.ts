// The daemon's configuration: schema (defaults and meanings), loading, hash.
export * from "./hash.js";
export * from "./load.js";
export * from "./schema.js";
export * from "./redact.js";
