// Keyed actors: one mailbox per integration ID (one call runs, two wait, a further one gets the
// spec's 409), each keeping the state it owns; and the IntegrationPort that the edge and the gRPC
// layer call, implemented locally here and across nodes by the cluster router.
export { ActorHost, type ActorHostOptions } from './actor-host.js';
export { createLocalIntegrationPort, type ActorHandlers, type ActorState, type LocalPortOptions } from './local-port.js';
export * from './port.js';
export { integrationActorHandlers, type IntegrationServices } from './handlers.js';
