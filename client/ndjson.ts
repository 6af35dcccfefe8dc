/**
 * Splits a stream of UTF-8 chunks into NDJSON values, one per non-empty line. A line cut across
 * chunks (or a multi-byte character cut across chunks) is joined before parsing.
 */
export async function* ndjsonValues(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<unknown, void, undefined> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let rest = '';
  for await (const chunk of chunks) {
    rest += decoder.decode(chunk, { stream: true });
    let newline = rest.indexOf('\n');
    while (newline >= 0) {
      const line = rest.slice(0, newline).trim();
      rest = rest.slice(newline + 1);
      if (line !== '') yield JSON.parse(line) as unknown;
      newline = rest.indexOf('\n');
    }
  }
  rest += decoder.decode();
  if (rest.trim() !== '') yield JSON.parse(rest) as unknown;
}
