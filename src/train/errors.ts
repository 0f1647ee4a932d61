// Errors of the trainer's inputs: a bad flag, a missing file, a row that fails validation, an unreadable image.
// The CLI prints the message as one line and exits non-zero; the resident trainer sends it back to the daemon.

/** A trainer input is wrong; the message names the input (flag, file, line, field) and what was expected. */
export class TrainInputError extends Error {
  override readonly name = "TrainInputError";
}

export function isTrainInputError(err: unknown): err is TrainInputError {
  return err instanceof TrainInputError;
}

/** `String(value)` for messages: JSON where it helps (strings keep their quotes), cut to 60 characters. */
export function shown(value: unknown): string {
  const text = value === undefined ? "nothing" : JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
