import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MailDispatcher, parseSmtpUrl, sendSmtp, smtpTransport, SmtpError } from '../../services/notify/index.js';
import { queueMail } from '../../services/store/index.js';
import { createLogger, type Clock } from '../../services/shared/index.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { startFakeSmtp, type FakeSmtp } from '../helpers/fake-smtp.js';
import { postgresUp } from '../helpers/services.js';

const message = { from: 'perkline@shop.test', to: 'ada@shop.test', subject: 'Hello', text: 'line one\nline two' };

describe('SMTP client', () => {
  let smtp: FakeSmtp | undefined;
  afterEach(async () => {
    await smtp?.close();
    smtp = undefined;
  });

  it('delivers a message with its headers and body', async () => {
    smtp = await startFakeSmtp();
    await sendSmtp({ ...parseSmtpUrl(smtp.url()), heloName: 'node-1.test' }, message);
    expect(smtp.messages).toHaveLength(1);
    const m = smtp.messages[0]!;
    expect(m).toMatchObject({ helo: 'node-1.test', from: 'perkline@shop.test', to: ['ada@shop.test'], subject: 'Hello', body: 'line one\r\nline two' });
    expect(m.auth).toBeUndefined();
    expect(m.data).toMatch(/^From: perkline@shop\.test\r\nTo: ada@shop\.test\r\n/);
    expect(m.data).toContain('Content-Type: text/plain; charset=utf-8');
  });

  it('dot-stuffs lines that start with a dot, so a lone dot does not end the message early', async () => {
    smtp = await startFakeSmtp();
    const text = 'before\n.\n.hidden\n..two\nafter';
    await sendSmtp(parseSmtpUrl(smtp.url()), { ...message, text });
    const m = smtp.messages[0]!;
    expect(m.body).toBe('before\r\n.\r\n.hidden\r\n..two\r\nafter');
    expect(m.raw).toContain('\r\nbefore\r\n..\r\n..hidden\r\n...two\r\nafter');
  });

  it('authenticates with AUTH PLAIN using the URL-encoded credentials of SMTP_URL', async () => {
    smtp = await startFakeSmtp({ auth: { user: 'mailer@shop.test', password: 'p@ss:w/rd%' } });
    await sendSmtp(parseSmtpUrl(smtp.url('mailer@shop.test', 'p@ss:w/rd%')), message);
    expect(smtp.messages[0]!.auth).toEqual({ user: 'mailer@shop.test', password: 'p@ss:w/rd%' });
    const refused = await sendSmtp(parseSmtpUrl(smtp.url('mailer@shop.test', 'wrong')), message).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SmtpError);
    expect((refused as SmtpError).code).toBe(535);
    // The error names the command, never the credentials it carried.
    expect((refused as Error).message).toMatch(/^AUTH refused: 535/);
    expect((refused as Error).message).not.toContain(Buffer.from('\0mailer@shop.test\0wrong').toString('base64'));
    expect(smtp.messages).toHaveLength(1);
  });

  it('falls back to HELO when the server refuses EHLO', async () => {
    smtp = await startFakeSmtp({ refuseEhlo: true });
    await sendSmtp(parseSmtpUrl(smtp.url()), message);
    expect(smtp.messages[0]!.helo).toBe('localhost');
  });

  it('fails with the reply code when a recipient is refused, and the error carries no body', async () => {
    smtp = await startFakeSmtp({ refuseRcpt: { times: 1, reply: '550 5.1.1 no such user' } });
    const e = await sendSmtp(parseSmtpUrl(smtp.url()), { ...message, text: 'secret-token-123' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SmtpError);
    expect((e as SmtpError).code).toBe(550);
    expect((e as Error).message).toBe('RCPT refused: 550 5.1.1 no such user');
    expect(smtp.messages).toHaveLength(0);
  });

  it('encodes a non-ASCII subject and refuses addresses that could inject commands', async () => {
    smtp = await startFakeSmtp();
    await sendSmtp(parseSmtpUrl(smtp.url()), { ...message, subject: 'Grüße' });
    expect(smtp.messages[0]!.subject).toBe(`=?UTF-8?B?${Buffer.from('Grüße').toString('base64')}?=`);
    await expect(sendSmtp(parseSmtpUrl(smtp.url()), { ...message, to: 'a@b.test>\r\nRCPT TO:<c@d.test' })).rejects.toThrow(/invalid to address/);
    expect(smtp.messages).toHaveLength(1);
  });

  it('reports a server that is not there', async () => {
    const e = await sendSmtp({ host: '127.0.0.1', port: 1, timeoutMs: 2000 }, message).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SmtpError);
    expect((e as Error).message).toMatch(/connection to 127\.0\.0\.1:1 failed/);
  });

  it('parses SMTP_URL with a default port and refuses other schemes', () => {
    expect(parseSmtpUrl('smtp://mail.test')).toEqual({ host: 'mail.test', port: 25 });
    expect(parseSmtpUrl('smtp://u%40x:p%3Aw@mail.test:2525')).toEqual({ host: 'mail.test', port: 2525, user: 'u@x', password: 'p:w' });
    expect(() => parseSmtpUrl('http://mail.test')).toThrow(/SMTP_URL/);
    expect(() => parseSmtpUrl('not a url')).toThrow(/SMTP_URL/);
  });
});

class StepClock implements Clock {
  private t = Date.parse('2026-11-23T12:00:00Z');
  now(): Date {
    return new Date(this.t);
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

async function outboxRow(db: TestDb['db'], id: string) {
  const [row] = await db.query<{ state: string; attempts: number; body: string; last_error: string | null }>(
    `SELECT state, attempts, body, last_error FROM mail_outbox WHERE id = $1`,
    [id],
  );
  return row!;
}

describe('mail dispatcher', () => {
  let t: TestDb;
  let accountId: number;
  let smtp: FakeSmtp | undefined;
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', write: (l) => lines.push(l) });

  beforeAll(async () => {
    t = await createTestDb('pglite');
    const [a] = await t.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Shop') RETURNING id`);
    accountId = a!.id;
  });
  afterAll(async () => {
    await t?.cleanup();
  });
  afterEach(async () => {
    await smtp?.close();
    smtp = undefined;
  });

  const queue = async (clock: StepClock, text: string): Promise<string> => {
    await queueMail(t.db, { accountId, kind: 'test', to: 'ada@shop.test', subject: 'S', text }, clock.now());
    const [row] = await t.db.query<{ id: string }>(`SELECT max(id)::text AS id FROM mail_outbox`);
    return row!.id;
  };

  it('retries a refused mail with doubling backoff, sends it, then blanks its body', async () => {
    smtp = await startFakeSmtp({ refuseRcpt: { times: 2, reply: '451 4.3.0 try later' } });
    const clock = new StepClock();
    const d = new MailDispatcher({ db: t.db, transport: smtpTransport(parseSmtpUrl(smtp.url()), 'perkline@shop.test'), clock, logger, backoffMs: 1000, maxAttempts: 5 });
    const id = await queue(clock, 'token abc-secret');
    expect(await d.runOnce()).toBe(0);
    expect(await outboxRow(t.db, id)).toMatchObject({ state: 'pending', attempts: 1, last_error: 'RCPT refused: 451 4.3.0 try later' });
    // Not due before its backoff (1 s after the first failure).
    clock.advance(999);
    expect(await d.runOnce()).toBe(0);
    expect(smtp.rcptAttempts).toBe(1);
    clock.advance(1);
    expect(await d.runOnce()).toBe(0);
    expect(await outboxRow(t.db, id)).toMatchObject({ state: 'pending', attempts: 2 });
    // The second retry waits twice as long.
    clock.advance(1999);
    expect(await d.runOnce()).toBe(0);
    expect(smtp.rcptAttempts).toBe(2);
    clock.advance(1);
    expect(await d.runOnce()).toBe(1);
    expect(await outboxRow(t.db, id)).toMatchObject({ state: 'sent', attempts: 3, body: '', last_error: null });
    expect(smtp.messages.map((m) => m.body)).toEqual(['token abc-secret']);
    // Sent once: later rounds find nothing.
    clock.advance(3600_000);
    expect(await d.runOnce()).toBe(0);
    expect(smtp.messages).toHaveLength(1);
    expect(lines.join('\n')).not.toContain('abc-secret');
  });

  it('marks a mail failed after maxAttempts and stops trying', async () => {
    smtp = await startFakeSmtp({ refuseRcpt: { times: 100, reply: '550 5.1.1 no such user' } });
    const clock = new StepClock();
    const d = new MailDispatcher({ db: t.db, transport: smtpTransport(parseSmtpUrl(smtp.url()), 'perkline@shop.test'), clock, logger, backoffMs: 10, maxAttempts: 3 });
    const id = await queue(clock, 'never delivered');
    for (let i = 0; i < 6; i++) {
      await d.runOnce();
      clock.advance(60_000);
    }
    expect(smtp.rcptAttempts).toBe(3);
    expect(await outboxRow(t.db, id)).toMatchObject({ state: 'failed', attempts: 3, last_error: 'RCPT refused: 550 5.1.1 no such user' });
  });
});

describe.skipIf(!postgresUp)('mail dispatcher on Postgres', () => {
  it('sends every mail exactly once when several dispatchers run at the same time', async () => {
    const t = await createTestDb('postgres');
    const smtp = await startFakeSmtp();
    try {
      const [a] = await t.db.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('Shop') RETURNING id`);
      const clock = new StepClock();
      for (let i = 0; i < 30; i++) await queueMail(t.db, { accountId: a!.id, kind: 'test', to: `u${i}@shop.test`, subject: `S${i}`, text: `m${i}` }, clock.now());
      const transport = smtpTransport(parseSmtpUrl(smtp.url()), 'perkline@shop.test');
      const dispatchers = [1, 2, 3, 4].map(() => new MailDispatcher({ db: t.db, transport, clock, logger: createLogger({ level: 'silent' }), batchSize: 5 }));
      const started = Date.now();
      let total = 0;
      for (let round = 0; round < 10 && total < 30; round++) {
        const sent = await Promise.all(dispatchers.map((d) => d.runOnce()));
        total += sent.reduce((x, y) => x + y, 0);
      }
      expect(total).toBe(30);
      const subjects = smtp.messages.map((m) => m.subject).sort();
      expect(subjects).toHaveLength(30);
      expect(new Set(subjects).size).toBe(30);
      const [left] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM mail_outbox WHERE state <> 'sent' OR attempts <> 1`);
      expect(left!.n).toBe(0);
      console.log(`[smtp] 4 dispatchers sent 30 mails in ${Date.now() - started} ms`);
    } finally {
      await smtp.close();
      await t.cleanup();
    }
  });
});
