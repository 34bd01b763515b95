import { createHmac } from "node:crypto";

/**
 * What tests/integration/typescript/test_node_suite.py (and the acceptance
 * wrapper) started for these tests, passed in environment variables.
 */
export interface Servers {
  redisUrl: string;
  /** The queue a real worker serves. */
  queueName: string;
  telemetryIdKey: string;
  /** The memory API, and service keys: handover + read, read alone, all three scopes. */
  apiUrl: string;
  serviceKey: string;
  readKey: string;
  adminKey: string;
  /** The API's MEMFLEET_JWT_SECRET, to mint end users' tokens. */
  jwtSecret: string;
  /** A port that accepts connections and never answers; a closed port. */
  silentUrl: string;
  closedUrl: string;
  /** The LLM stub (api_stub/llm_stub.py): scripted model answers, tool calls too. */
  stubUrl: string;
}

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through pytest`);
  return value;
}

export function servers(): Servers {
  return {
    redisUrl: need("MEMFLEET_TEST_REDIS_URL"),
    queueName: need("MEMFLEET_TEST_QUEUE"),
    telemetryIdKey: need("MEMFLEET_TEST_TELEMETRY_ID_KEY"),
    apiUrl: need("MEMFLEET_TEST_API_URL"),
    serviceKey: need("MEMFLEET_TEST_SERVICE_KEY"),
    readKey: need("MEMFLEET_TEST_READ_KEY"),
    adminKey: need("MEMFLEET_TEST_ADMIN_KEY"),
    jwtSecret: need("MEMFLEET_TEST_JWT_SECRET"),
    silentUrl: need("MEMFLEET_TEST_SILENT_REDIS_URL"),
    closedUrl: need("MEMFLEET_TEST_CLOSED_REDIS_URL"),
    stubUrl: need("MEMFLEET_TEST_LLM_STUB_URL"),
  };
}

/** A name no other test run uses. */
export function fresh(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}

/** An end user's token for the API (docs/api.md, "Tokens"): HS256, sub, iat, exp. */
export function userToken(userId: string, secret: string, lifetimeS = 600): string {
  const b64 = (value: string | Buffer): string => Buffer.from(value).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const head = b64(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const body = b64(JSON.stringify({ sub: userId, iat: now, exp: now + lifetimeS }));
  const signature = createHmac("sha256", secret).update(`${head}.${body}`).digest();
  return `${head}.${body}.${b64(signature)}`;
}
