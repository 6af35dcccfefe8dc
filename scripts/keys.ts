import { ApiKeyAdminError, type ApiKeyAdmin, type ApiKeySummary } from '../shared/api-keys.js';
import { parseCommandLine, type CliOutput } from './cli.js';

const KEYS_USAGE = `usage: npm run keys -- <command>
  create --name NAME [--datasets a,b] [--read] [--admin] [--rate-limit-per-minute N]
         prints the new key's secret, once; it is stored only as a SHA-256 digest
         --read: may read its datasets (GET /feedback-record, /datasets/...); without it, write-only
         --admin: may call /admin/... and read every dataset
  list [--all] [--json]     active keys (with --all, revoked ones too); never secrets
  revoke NAME               the API stops accepting the key within API_KEYS_REFRESH_MS`;

/** `write`, `write+read`, `write+admin`…: what the key may do besides writing to its datasets. */
function scopes(key: ApiKeySummary): string {
  return ['write', ...(key.read ? ['read'] : []), ...(key.admin ? ['admin'] : [])].join('+');
}

function describe(key: ApiKeySummary): string {
  return [
    key.name,
    key.datasets === null ? 'any' : key.datasets.join(','),
    scopes(key),
    key.rate_limit_per_minute === null ? 'default' : `${key.rate_limit_per_minute}/min`,
    key.created_at.toISOString(),
    key.revoked_at === null ? 'active' : `revoked ${key.revoked_at.toISOString()}`,
  ].join('\t');
}

/**
 * `npm run keys -- …` without the process around it (scripts/keys-main.ts opens MongoDB and
 * calls this), so tests can run it against a real database. Returns the exit code: 0 done,
 * 1 refused (name taken, no such key), 2 usage.
 */
export async function runKeysCommand(argv: readonly string[], admin: ApiKeyAdmin, io: CliOutput): Promise<number> {
  const parsed = parseCommandLine(argv, {
    name: { type: 'string' },
    datasets: { type: 'string' },
    admin: { type: 'boolean', default: false },
    read: { type: 'boolean', default: false },
    'rate-limit-per-minute': { type: 'string' },
    all: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  }, KEYS_USAGE, io);
  if (parsed === undefined) return 2;
  const { command, values, positionals } = parsed;
  try {
    switch (command) {
      case 'create': {
        if (values.name === undefined || positionals.length > 0) break;
        const limit = values['rate-limit-per-minute'];
        if (limit !== undefined && !/^\d+$/.test(limit)) throw new ApiKeyAdminError('--rate-limit-per-minute must be a whole number');
        const { secret, key } = await admin.create({
          name: values.name,
          datasets: values.datasets === undefined ? null : values.datasets.split(',').map((d) => d.trim()).filter((d) => d.length > 0),
          admin: values.admin,
          read: values.read,
          ...(limit === undefined ? {} : { rateLimitPerMinute: Number(limit) }),
        });
        io.out(`created key "${key.name}": datasets ${key.datasets === null ? 'any' : key.datasets.join(',')}, scopes ${scopes(key)}, rate limit ${key.rate_limit_per_minute ?? 'default'}`);
        io.out(`secret: ${secret}`);
        io.out('This secret is shown once and is not stored anywhere: give it to its user now (Authorization: Bearer <secret>).');
        return 0;
      }
      case 'list': {
        if (positionals.length > 0) break;
        const keys = await admin.list({ includeRevoked: values.all });
        if (values.json) {
          io.out(JSON.stringify(keys));
        } else {
          io.out(['name', 'datasets', 'scope', 'rate_limit', 'created_at', 'state'].join('\t'));
          for (const key of keys) io.out(describe(key));
        }
        return 0;
      }
      case 'revoke': {
        const [name] = positionals;
        if (name === undefined || positionals.length > 1) break;
        await admin.revoke(name);
        io.out(`revoked key "${name}"; API processes stop accepting it within API_KEYS_REFRESH_MS`);
        return 0;
      }
      default:
        break;
    }
  } catch (err) {
    if (!(err instanceof ApiKeyAdminError)) throw err;
    io.err(`error: ${err.message}`);
    return 1;
  }
  io.err(KEYS_USAGE);
  return 2;
}
