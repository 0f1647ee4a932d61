// The package's version, from package.json (read the same from src/ under tsx and from the compiled dist/).
import { createRequire } from "node:module";

export const PACKAGE_VERSION: string = (createRequire(import.meta.url)("../package.json") as { version: string }).version;
