import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { isPublicAddress, sendWebhook, urlProblem } from '../../shared/webhook-sender.js';
import type { DeliveryDoc } from '../../shared/webhook-outbox.js';
import { deliveryBackoffMs, supersedes } from '../../worker/webhook-delivery.js';

describe('webhook targets (SSRF guard)', () => {
  it('refuses loopback, private, link-local, shared, reserved and multicast IPv4 addresses', () => {
    for (const a of ['127.0.0.1', '127.255.0.9', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255', '192.0.2.1', '198.18.0.1']) {
      expect(isPublicAddress(a), a).to.equal(false);
    }
  });

  it('refuses the same in IPv6, IPv4-mapped addresses by their IPv4 address, translation prefixes and the IPv4-compatible ::/96', () => {
    for (const a of ['::1', '::', 'fe80::1', 'fd12:3456::1', 'fc00::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '64:ff9b::a00:1', '2002:7f00:1::1', '2001::1', '::7f00:1', '::127.0.0.1', '::808:808']) {
      expect(isPublicAddress(a), a).to.equal(false);
    }
  });

  it('allows global unicast addresses, mapped ones too', () => {
    for (const a of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8']) {
      expect(isPublicAddress(a), a).to.equal(true);
    }
  });

  it('is not fooled by text that is not an address', () => {
    for (const a of ['', 'localhost', '127.1', '0x7f000001', '2130706433', '::ffff:127.0.0.1%eth0', '8.8.8.8 ']) expect(isPublicAddress(a), a).to.equal(false);
  });

  it('takes https:// URLs only, and no literal private address, unless insecure is allowed', () => {
    const strict = { allowInsecure: false };
    expect(urlProblem('https://hooks.example.com/x', strict)).to.equal(undefined);
    expect(urlProblem('https://8.8.8.8/x', strict)).to.equal(undefined);
    expect(urlProblem('http://hooks.example.com/x', strict)).to.equal('must be an https:// URL');
    expect(urlProblem('ftp://hooks.example.com/x', strict)).to.equal('must be an https:// URL');
    for (const u of ['https://127.0.0.1/x', 'https://2130706433/x', 'https://0x7f.1/x', 'https://[::1]/x', 'https://[::ffff:127.0.0.1]/x', 'https://[::127.0.0.1]/x', 'https://169.254.169.254/latest', 'https://10.0.0.1:8443/']) {
      expect(urlProblem(u, strict), u).to.equal('must not point to a loopback, private or link-local address');
    }
    const insecure = { allowInsecure: true };
    expect(urlProblem('http://127.0.0.1:8080/x', insecure)).to.equal(undefined);
    expect(urlProblem('ftp://127.0.0.1/x', insecure)).to.equal('must be an https:// URL');
    expect(urlProblem('not a url', insecure)).to.equal('is not a URL');
  });
});

describe('sendWebhook', () => {
  it('checks the address a host name resolves to at delivery and never connects to a refused one', async () => {
    let connections = 0;
    const server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const port = (server.address() as AddressInfo).port;
    try {
      const outcome = await sendWebhook({ url: `https://localhost:${port}/hook`, secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}` }, { id: 'evt_1', timestamp: new Date(), body: '{}' }, { allowInsecure: false, timeoutMs: 2_000 });
      expect(outcome).to.deep.equal({ ok: false, error: 'url localhost resolves to no public address' });
      expect(connections).to.equal(0);
    } finally {
      server.close();
    }
  });
});

describe('webhook delivery backoff', () => {
  it('doubles from the base up to the cap, each delay between half and all of it', () => {
    const at = (n: number, r: number) => deliveryBackoffMs(n, 5_000, 3_600_000, () => r);
    expect([1, 2, 3, 4].map((n) => at(n, 0.999999999))).to.deep.equal([5_000, 10_000, 20_000, 40_000]);
    expect([1, 2, 3, 4].map((n) => at(n, 0))).to.deep.equal([2_500, 5_000, 10_000, 20_000]);
    expect(at(11, 0.999999999)).to.equal(3_600_000);
    expect(at(500, 0)).to.equal(1_800_000);
  });
});

describe('webhook delivery: which delivered later event of a record supersedes an older one', () => {
  const ev = (event_type: DeliveryDoc['event_type'], subject_id?: string) => ({ event_type, ...(subject_id === undefined ? {} : { subject_id }) });

  it('a later version of the same response, or a later event of the record itself, supersedes an older one', () => {
    expect(supersedes(ev('response.updated', 'rsp_a'), ev('response.created', 'rsp_a'))).to.equal(true);
    expect(supersedes(ev('response.updated', 'rsp_a'), ev('response.updated', 'rsp_a'))).to.equal(true);
    expect(supersedes(ev('record.completed', 'rec_1'), ev('record.completed', 'rec_1'))).to.equal(true);
  });

  it('an event about another response, or about the record, is never superseded by a response\'s later event: it is sent, not lost', () => {
    expect(supersedes(ev('response.updated', 'rsp_b'), ev('response.created', 'rsp_a')), 'another annotator\'s response').to.equal(false);
    expect(supersedes(ev('response.created', 'rsp_b'), ev('response.updated', 'rsp_a'))).to.equal(false);
    expect(supersedes(ev('response.updated', 'rsp_a'), ev('record.created', 'rec_1')), 'the record\'s fields').to.equal(false);
  });

  it('record.completed holds the record and every response: a later one supersedes them, an older one is superseded by any of them', () => {
    expect(supersedes(ev('record.completed', 'rec_1'), ev('response.updated', 'rsp_a'))).to.equal(true);
    expect(supersedes(ev('record.completed', 'rec_1'), ev('record.created', 'rec_1'))).to.equal(true);
    expect(supersedes(ev('response.updated', 'rsp_a'), ev('record.completed', 'rec_1')), 'it would put rsp_a back to an older version').to.equal(true);
  });

  it('deliveries of earlier releases (no subject) keep the order by record', () => {
    expect(supersedes(ev('response.updated', undefined), ev('response.created', 'rsp_a'))).to.equal(true);
    expect(supersedes(ev('response.updated', 'rsp_b'), ev('response.created', undefined))).to.equal(true);
  });

  it('response.erased neither supersedes nor is superseded by events of anything else, only by those of its own response', () => {
    expect(supersedes(ev('response.erased', 'rsp_a'), ev('response.created', 'rsp_b')), 'another response is not dropped').to.equal(false);
    expect(supersedes(ev('response.updated', 'rsp_b'), ev('response.erased', 'rsp_a')), 'an erasure is not dropped for another response').to.equal(false);
    expect(supersedes(ev('record.completed', 'rec_1'), ev('response.erased', 'rsp_a'))).to.equal(false);
    expect(supersedes(ev('response.created', undefined), ev('response.erased', 'rsp_a')), 'an event of an earlier release').to.equal(false);
    expect(supersedes(ev('response.erased', 'rsp_a'), ev('response.created', 'rsp_a')), 'its own response\'s older version is not sent after it').to.equal(true);
    expect(supersedes(ev('response.created', 'rsp_a'), ev('response.erased', 'rsp_a')), 'a later version of its response (a write after the erasure) went first').to.equal(true);
  });
});
