// A tiny SMTP server over node:net for tests: it speaks just enough of the protocol for the
// client in services/management/smtp.ts, records every accepted message, and can be told to
// refuse EHLO, require AUTH PLAIN or refuse recipients for a number of attempts.
import net from 'node:net';

export interface ReceivedMail {
  helo: string;
  auth?: { user: string; password: string };
  from: string;
  to: string[];
  /** What came after DATA, dot-stuffing undone, CRLF line ends. */
  data: string;
  /** The same before dot-stuffing was undone, as it crossed the wire. */
  raw: string;
  subject: string;
  body: string;
}

export interface FakeSmtpOptions {
  /** Answer EHLO with 502, so the client must fall back to HELO. */
  refuseEhlo?: boolean;
  /** Require AUTH PLAIN with these credentials before MAIL FROM. */
  auth?: { user: string; password: string };
  /** How many RCPT TO commands to refuse before accepting, and with which reply. */
  refuseRcpt?: { times: number; reply: string };
}

export interface FakeSmtp {
  port: number;
  url: (user?: string, password?: string) => string;
  messages: ReceivedMail[];
  rcptAttempts: number;
  options: FakeSmtpOptions;
  close(): Promise<void>;
}

export async function startFakeSmtp(options: FakeSmtpOptions = {}): Promise<FakeSmtp> {
  const state: FakeSmtp = {
    port: 0,
    url: (user, password) =>
      `smtp://${user !== undefined ? `${encodeURIComponent(user)}:${encodeURIComponent(password ?? '')}@` : ''}127.0.0.1:${state.port}`,
    messages: [],
    rcptAttempts: 0,
    options,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const reply = (line: string) => socket.write(line + '\r\n');
    let buffer = '';
    let inData = false;
    let dataLines: string[] = [];
    let mail: Partial<ReceivedMail> & { to: string[] } = { to: [] };
    let helo = '';
    let authed: ReceivedMail['auth'];
    reply('220 fake.test ESMTP ready');
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      let i: number;
      while ((i = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            const raw = dataLines.join('\r\n');
            const data = dataLines.map((l) => (l.startsWith('.') ? l.slice(1) : l)).join('\r\n');
            const [head, ...rest] = data.split('\r\n\r\n');
            const subject = /^Subject: (.*)$/m.exec(head ?? '')?.[1] ?? '';
            state.messages.push({ helo, ...(authed ? { auth: authed } : {}), from: mail.from ?? '', to: mail.to, data, raw, subject, body: rest.join('\r\n\r\n') });
            mail = { to: [] };
            dataLines = [];
            reply('250 2.0.0 queued');
          } else {
            dataLines.push(line);
          }
          continue;
        }
        const [verb = '', ...args] = line.split(' ');
        switch (verb.toUpperCase()) {
          case 'EHLO':
            if (options.refuseEhlo) reply('502 5.5.1 EHLO not supported');
            else {
              helo = args.join(' ');
              reply('250-fake.test greets you');
              reply('250-8BITMIME');
              reply(`250 AUTH PLAIN`);
            }
            break;
          case 'HELO':
            helo = args.join(' ');
            reply('250 fake.test');
            break;
          case 'AUTH': {
            const decoded = Buffer.from(args[1] ?? '', 'base64').toString('utf8').split('\0');
            const [, user = '', password = ''] = decoded;
            if (args[0] === 'PLAIN' && options.auth && user === options.auth.user && password === options.auth.password) {
              authed = { user, password };
              reply('235 2.7.0 Authentication successful');
            } else reply('535 5.7.8 Authentication credentials invalid');
            break;
          }
          case 'MAIL':
            if (options.auth && !authed) reply('530 5.7.0 Authentication required');
            else {
              mail.from = /<(.*)>/.exec(line)?.[1] ?? '';
              reply('250 2.1.0 OK');
            }
            break;
          case 'RCPT':
            state.rcptAttempts++;
            if (options.refuseRcpt && options.refuseRcpt.times > 0) {
              options.refuseRcpt.times--;
              reply(options.refuseRcpt.reply);
            } else {
              mail.to.push(/<(.*)>/.exec(line)?.[1] ?? '');
              reply('250 2.1.5 OK');
            }
            break;
          case 'DATA':
            inData = true;
            reply('354 End data with <CR><LF>.<CR><LF>');
            break;
          case 'RSET':
            mail = { to: [] };
            reply('250 OK');
            break;
          case 'QUIT':
            reply('221 2.0.0 Bye');
            socket.end();
            break;
          default:
            reply('500 5.5.2 unknown command');
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  state.port = (server.address() as net.AddressInfo).port;
  const close = state.close;
  state.close = async () => {
    for (const s of sockets) s.destroy();
    await close();
  };
  return state;
}
