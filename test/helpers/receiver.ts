// A real local HTTP receiver for webhook and notification tests: it records every request and
// answers as the test tells it (per path): a status, a sequence of statuses, or no answer until
// released. It counts deliveries the way a deduplicating receiver would, by X-Notification-Id.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  /** Path and query, as sent. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** What this receiver answered (undefined while held). */
  status?: number;
}

/** How a path is answered: a fixed status, statuses in turn (the last one repeats), or held. */
export type Answer = number | number[] | 'hold';

export class Receiver {
  readonly requests: Received[] = [];
  private readonly answers = new Map<string, Answer>();
  private readonly seen = new Map<string, number>();
  private held: Array<() => void> = [];
  private server!: http.Server;
  url = '';

  static async start(): Promise<Receiver> {
    const r = new Receiver();
    r.server = http.createServer((req, res) => r.handle(req, res));
    await new Promise<void>((resolve) => r.server.listen(0, '127.0.0.1', resolve));
    r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}`;
    return r;
  }

  /** How requests whose path starts with `prefix` are answered (default 200). */
  answer(prefix: string, answer: Answer): void {
    this.answers.set(prefix, answer);
  }

  /** Answers every held request with 200. */
  release(): void {
    const held = this.held;
    this.held = [];
    for (const go of held) go();
  }

  /** Requests to paths starting with `prefix`. */
  to(prefix: string): Received[] {
    return this.requests.filter((r) => r.url.startsWith(prefix));
  }

  /** Notifications processed once each, as a receiver that drops duplicates by X-Notification-Id would (2xx only). */
  delivered(prefix = '/'): Map<string, Received> {
    const out = new Map<string, Received>();
    for (const r of this.to(prefix)) {
      const id = String(r.headers['x-notification-id'] ?? '');
      if (r.status !== undefined && r.status >= 200 && r.status < 300 && !out.has(id)) out.set(id, r);
    }
    return out;
  }

  async stop(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      this.requests.push(received);
      const prefix = [...this.answers.keys()].filter((p) => received.url.startsWith(p)).sort((a, b) => b.length - a.length)[0];
      const answer = prefix === undefined ? 200 : this.answers.get(prefix)!;
      // A request whose sender is gone (its connection closed while held) gets no answer: it
      // was received, not delivered.
      const send = (status: number) => {
        if (req.socket.destroyed) return;
        received.status = status;
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ status }));
      };
      if (answer === 'hold') {
        this.held.push(() => send(200));
        return;
      }
      if (Array.isArray(answer)) {
        const n = this.seen.get(prefix!) ?? 0;
        this.seen.set(prefix!, n + 1);
        send(answer[Math.min(n, answer.length - 1)]!);
        return;
      }
      send(answer);
    });
  }
}
