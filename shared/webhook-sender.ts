import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { Agent as HttpAgent, request as httpRequest, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Webhook } from 'standardwebhooks';

/*
 * One signed POST of a webhook event (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`), with the SSRF guard:
 * the address connected to is the one checked, resolved at this delivery (no second lookup a
 * DNS rebinding could answer differently), and redirects are never followed.
 */

/**
 * True for an address a delivery may reach: global unicast only. Loopback, private, link-local
 * (cloud metadata at 169.254.169.254), unique-local, carrier-grade NAT, multicast, reserved and
 * unspecified addresses are refused; an IPv4-mapped IPv6 address is judged as its IPv4 address,
 * and translation prefixes (NAT64, 6to4, Teredo) and the IPv4-compatible ::/96 are refused since
 * they may lead anywhere.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const ip = ipaddr.process(address);
  // ::/96, the deprecated IPv4-compatible form (RFC 4291 §2.5.5.1): `[::127.0.0.1]` reaches a URL
  // as `[::7f00:1]`, which ipaddr.js calls unicast; it names an IPv4 address, never a public IPv6 one.
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0)) return false;
  return ip.range() === 'unicast';
}

/** The URL or its address is not allowed (scheme, loopback/private address). */
export class WebhookTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookTargetError';
  }
}

export interface WebhookTargetPolicy {
  /** `WEBHOOKS_ALLOW_INSECURE`: `http://` and any address (development and tests). */
  readonly allowInsecure: boolean;
}

/** Why `url` may not be an endpoint (scheme, literal address), or undefined; the resolved address is checked at delivery. */
export function urlProblem(url: string, policy: WebhookTargetPolicy): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'is not a URL';
  }
  if (u.protocol !== 'https:' && !(policy.allowInsecure && u.protocol === 'http:')) return 'must be an https:// URL';
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!policy.allowInsecure && isIP(host) !== 0 && !isPublicAddress(host)) return 'must not point to a loopback, private or link-local address';
  return undefined;
}

/** A DNS lookup that drops every address the policy refuses, so that the socket connects only to a checked one. */
function guardedLookup(policy: WebhookTargetPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0, hints: options.hints ?? 0 }, (err, addresses: LookupAddress[]) => {
      if (err !== null) return callback(err, '', 0);
      const allowed = policy.allowInsecure ? addresses : addresses.filter((a) => isPublicAddress(a.address));
      if (allowed.length === 0) return callback(Object.assign(new WebhookTargetError(`${hostname} resolves to no public address`), { code: 'EWEBHOOKTARGET' }), '', 0);
      if (options.all === true) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed);
      else callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}

export interface SignedEvent {
  readonly id: string;
  /** The `webhook-timestamp`: when this attempt is sent. */
  readonly timestamp: Date;
  readonly body: string;
}

export type SendOutcome = { readonly ok: true; readonly status: number } | { readonly ok: false; readonly status?: number; readonly error: string };

/** Most bytes of an answer read (then discarded): receivers answer with a status, not a body. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * Idle connections to an endpoint are kept this long and reused: a delivery then costs a request,
 * not a TCP (and TLS) handshake each (a new connection per event was the largest share of a
 * delivery's CPU, 2026-11-26). Shorter than the idle timeouts of common servers and load
 * balancers (Node 5 s, nginx 75 s, AWS ALB 60 s), so that the endpoint rarely closes one under us;
 * the address of a reused connection is the one checked when it was opened.
 */
const IDLE_CONNECTION_MS = 4_000;
const agents = {
  'http:': new HttpAgent({ keepAlive: true, timeout: IDLE_CONNECTION_MS, scheduling: 'lifo' }),
  'https:': new HttpsAgent({ keepAlive: true, timeout: IDLE_CONNECTION_MS, scheduling: 'lifo' }),
} as const;

/** Signs and POSTs one event. Never throws; never logs (the secret and the body stay here). */
export async function sendWebhook(target: { readonly url: string; readonly secret: string }, event: SignedEvent, options: WebhookTargetPolicy & { readonly timeoutMs: number }): Promise<SendOutcome> {
  const problem = urlProblem(target.url, options);
  if (problem !== undefined) return { ok: false, error: `url ${problem}` };
  let signature: string;
  try {
    signature = new Webhook(target.secret).sign(event.id, event.timestamp, event.body);
  } catch (err) {
    return { ok: false, error: `cannot sign: ${(err as Error).message}` };
  }
  const u = new URL(target.url);
  const requestOptions: RequestOptions = {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(event.body),
      'user-agent': 'feedback-ingest-webhooks/1',
      'webhook-id': event.id,
      'webhook-timestamp': String(Math.floor(event.timestamp.getTime() / 1000)),
      'webhook-signature': signature,
    },
    lookup: guardedLookup(options),
    signal: AbortSignal.timeout(options.timeoutMs),
    // Connections are opened through the guarded lookup above and pooled per host and port.
    agent: u.protocol === 'https:' ? agents['https:'] : agents['http:'],
  };
  const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<SendOutcome>((resolve) => {
    const req = send(u, requestOptions, (res) => {
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) res.destroy();
      });
      const status = res.statusCode ?? 0;
      const done = () => resolve(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: `HTTP ${status}` });
      res.on('end', done);
      res.on('close', done);
      res.on('error', () => done());
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      const timedOut = err.name === 'AbortError' || err.name === 'TimeoutError';
      resolve({ ok: false, error: timedOut ? `no answer within ${options.timeoutMs} ms` : err instanceof WebhookTargetError ? `url ${err.message}` : `${err.code ?? err.name}: ${err.message}` });
    });
    req.end(event.body);
  });
}
