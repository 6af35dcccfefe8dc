import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, managed, type ManagedServer } from '../../devkit/servers.js';

/** Paths of a throwaway CA and of a server certificate it signed, for 127.0.0.1 and localhost. */
export interface TestCertificates {
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
}

/**
 * Makes a CA and a server certificate with openssl in `dir`. P-256 keys: generated in
 * milliseconds, unlike RSA. Valid for a day: nothing outlives the run.
 */
export function makeTestCertificates(dir: string): TestCertificates {
  const path = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', path('ca.key'), '-out', path('ca.pem'), '-days', '1', '-subj', '/CN=feedback-ingest throwaway test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  openssl('req', ...ec, '-keyout', path('server.key'), '-out', path('server.csr'), '-subj', '/CN=localhost');
  // Clients connect to 127.0.0.1: Node checks the name it dialled against the subjectAltName.
  writeFileSync(path('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n');
  openssl('x509', '-req', '-in', path('server.csr'), '-CA', path('ca.pem'), '-CAkey', path('ca.key'), '-CAcreateserial', '-out', path('server.pem'), '-days', '1', '-extfile', path('server.ext'));
  return { caCert: path('ca.pem'), serverCert: path('server.pem'), serverKey: path('server.key') };
}

/**
 * A redis-server of our own that speaks TLS only (`--port 0`: no plain-text port), on a free
 * port, with `certs`' server certificate; clients need no certificate of their own. `url` is
 * `rediss://127.0.0.1:<port>`.
 */
export async function startTlsRedis(certs: TestCertificates): Promise<ManagedServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-redis-tls-'));
  const args = [
    '--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1',
    '--tls-cert-file', certs.serverCert, '--tls-key-file', certs.serverKey, '--tls-ca-cert-file', certs.caCert, '--tls-auth-clients', 'no',
    '--dir', dir, '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction',
  ];
  const server = managed(port, `rediss://127.0.0.1:${port}`, dir, () => spawn(process.env['REDIS_SERVER_BIN'] ?? 'redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  await server.start();
  return server;
}
