// A minimal SMTP client over node:net, enough to hand the Management API's mails (invites,
// password recovery) to a relay: EHLO (HELO when the server refuses EHLO), optional AUTH PLAIN,
// MAIL FROM, RCPT TO, DATA with dot-stuffing, QUIT. No TLS: point it at a relay on a trusted
// network (or a local MTA that does TLS onwards). Retries are the outbox dispatcher's business.
import { connect, type Socket } from 'node:net';
import { randomUUID } from 'node:crypto';

export interface SmtpOptions {
  host: string;
  port: number;
  user?: string;
  password?: string;
  /** Name sent in EHLO/HELO (default `localhost`). */
  heloName?: string;
  /** Per-reply timeout (default 15 s). */
  timeoutMs?: number;
}

export interface SmtpMessage {
  from: string;
  to: string;
  subject: string;
  text: string;
}

export class SmtpError extends Error {
  constructor(
    message: string,
    /** The server's reply code, when the server answered. */
    readonly code?: number,
  ) {
    super(message);
    this.name = 'SmtpError';
  }
}

/** `smtp://user:pass@host:port` (port default 25; user and password URL-encoded). */
export function parseSmtpUrl(url: string): SmtpOptions {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error('SMTP_URL must look like smtp://user:pass@host:port');
  }
  if (u.protocol !== 'smtp:' || !u.hostname) throw new Error('SMTP_URL must look like smtp://user:pass@host:port');
  const options: SmtpOptions = { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port ? Number(u.port) : 25 };
  if (u.username) options.user = decodeURIComponent(u.username);
  if (u.password) options.password = decodeURIComponent(u.password);
  return options;
}

/** Sends one message; resolves when the server accepted it (250 after DATA). */
export async function sendSmtp(options: SmtpOptions, message: SmtpMessage): Promise<void> {
  for (const [what, v] of [['from', message.from], ['to', message.to]] as const) {
    // An address with line breaks or brackets could smuggle commands or headers.
    if (!/^[^\s<>]+@[^\s<>]+$/.test(v)) throw new SmtpError(`invalid ${what} address`);
  }
  const conn = await SmtpConnection.open(options);
  try {
    await conn.expect(null, [220]);
    const name = options.heloName ?? 'localhost';
    const ehlo = await conn.command(`EHLO ${name}`);
    if (ehlo.code !== 250) await conn.expect(`HELO ${name}`, [250]);
    if (options.user !== undefined) {
      const credentials = Buffer.from(`\0${options.user}\0${options.password ?? ''}`, 'utf8').toString('base64');
      await conn.expect(`AUTH PLAIN ${credentials}`, [235], 'AUTH');
    }
    await conn.expect(`MAIL FROM:<${message.from}>`, [250]);
    await conn.expect(`RCPT TO:<${message.to}>`, [250, 251]);
    await conn.expect('DATA', [354]);
    await conn.expect(formatMessage(message) + '\r\n.', [250], 'DATA');
    await conn.command('QUIT').catch(() => undefined);
  } finally {
    conn.close();
  }
}

/** Headers and body as sent after DATA (without the final dot), CRLF line ends, dot-stuffed. */
export function formatMessage(message: SmtpMessage, date = new Date()): string {
  const domain = message.from.split('@')[1] ?? 'localhost';
  const headers = [
    `From: ${message.from}`,
    `To: ${message.to}`,
    `Subject: ${encodeHeader(message.subject)}`,
    `Date: ${date.toUTCString()}`,
    `Message-ID: <${randomUUID()}@${domain}>`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: 8bit',
  ];
  const body = message.text.replace(/\r\n|\r|\n/g, '\n').split('\n');
  // A line that starts with a dot gets one more, so that a lone "." cannot end DATA early.
  return [...headers, '', ...body].map((line) => (line.startsWith('.') ? '.' + line : line)).join('\r\n');
}

/** A header value without line breaks, RFC 2047-encoded when it is not plain ASCII. */
function encodeHeader(value: string): string {
  const flat = value.replace(/[\r\n]+/g, ' ');
  return /^[\x20-\x7e]*$/.test(flat) ? flat : `=?UTF-8?B?${Buffer.from(flat, 'utf8').toString('base64')}?=`;
}

interface Reply {
  code: number;
  text: string;
}

class SmtpConnection {
  private buffer = '';
  private lines: string[] = [];
  private waiter: (() => void) | undefined;
  private failure: Error | undefined;

  private constructor(
    private readonly socket: Socket,
    private readonly timeoutMs: number,
  ) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      let i: number;
      while ((i = this.buffer.indexOf('\n')) >= 0) {
        this.lines.push(this.buffer.slice(0, i).replace(/\r$/, ''));
        this.buffer = this.buffer.slice(i + 1);
      }
      this.wake();
    });
    socket.on('error', (e) => this.fail(new SmtpError(`connection failed: ${e.message}`)));
    socket.on('close', () => this.fail(new SmtpError('connection closed by the server')));
  }

  static open(options: SmtpOptions): Promise<SmtpConnection> {
    const timeoutMs = options.timeoutMs ?? 15_000;
    return new Promise((resolve, reject) => {
      const socket = connect({ host: options.host, port: options.port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new SmtpError(`connection to ${options.host}:${options.port} timed out`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new SmtpConnection(socket, timeoutMs));
      });
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(new SmtpError(`connection to ${options.host}:${options.port} failed: ${e.message}`));
      });
    });
  }

  /** Sends a line (unless null) and reads the reply, whatever its code. */
  async command(line: string | null): Promise<Reply> {
    if (line !== null) this.socket.write(line + '\r\n');
    return this.reply();
  }

  /** Sends a line and requires one of the codes; `label` names the command in errors instead of the line (which may hold credentials or the message). */
  async expect(line: string | null, codes: number[], label?: string): Promise<Reply> {
    const r = await this.command(line);
    if (!codes.includes(r.code)) {
      const what = label ?? (line === null ? 'greeting' : line.split(' ')[0]);
      throw new SmtpError(`${what} refused: ${r.code} ${r.text}`, r.code);
    }
    return r;
  }

  close(): void {
    this.socket.destroy();
  }

  /** One reply: lines `NNN-text` continue it, `NNN text` ends it. */
  private async reply(): Promise<Reply> {
    const texts: string[] = [];
    for (;;) {
      const line = await this.nextLine();
      const m = /^(\d{3})([ -]?)(.*)$/.exec(line);
      if (!m) throw new SmtpError(`malformed reply: ${line.slice(0, 100)}`);
      texts.push(m[3]!);
      if (m[2] !== '-') return { code: Number(m[1]), text: texts.join(' ') };
    }
  }

  private async nextLine(): Promise<string> {
    while (this.lines.length === 0) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.waiter = undefined;
          reject(new SmtpError('timed out waiting for the server'));
        }, this.timeoutMs);
        this.waiter = () => {
          clearTimeout(timer);
          this.waiter = undefined;
          resolve();
        };
      });
    }
    return this.lines.shift()!;
  }

  private wake(): void {
    this.waiter?.();
  }

  private fail(e: Error): void {
    this.failure ??= e;
    this.wake();
  }
}
