/** Keys whose values are secrets wherever they appear in the configuration. */
export const SECRET_KEY = /password|secret|token/i;

/** `scheme://user:password@host` → `scheme://[redacted]@host`: an invalid URL is echoed, its credentials never. */
export function withoutUserinfo(text: string): string {
  return text.replace(/(\/\/)[^/@\s"]*@/g, '$1[redacted]@');
}

/** A copy safe to print or log: every password/secret/token value replaced, and credentials inside URLs. */
export function redactConfig<T>(value: T): T {
  if (typeof value === 'string') return withoutUserinfo(value) as T;
  if (Array.isArray(value)) return value.map(redactConfig) as T;
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, SECRET_KEY.test(k) && v !== undefined ? '[redacted]' : redactConfig(v)]),
    ) as T;
  }
  return value;
}
