// The wait of a long-running operator command (`rlloop watch`, `rlloop ui`): until the first SIGINT or SIGTERM,
// after which the command closes what it opened and exits 0 (src/cli/exit-codes.ts).

/** Resolves at the first SIGINT or SIGTERM, and stops listening for them. */
export function untilSignal(): Promise<void> {
  return new Promise((done) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      done();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}
