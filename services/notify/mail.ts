// Mail of the Management API (invites, password recovery): use cases write a row to mail_outbox in
// the same transaction as their change (queueMail, services/store), so a mail is sent if and only
// if the change committed; the node's MailDispatcher sends due rows through a MailTransport (SMTP
// when configured, else a transport that only logs recipient and subject), retrying with backoff
// and marking a row failed after maxAttempts. Bodies may carry tokens: they are never logged, and
// blanked once sent or failed.
import { DispatchLoop, retryDelay, type Clock, type Logger } from '../shared/index.js';
import type { Db } from '../store/index.js';
import { sendSmtp, type SmtpOptions } from './smtp.js';

export interface OutgoingMail {
  to: string;
  subject: string;
  text: string;
}

export interface MailTransport {
  send(mail: OutgoingMail): Promise<void>;
}

/** For nodes without SMTP: says that a mail would have gone out, without its body. */
export function loggedTransport(logger: Logger): MailTransport {
  return {
    send: async (mail) => {
      logger.info('mail not sent (no SMTP_URL configured)', { to: mail.to, subject: mail.subject });
    },
  };
}

export function smtpTransport(smtp: SmtpOptions, from: string): MailTransport {
  return { send: (mail) => sendSmtp(smtp, { from, ...mail }) };
}

export interface MailDispatcherOptions {
  db: Db;
  transport: MailTransport;
  clock: Clock;
  logger: Logger;
  /** How often due mails are looked for (default 1000 ms). */
  pollMs?: number;
  /** Attempts before a mail is marked failed (default 5). */
  maxAttempts?: number;
  /** First retry delay, doubled each attempt, capped at 1 h (default 1000 ms). */
  backoffMs?: number;
  /** How long a claimed mail is left to its sender before another node may retry it (default 60 s). */
  claimMs?: number;
  /** Mails claimed per round (default 20). */
  batchSize?: number;
}

/**
 * Sends due outbox rows. Rows are claimed with a conditional update that moves next_attempt_at
 * forward, so several nodes may run dispatchers on one database without sending a mail twice
 * (short of a node dying between the SMTP answer and the update: delivery is at least once).
 */
export class MailDispatcher extends DispatchLoop {
  private readonly maxAttempts: number;
  private readonly backoffMs: number;
  private readonly claimMs: number;
  private readonly batchSize: number;

  constructor(private readonly options: MailDispatcherOptions) {
    super({ logger: options.logger, pollMs: options.pollMs, name: 'mail dispatch' });
    this.maxAttempts = options.maxAttempts ?? 5;
    this.backoffMs = options.backoffMs ?? 1000;
    this.claimMs = options.claimMs ?? 60_000;
    this.batchSize = options.batchSize ?? 20;
  }

  /** One round: claims the due mails and sends each; returns how many were sent. */
  async runOnce(): Promise<number> {
    const { db, clock } = this.options;
    const now = clock.now();
    const claimed = await db.query<{ id: string; recipient: string; subject: string; body: string; attempts: number }>(
      `UPDATE mail_outbox SET attempts = attempts + 1, next_attempt_at = $2
        WHERE id IN (SELECT id FROM mail_outbox WHERE state = 'pending' AND next_attempt_at <= $1
                      ORDER BY next_attempt_at, id LIMIT ${this.batchSize} FOR UPDATE SKIP LOCKED)
          AND state = 'pending' AND next_attempt_at <= $1
        RETURNING id, recipient, subject, body, attempts`,
      [now.toISOString(), new Date(now.getTime() + this.claimMs).toISOString()],
    );
    let sent = 0;
    for (const row of claimed) {
      try {
        await this.options.transport.send({ to: row.recipient, subject: row.subject, text: row.body });
        await db.query(`UPDATE mail_outbox SET state = 'sent', sent_at = $2, body = '', last_error = NULL WHERE id = $1`, [
          row.id,
          clock.now().toISOString(),
        ]);
        sent++;
        this.logger.debug('mail sent', { id: row.id, to: row.recipient, subject: row.subject });
      } catch (e) {
        const error = String((e as Error)?.message ?? e).slice(0, 500);
        if (row.attempts >= this.maxAttempts) {
          // Never sent, never retried: its body (which may hold a live token) is of no use any more.
          await db.query(`UPDATE mail_outbox SET state = 'failed', body = '', last_error = $2 WHERE id = $1`, [row.id, error]);
          this.logger.warn('mail failed for good', { id: row.id, to: row.recipient, attempts: row.attempts, error });
        } else {
          // No jitter: a mail relay is one receiver, not many coming back at once.
          const delay = retryDelay(row.attempts, this.backoffMs, 3600_000, () => 1);
          await db.query(`UPDATE mail_outbox SET next_attempt_at = $2, last_error = $3 WHERE id = $1`, [
            row.id,
            new Date(clock.now().getTime() + delay).toISOString(),
            error,
          ]);
          this.logger.debug('mail will be retried', { id: row.id, attempts: row.attempts, error });
        }
      }
    }
    return sent;
  }
}
