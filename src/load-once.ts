// A value loaded once and shared by every later caller, unless the load failed: then the next call loads again (a
// failure is the caller's to report, not a state to keep).
export function loadOnce<T>(load: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | null = null;
  return () =>
    (value ??= load().catch((err: unknown) => {
      value = null;
      throw err;
    }));
}
