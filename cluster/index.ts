// The cluster: NATS connection, shard leases, the router (the IntegrationPort that calls the local
// actors or the owner node over gRPC), and the node entry that wires every part together.
export { startNode, type NodeOptions, type RunningNode } from './node.js';
export { nodeOptionsFromEnv } from './config.js';
export { Router, type RouterOptions } from './router.js';
export { LocalShardMap, type ShardMap, type ShardOwner } from './shard-map.js';
export { createNatsConfigEvents } from './config-bus.js';
