// A folder's files kept in the object store (rlloop-adapters), so that a daemon on another host (a standby)
// continues from them: the state record's adapters and the lineage it can roll back to name them.
import { z } from "zod";
import { nonNegativeInt, sha256Hex } from "./primitives.js";

export const StoredFolder = z.object({
  bucket: z.string().meta({ description: "object store (rlloop-adapters)" }),
  prefix: z.string().meta({ description: "object names are <prefix>/<file name>" }),
  files: z.array(z.object({ name: z.string(), sha256: sha256Hex(), size: nonNegativeInt() })),
}).meta({ description: "the folder's files in the object store" });
export type StoredFolder = z.infer<typeof StoredFolder>;
