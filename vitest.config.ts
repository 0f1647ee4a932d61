import { defineConfig } from "vitest/config";

// Native tests are heavy (libtorch on 2 cores): forks, two at a time, generous timeouts.
// There are no timed assertions in the suites; the timeouts only stop a hung test.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 600_000,
    hookTimeout: 900_000,
  },
});
