// gRPC: the public IntegrationService (same API keys as REST, sent as `authorization` metadata)
// and the internal ActorService that nodes use to forward calls to a shard's owner, on one port;
// with the one mapping of the error taxonomy to gRPC status.
export { startGrpcServer, GRPC_MAX_MESSAGE_BYTES, type GrpcServerOptions, type RunningGrpcServer } from './server.js';
export { toServiceError, fromServiceError, ERROR_METADATA_KEY } from './status.js';
