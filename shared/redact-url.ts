import type { Config } from './config.js';
import type { Logger } from './logger.js';

/** Query parameters whose values are credentials (MongoDB's `authMechanismProperties`, `tlsCertificateKeyFilePassword`…). */
const SECRET_PARAM_RE = /pass|secret|token|key|credential|authMechanismProperties/i;

/**
 * A connection URL fit for a log line: the password (or a lone user part, which Redis reads as
 * a password) becomes `***`, as do the values of query parameters that may hold credentials.
 * `redis://:pw@host:6379/0` → `redis://:***@host:6379/0`; `mongodb://user:pw@h1,h2/db` →
 * `mongodb://user:***@h1,h2/db`. Parsed by hand, not with `URL`: MongoDB's host lists are not
 * valid WHATWG hosts.
 */
export function redactUrl(url: string): string {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(url)?.[0];
  if (scheme === undefined) return '***';
  const rest = url.slice(scheme.length);
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
  const tail = authorityEnd === -1 ? '' : rest.slice(authorityEnd);
  const at = authority.lastIndexOf('@');
  let hosts = authority;
  if (at !== -1) {
    const userinfo = authority.slice(0, at);
    const colon = userinfo.indexOf(':');
    hosts = `${colon === -1 ? '***' : `${userinfo.slice(0, colon)}:***`}@${authority.slice(at + 1)}`;
  }
  return scheme + hosts + redactQuery(tail);
}

function redactQuery(tail: string): string {
  const q = tail.indexOf('?');
  if (q === -1) return tail;
  const hash = tail.indexOf('#', q);
  const query = tail.slice(q + 1, hash === -1 ? undefined : hash);
  const params = query.split('&').map((pair) => {
    const eq = pair.indexOf('=');
    return eq !== -1 && SECRET_PARAM_RE.test(pair.slice(0, eq)) ? `${pair.slice(0, eq)}=***` : pair;
  });
  return `${tail.slice(0, q + 1)}${params.join('&')}${hash === -1 ? '' : '#***'}`;
}

/** The start-up line of the API and the worker: which Redis, MongoDB server and database they use (credentials redacted). */
export function logConnections(logger: Logger, config: Pick<Config, 'redisUrl' | 'redisClusterNodes' | 'mongodbUri' | 'mongodbDatabase' | 'queueName'>): void {
  // With REDIS_CLUSTER_NODES, REDIS_URL names no server (only its scheme and credentials are used).
  const redis = config.redisClusterNodes.length > 0 ? `cluster ${config.redisClusterNodes.map((n) => `${n.host}:${n.port}`).join(',')}` : redactUrl(config.redisUrl);
  const mongodb = redactUrl(config.mongodbUri);
  logger.info(
    { redis, mongodb, database: config.mongodbDatabase, queue: config.queueName },
    `using Redis ${redis} (queue ${config.queueName}) and MongoDB ${mongodb} (database ${config.mongodbDatabase})`,
  );
}
