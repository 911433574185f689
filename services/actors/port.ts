// The IntegrationPort is what the edge (REST) and the gRPC layer call. The node entry hands them
// the cluster router, which implements it by calling the local actors or the owner node.

/** The Application an Integration API key resolved to. */
export interface AppRef {
  applicationId: number;
  accountId: number;
}

export interface UpdateSessionCall {
  app: AppRef;
  customerSessionId: string;
  /** IntegrationRequest as received (validated by the caller). */
  request: Record<string, unknown>;
  dry: boolean;
  /** RFC 3339, dry runs only. */
  now?: string | undefined;
}

export interface GetSessionCall {
  app: AppRef;
  customerSessionId: string;
}

export interface PortResult<T> {
  value: T;
  /** The node whose actor processed the call. */
  servedBy: string;
}

export type JsonObject = Record<string, unknown>;

export interface IntegrationPort {
  updateSession(call: UpdateSessionCall): Promise<PortResult<JsonObject>>;
  getSession(call: GetSessionCall): Promise<PortResult<JsonObject>>;
}

/** Every operation by name, as it crosses the wire between nodes. */
export const PortOperation = {
  updateSession: 'updateSession',
  getSession: 'getSession',
} as const;
export type PortOperation = (typeof PortOperation)[keyof typeof PortOperation];

/** The actor key (and so the shard key) of a call. */
export function actorKeyOf(operation: PortOperation, payload: UpdateSessionCall | GetSessionCall): string {
  switch (operation) {
    case 'updateSession':
    case 'getSession':
      return `s:${payload.app.applicationId}:${payload.customerSessionId}`;
  }
}
