// Outbound delivery: the dispatchers that send what use cases wrote to the outboxes in the same
// transaction as their changes (services/store outbox.ts). HTTP requests (rule-triggered webhooks
// and notifications) go out at least once with retries, signing and a log entry per attempt;
// mails go out over SMTP (or are only logged when no SMTP server is configured). Every node runs
// the dispatchers; rows are claimed so that nodes share the work without sending twice.
export { DispatchLoop, retryDelay, type DispatchLoopOptions } from '../shared/index.js';
export { OutboxDispatcher, type OutboxDispatcherOptions } from './outbox-dispatcher.js';
export { loggedTransport, MailDispatcher, smtpTransport, type MailDispatcherOptions, type MailTransport, type OutgoingMail } from './mail.js';
export * from './smtp.js';
