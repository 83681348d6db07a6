/** A commander argParser for `--<name> <n>`: a whole number of at least `min` (`_` separators allowed), or an error naming the flag and the value. */
export const wholeArg =
  (name: string, min: number) =>
  (value: string): number => {
    const n = Number(value.replace(/_/g, ''));
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number of at least ${min}, got ${value}`);
    return n;
  };
