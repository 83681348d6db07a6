/** Markdown helpers for the documentation tests. */

/** The text without fenced code blocks and without inline code that holds no link. */
export function withoutCode(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, (m) => (m.includes('](') ? '' : m));
}

/** The #fragments GitHub gives the page's headings. */
export function slugs(markdown: string): Set<string> {
  const out = new Set<string>();
  for (const line of withoutCode(markdown).split('\n')) {
    const m = /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    out.add(
      (m[1] as string)
        .toLowerCase()
        .replace(/`/g, '')
        .replace(/[^\p{L}\p{N}\- _]/gu, '')
        .replace(/ /g, '-'),
    );
  }
  return out;
}
