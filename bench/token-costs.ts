// What authentication costs per request on one core, API key against browser feedback token:
//
//   npx tsx bench/token-costs.ts [--rounds 5] [--iterations 20000]
//
// Times, in process and without HTTP, createKeyVerifier().verify for a known key (the API-key
// path, which does nothing more when tokens are enabled), the JWS-shape test a bearer that is no
// key goes through, and a feedback token's mint and verify (jose, HS256). Prints the median of
// the rounds per operation.
import { parseArgs } from 'node:util';
import { createFeedbackTokens, looksLikeFeedbackToken } from '../api/feedback-tokens.js';
import { createKeyVerifier } from '../api/key-verifier.js';
import { loadConfig } from '../shared/config.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, iterations: { type: 'string', default: '20000' } } });
const rounds = Number(values.rounds);
const iterations = Number(values.iterations);

const config = loadConfig({ API_KEYS: 'chatbot:chatbot-secret-key-0001,annotator:annotator-secret-key-0002', ID_SIGNING_SECRETS: 'bench-signing-secret-0123456789' });
const keys = createKeyVerifier(config.apiKeys);
const tokens = createFeedbackTokens({ secrets: config.idSigningSecrets, defaultTtlSeconds: 900, maxTtlSeconds: 3600 });
const scope = { recordId: 'rec_AZqMbenchbenchbenchbench0123456789ab', userId: 'end-user-77', questions: ['rating', 'comment'], issuedBy: 'chatbot' };
const token = (await tokens.mint(scope)).token;

/** Median time per call of `op` over the rounds, in microseconds. */
async function time(op: () => unknown): Promise<number> {
  for (let i = 0; i < iterations / 10; i++) await op();
  const perCall: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) await op();
    perCall.push(Number(process.hrtime.bigint() - start) / 1000 / iterations);
  }
  perCall.sort((a, b) => a - b);
  return perCall[Math.floor(perCall.length / 2)]!;
}

const rows: [string, number][] = [
  ['API key: verify a known key (2 keys configured)', await time(() => keys.verify('annotator-secret-key-0002'))],
  ['bearer that is no key: JWS-shape test', await time(() => looksLikeFeedbackToken('not-a-key-0000000000'))],
  ['feedback token: JWS-shape test', await time(() => looksLikeFeedbackToken(token))],
  ['feedback token: verify (jose HS256 + claims)', await time(() => tokens.verify(token))],
  ['feedback token: mint', await time(() => tokens.mint(scope))],
];
process.stdout.write(`rounds ${rounds} x ${iterations} iterations, median per call\n`);
for (const [name, us] of rows) process.stdout.write(`${name.padEnd(50)} ${us.toFixed(2).padStart(8)} µs  (${Math.round(1e6 / us).toLocaleString('en-US')}/s)\n`);
