// Option parsers shared by the operator commands (simulate, reload, watch): each refuses a bad value with the
// flag, the rule and the value, e.g. "--count must be a positive integer, got "0"".
import { InvalidArgumentError } from "commander";

function parser(flag: string, rule: string, accept: (n: number) => boolean) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !accept(n)) throw new InvalidArgumentError(`${flag} must be ${rule}, got ${JSON.stringify(value)}`);
    return n;
  };
}

export const positiveInt = (flag: string) => parser(flag, "a positive integer", (n) => Number.isInteger(n) && n >= 1);
export const nonNegativeInt = (flag: string) => parser(flag, "an integer >= 0", (n) => Number.isInteger(n) && n >= 0);
export const positiveNumber = (flag: string) => parser(flag, "a positive number", (n) => Number.isFinite(n) && n > 0);
export const probability = (flag: string) => parser(flag, "a number in [0, 1]", (n) => Number.isFinite(n) && n >= 0 && n <= 1);

/** Repeatable / variadic string option: collects every value. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];
