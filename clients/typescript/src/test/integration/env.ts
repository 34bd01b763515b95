/**
 * What tests/integration/typescript/test_node_suite.py (and the acceptance
 * wrapper) started for these tests, passed in environment variables.
 */
export interface Servers {
  redisUrl: string;
  /** The queue a real worker serves. */
  queueName: string;
  telemetryIdKey: string;
  /** The memory API, and service keys: handover + read, read alone. */
  apiUrl: string;
  serviceKey: string;
  readKey: string;
  /** A port that accepts connections and never answers; a closed port. */
  silentUrl: string;
  closedUrl: string;
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
    silentUrl: need("MEMFLEET_TEST_SILENT_REDIS_URL"),
    closedUrl: need("MEMFLEET_TEST_CLOSED_REDIS_URL"),
  };
}

/** A name no other test run uses. */
export function fresh(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}
