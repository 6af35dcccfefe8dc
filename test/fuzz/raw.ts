import { connect } from 'node:net';

export interface RawAnswer {
  readonly status: number;
  /** Header names lower-cased; repeated headers keep every value. */
  readonly headers: Readonly<Record<string, string[]>>;
  readonly body: string;
}

/**
 * Sends `head` (request line and headers, `\r\n`-separated, without the blank line) and `body`
 * over a fresh TCP connection, byte for byte as given, and reads one response. For what fetch and
 * node:http refuse to send: duplicated or malformed headers, invalid UTF-8, lying Content-Length.
 */
export function rawExchange(port: number, head: string, body: Buffer, timeoutMs = 15_000): Promise<RawAnswer> {
  return new Promise<RawAnswer>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let settled = false;
    const done = (err: Error | undefined, answer?: RawAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err !== undefined) reject(err);
      else resolve(answer!);
    };
    const timer = setTimeout(() => done(new Error(`no complete answer within ${timeoutMs} ms; got ${JSON.stringify(buf.subarray(0, 200).toString('latin1'))}`)), timeoutMs);
    const tryParse = (closed: boolean) => {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        if (closed) done(new Error(`connection closed without an answer; got ${JSON.stringify(buf.toString('latin1'))}`));
        return;
      }
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? NaN);
      const headers: Record<string, string[]> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon <= 0) continue;
        const name = line.slice(0, colon).trim().toLowerCase();
        (headers[name] ??= []).push(line.slice(colon + 1).trim());
      }
      const rest = buf.subarray(end + 4);
      const length = headers['content-length']?.[0];
      if (length !== undefined) {
        if (rest.length >= Number(length)) done(undefined, { status, headers, body: rest.subarray(0, Number(length)).toString('utf8') });
        else if (closed) done(new Error('connection closed in the middle of the body'));
      } else if (closed || headers['transfer-encoding'] === undefined) {
        // No length and not chunked: the body (if any) ends with the connection.
        if (closed) done(undefined, { status, headers, body: rest.toString('utf8') });
      }
    };
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      tryParse(false);
    });
    socket.on('end', () => tryParse(true));
    socket.on('close', () => tryParse(true));
    socket.on('error', (err) => {
      // A reset after a complete answer is fine; before it, it is an error.
      if (buf.indexOf('\r\n\r\n') >= 0) tryParse(true);
      else done(err);
    });
    socket.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), body]));
  });
}
