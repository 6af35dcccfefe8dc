import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Config } from '../../shared/config.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A CLI of scripts/ (`scripts/keys-main.ts`, …) as a real child process, through tsx as
 * `npm run` runs it, with the environment `config` was loaded from (`apiKeys` is the API_KEYS text).
 */
export async function runCli(script: string, args: readonly string[], config: Config, apiKeys: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    PATH: process.env['PATH'] ?? '',
    HOME: process.env['HOME'] ?? '',
    MONGODB_URI: config.mongodbUri,
    REDIS_URL: config.redisUrl,
    QUEUE_NAME: config.queueName,
    API_KEYS: apiKeys,
    ID_SIGNING_SECRETS: config.idSigningSecrets.join(','),
    QUEUE_COMPRESSION: config.queueCompression,
    LOG_LEVEL: 'silent',
  };
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script, ...args], { cwd: ROOT, env, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number') throw err;
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}
