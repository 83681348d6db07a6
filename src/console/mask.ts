/**
 * Masking of the payload fields the config marks sensitive (`console.sensitiveFields`), done on the
 * server: a masked value never leaves the console, in the page or in the API.
 *
 * A rule without a dot (`email`) masks that key at any depth; a dotted path (`customer.email`, with `*`
 * for any one key) matches from the root. Array items are walked through: `lines.*.sku` and `lines.sku`
 * both reach the `sku` of every line.
 */

/** What a masked value is replaced by. */
export const MASKED = '[masked]';

export interface MaskRules {
  /** Keys masked wherever they appear. */
  anywhere: ReadonlySet<string>;
  /** Paths from the root, split at the dots. */
  paths: ReadonlyArray<readonly string[]>;
}

export function maskRules(fields: readonly string[]): MaskRules {
  const anywhere = new Set<string>();
  const paths: string[][] = [];
  for (const field of fields) {
    const parts = field.split('.').filter((p) => p !== '');
    if (parts.length === 1) anywhere.add(parts[0] as string);
    else if (parts.length > 1) paths.push(parts);
  }
  return { anywhere, paths };
}

export const hasRules = (rules: MaskRules): boolean => rules.anywhere.size > 0 || rules.paths.length > 0;

/** A copy of `value` with every matching field's value replaced by MASKED (and how many were). */
export function maskValue(value: unknown, rules: MaskRules): { value: unknown; masked: number } {
  let masked = 0;
  // `partial`: the paths whose first `depth` parts matched the keys on the way here.
  const walk = (node: unknown, partial: ReadonlyArray<readonly string[]>, depth: number): unknown => {
    if (Array.isArray(node)) return node.map((item) => walk(item, partial, depth));
    if (!node || typeof node !== 'object' || node instanceof Date) return node;
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(node as Record<string, unknown>)) {
      const next = partial.filter((p) => p[depth] === '*' || p[depth] === key);
      if (rules.anywhere.has(key) || next.some((p) => p.length === depth + 1)) {
        out[key] = MASKED;
        masked++;
      } else {
        out[key] = walk(child, next, depth + 1);
      }
    }
    return out;
  };
  return { value: walk(value, rules.paths, 0), masked };
}
