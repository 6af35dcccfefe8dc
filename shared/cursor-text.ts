/*
 * The text of the opaque cursors of the paged lists (records of a dataset, datasets, dead
 * letters): base64url of a small JSON array. Not signed: a tampered cursor only moves the position
 * inside a list the key may read anyway. Each list checks the array's contents itself.
 */

export function encodeCursorText(parts: readonly unknown[]): string {
  return Buffer.from(JSON.stringify(parts), 'utf8').toString('base64url');
}

/** The array a cursor holds, or undefined when `text` is not one this service could have made. */
export function decodeCursorText(text: string): unknown[] | undefined {
  if (!/^[A-Za-z0-9_-]{1,2048}$/.test(text)) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    return Array.isArray(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}
