/**
 * Following a cursor from page to page, bounded: a cursor that never runs out (the bug a paging
 * test looks for) fails the test with the count instead of hanging it.
 */
export async function collectPages<T>(
  fetchPage: (cursor: string | null) => Promise<{ items: T[]; next: string | null | undefined }>,
  maxPages = 100,
): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let cursor: string | null = null;
  for (let pages = 1; pages <= maxPages; pages++) {
    const page = await fetchPage(cursor);
    items.push(...page.items);
    cursor = page.next ?? null;
    if (!cursor) return { items, pages };
  }
  throw new Error(`still a next cursor after ${maxPages} pages (${items.length} items so far)`);
}
