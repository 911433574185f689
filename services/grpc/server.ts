import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from '@grpc/grpc-js';
import { ActorServiceService, type ActorCall, type ActorReply } from '../../proto/gen/perkline/v1/actor.js';
import {
  IntegrationServiceService,
  type GetCustomerSessionRequest,
  type GetCustomerSessionResponse,
  type IntegrationStateResponse,
  type UpdateCustomerSessionRequest,
} from '../../proto/gen/perkline/v1/integration.js';
import type { AppRef, IntegrationPort } from '../actors/port.js';
import { badRequest, type Logger, silentLogger } from '../shared/index.js';
import { toServiceError } from './status.js';

export const GRPC_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface GrpcServerOptions {
  port: IntegrationPort;
  /** Resolves the `authorization` metadata (ApiKey-v1 <key>) to an Application. */
  authenticate: (authorization: string | undefined) => Promise<AppRef>;
  /** Validates a request body against the REST contract, by OpenAPI operationId. */
  validateBody?: (operationId: string, body: unknown) => void;
  /** Serves a call forwarded by another node (internal ActorService). */
  actorInvoke?: (call: ActorCall) => Promise<ActorReply>;
  logger?: Logger;
}

export interface RunningGrpcServer {
  /** The port bound (useful with port 0). */
  port: number;
  stop(): Promise<void>;
}

function unary<Req, Res>(fn: (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>, logger: Logger) {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
    fn(call.request, call).then(
      (res) => callback(null, res),
      (err: unknown) => {
        const se = toServiceError(err);
        if (se.code === 13) logger.error('grpc call failed', { error: String((err as Error)?.stack ?? err) });
        callback(se, null);
      },
    );
  };
}

/** One gRPC server per node: the public IntegrationService and the internal ActorService. */
export async function startGrpcServer(options: GrpcServerOptions, address: string): Promise<RunningGrpcServer> {
  const logger = options.logger ?? silentLogger;
  const server = new Server({
    'grpc.max_receive_message_length': GRPC_MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': GRPC_MAX_MESSAGE_BYTES,
  });
  const auth = (call: ServerUnaryCall<unknown, unknown>) => {
    const value = call.metadata.get('authorization')[0];
    return options.authenticate(typeof value === 'string' ? value : undefined);
  };

  server.addService(IntegrationServiceService, {
    updateCustomerSession: unary<UpdateCustomerSessionRequest, IntegrationStateResponse>(async (req, call) => {
      const app = await auth(call);
      if (!req.customerSessionId) throw badRequest('customer_session_id is required', '/customerSessionId');
      const body = req.request ?? {};
      options.validateBody?.('updateCustomerSessionV2', body);
      const r = await options.port.invoke('updateSession', {
        app,
        customerSessionId: req.customerSessionId,
        request: body,
        dry: req.dry,
        now: req.now || undefined,
      });
      return { state: r.value };
    }, logger),
    getCustomerSession: unary<GetCustomerSessionRequest, GetCustomerSessionResponse>(async (req, call) => {
      const app = await auth(call);
      if (!req.customerSessionId) throw badRequest('customer_session_id is required', '/customerSessionId');
      const r = await options.port.invoke('getSession', { app, customerSessionId: req.customerSessionId });
      return { response: r.value };
    }, logger),
  });

  if (options.actorInvoke) {
    const invoke = options.actorInvoke;
    server.addService(ActorServiceService, {
      invoke: unary<ActorCall, ActorReply>((req) => invoke(req), logger),
    });
  }

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}
